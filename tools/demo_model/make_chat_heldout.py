#!/usr/bin/env python3
"""Seeded generator of held-out chat questions for the demo model: the arithmetic of its training
problems asked the way a person types into a chat box, in wordings and step orders that no training
template produces (make_data.py's templates never write these sentences). Each line is
{"question": ..., "answer": "N", "family": ...}; the answer is the exact result.

The showcase question of scripts/demo.sh ("Lena has 14 stickers. She buys 3 packs with 5 stickers in
each pack...") belongs to the family "has_then_buys_packs"; the file is built from a seed of its own,
so the showcase itself is not among the lines.

Pure python, no dependencies. usage: make_chat_heldout.py --out FILE [--seed 20261201] [--per-family 20]
"""
import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_data import CONTAINERS, GROUPS, PRICED, Pick, Retry, cap, need, step  # noqa: E402


def has_then_buys_packs(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    a, k, per = p.n(2, 60), p.n(2, 9), p.n(2, 12)
    return (f"{n} has {a} {pl}. {cap(s)} buys {k} {cp} with {per} {pl} in each {cs}. "
            f"How many {pl} does {s} have now?"), step(a, "+", step(k, "*", per))


def gives_then_buys(p):
    n, s, _, _ = p.person()
    n2 = p.person(n)[0]
    _, pl = p.thing()
    a = p.n(10, 120)
    g = p.n(1, a - 1)
    b = p.n(1, 60)
    return (f"{n} has {a} {pl}. {cap(s)} gives {g} to {n2} and then buys {b} more. "
            f"How many {pl} does {s} have now?"), step(step(a, "-", g), "+", b)


def containers_take_out(p):
    n, _, _, _ = p.person()
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    k, per = p.n(2, 9), p.n(2, 15)
    x = step(k, "*", per)
    t = p.n(1, x - 1)
    return (f"There are {k} {cp} with {per} {pl} in each {cs}. {n} takes {t} {pl} out. "
            f"How many {pl} are left?"), step(x, "-", t)


def spends_on_item(p):
    n, s, _, _ = p.person()
    sg, _ = p.choice(PRICED)
    m = p.n(10, 150)
    x = p.n(1, m - 1)
    return f"{n} has ${m}. {cap(s)} spends ${x} on a {sg}. How much money is left?", step(m, "-", x)


def more_than_other(p):
    n, _, _, _ = p.person()
    n2 = p.person(n)[0]
    _, pl = p.thing()
    a, b = p.n(2, 90), p.n(1, 60)
    return f"{n} has {a} {pl}. {n2} has {b} more {pl} than {n}. How many {pl} does {n2} have?", step(a, "+", b)


def share_among_group(p):
    _, pl = p.thing()
    grp = p.choice(GROUPS)
    k = p.n(2, 9)
    each = p.n(2, 20)
    a = step(k, "*", each)
    return f"{k} {grp[0]} share {a} {pl} equally. How many {pl} does each {grp[1]} get?", step(a, "/", k)


def buys_at_price(p):
    n, s, _, _ = p.person()
    _, pl = p.choice(PRICED)
    k, price = p.n(2, 9), p.n(2, 20)
    return f"{n} buys {k} {pl} at ${price} each. How much money does {s} spend?", step(k, "*", price)


def loses_then_finds(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    a = p.n(10, 150)
    b = p.n(1, a - 1)
    c = p.n(1, 40)
    return (f"{n} had {a} {pl}. {cap(s)} lost {b} of them, but later found {c}. "
            f"How many {pl} does {s} have?"), step(step(a, "-", b), "+", c)


def total_of_two_days(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    a, b = p.n(2, 90), p.n(2, 90)
    return (f"On Monday {n} collects {a} {pl}. On Tuesday {s} collects {b} more. "
            f"How many {pl} does {s} have altogether?"), step(a, "+", b)


def rows_of_items(p):
    n, _, _, _ = p.person()
    _, pl = p.thing()
    r, k = p.n(2, 12), p.n(2, 15)
    return f"{n} puts {pl} in {r} rows with {k} {pl} in each row. How many {pl} are there?", step(r, "*", k)


FAMILIES = [has_then_buys_packs, gives_then_buys, containers_take_out, spends_on_item, more_than_other,
            share_among_group, buys_at_price, loses_then_finds, total_of_two_days, rows_of_items]


def generate(seed, per_family):
    rng = random.Random(seed)
    rows, seen = [], set()
    for family in FAMILIES:
        made = 0
        while made < per_family:
            try:
                question, answer = family(Pick(rng))
            except Retry:
                continue
            if question in seen:
                continue
            seen.add(question)
            rows.append({"question": question, "answer": str(answer), "family": family.__name__})
            made += 1
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--per-family", type=int, default=20)
    args = ap.parse_args()
    rows = generate(args.seed, args.per_family)
    with open(args.out, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} questions in {len(FAMILIES)} families -> {args.out}")


if __name__ == "__main__":
    main()
