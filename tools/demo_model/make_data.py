#!/usr/bin/env python3
"""Seeded generator of synthetic grade-school arithmetic word problems in gsm8k's format.

Each problem is a JSON line {"question": ..., "answer": ...}. The answer is a short worked solution,
one line per step with calculator annotations as gsm8k writes them ("3+4=<<3+4=7>>7"), and a last
line "#### N". Problems take one to three steps over small non-negative integers (every operand,
intermediate and answer lies in [0, 199]) with +, -, * and exact /.

The held-out test split is drawn first, then the train split, from one seeded stream; a train
question never equals a test question (nor another train question), so the first K lines of a
large train split equal a smaller train split made with the same seed.

Also writes chat.jsonl: conversations ({"messages": [...], "answer": "N" or null}) that exercise
the chat-template path: greetings, single problems, multi-turn problems and the few-shot-as-
multi-turn form that an accuracy harness sends.

Also writes tool_calls.jsonl: held-out conversations that offer tools (TOOLS: add, subtract, multiply
with integer arguments a and b; get_weather with a string city), rendered by CHAT_TEMPLATE with a
Qwen/Hermes-style tools block. "call" items end with the user turn and carry the expected call
({"name", "arguments"}); "answer" items end with the tool result and carry the expected answer.

Also writes, with --paraphrase-size N, paraphrase.jsonl: N more training problems in many other
wordings (paraphrase.py), drawn from a seeded stream of their own (seed + 3), so the files above are
the same with or without them. A paraphrase never repeats a test or train question, and none has
the skeleton (paraphrase.skeleton) of a held-out chat question of --heldout: those are dropped
and counted (check_heldout_skeletons.py verifies the result).

Pure python, no dependencies.

usage: make_data.py --out DIR [--seed 20261130] [--test-size 500] [--train-size 1000]
                    [--chat-size 20] [--tool-size 200] [--paraphrase-size 0] [--heldout FILE]
"""
import argparse
import json
import os
import random
import re
import sys

MAX_VALUE = 199

# name, subject pronoun, object pronoun, possessive
PEOPLE = [
    ("Tom", "he", "him", "his"), ("Anna", "she", "her", "her"), ("Liam", "he", "him", "his"),
    ("Maya", "she", "her", "her"), ("Omar", "he", "him", "his"), ("Sofia", "she", "her", "her"),
    ("Ben", "he", "him", "his"), ("Lucy", "she", "her", "her"), ("Ravi", "he", "him", "his"),
    ("Emma", "she", "her", "her"), ("Jack", "he", "him", "his"), ("Nora", "she", "her", "her"),
    ("Carlos", "he", "him", "his"), ("Mia", "she", "her", "her"), ("Kenji", "he", "him", "his"),
    ("Grace", "she", "her", "her"), ("Sam", "he", "him", "his"), ("Zoe", "she", "her", "her"),
    ("Leo", "he", "him", "his"), ("Ella", "she", "her", "her"), ("Noah", "he", "him", "his"),
    ("Ava", "she", "her", "her"), ("Ivan", "he", "him", "his"), ("Chloe", "she", "her", "her"),
    ("Max", "he", "him", "his"), ("Lily", "she", "her", "her"), ("Ali", "he", "him", "his"),
    ("Hana", "she", "her", "her"), ("Owen", "he", "him", "his"), ("Ruby", "she", "her", "her"),
    ("Felix", "he", "him", "his"), ("Ivy", "she", "her", "her"), ("Diego", "he", "him", "his"),
    ("Amara", "she", "her", "her"), ("Hugo", "he", "him", "his"), ("Priya", "she", "her", "her"),
    ("Mark", "he", "him", "his"), ("Julia", "she", "her", "her"), ("Theo", "he", "him", "his"),
    ("Sara", "she", "her", "her"), ("Paul", "he", "him", "his"), ("Nina", "she", "her", "her"),
    ("Adam", "he", "him", "his"), ("Olga", "she", "her", "her"), ("Yusuf", "he", "him", "his"),
    ("Elena", "she", "her", "her"), ("Luca", "he", "him", "his"), ("Rosa", "she", "her", "her"),
]

# singular, plural
THINGS = [
    ("apple", "apples"), ("orange", "oranges"), ("pencil", "pencils"), ("sticker", "stickers"),
    ("marble", "marbles"), ("book", "books"), ("cookie", "cookies"), ("cupcake", "cupcakes"),
    ("toy car", "toy cars"), ("shell", "shells"), ("stamp", "stamps"), ("card", "cards"),
    ("balloon", "balloons"), ("flower", "flowers"), ("egg", "eggs"), ("candy", "candies"),
    ("crayon", "crayons"), ("button", "buttons"), ("bead", "beads"), ("rock", "rocks"),
    ("lemon", "lemons"), ("muffin", "muffins"), ("plum", "plums"), ("peach", "peaches"),
    ("coin", "coins"), ("ribbon", "ribbons"), ("puzzle", "puzzles"), ("comic", "comics"),
    ("feather", "feathers"), ("leaf", "leaves"), ("strawberry", "strawberries"), ("banana", "bananas"),
]
FOOD = {"apple", "orange", "cookie", "cupcake", "egg", "candy", "lemon", "muffin", "plum", "peach",
        "strawberry", "banana"}

# singular, plural
CONTAINERS = [("box", "boxes"), ("bag", "bags"), ("basket", "baskets"), ("jar", "jars"),
              ("pack", "packs"), ("crate", "crates"), ("tray", "trays"), ("carton", "cartons"),
              ("tin", "tins"), ("bucket", "buckets")]

# singular, plural
PRICED = [("notebook", "notebooks"), ("pen", "pens"), ("toy", "toys"), ("sandwich", "sandwiches"),
          ("ticket", "tickets"), ("ball", "balls"), ("hat", "hats"), ("kite", "kites"),
          ("mug", "mugs"), ("game", "games"), ("shirt", "shirts"), ("plant", "plants"),
          ("lamp", "lamps"), ("scarf", "scarves"), ("bottle of juice", "bottles of juice")]

PLACES = ["basket", "box", "bowl", "drawer", "jar", "bag", "cupboard", "chest"]
GET_VERBS = [("buys", "bought"), ("finds", "found"), ("gets", "got"), ("collects", "collected"),
             ("picks up", "picked up"), ("receives", "received")]
GROUPS = [("friends", "friend"), ("classmates", "classmate"), ("cousins", "cousin"),
          ("teammates", "teammate"), ("neighbors", "neighbor")]


class Retry(Exception):
    pass


def need(cond):
    if not cond:
        raise Retry()


def ok(*values):
    for v in values:
        need(0 <= v <= MAX_VALUE)


def step(a, op, b):
    """Computes an exact step; raises Retry when the result leaves the allowed range."""
    if op == "+":
        c = a + b
    elif op == "-":
        c = a - b
    elif op == "*":
        c = a * b
    else:
        need(b != 0 and a % b == 0)
        c = a // b
    ok(a, b, c)
    return c


def ann(a, op, b, c):
    return f"{a}{op}{b}=<<{a}{op}{b}={c}>>{c}"


def ann3(a, op1, b, op2, d, c):
    return f"{a}{op1}{b}{op2}{d}=<<{a}{op1}{b}{op2}{d}={c}>>{c}"


def cap(s):
    return s[0].upper() + s[1:]


class Pick:
    def __init__(self, rng):
        self.rng = rng

    def person(self, *avoid):
        while True:
            p = self.rng.choice(PEOPLE)
            if p[0] not in avoid:
                return p

    def thing(self, food=None):
        while True:
            t = self.rng.choice(THINGS)
            if food is None or (t[0] in FOOD) == food:
                return t

    def n(self, lo, hi):
        return self.rng.randint(lo, hi)

    def choice(self, xs):
        return self.rng.choice(xs)


# ---------------------------------------------------------------- one step

def t_add(p):
    n, s, o, _ = p.person()
    n2 = p.person(n)[0]
    _, pl = p.thing()
    a, b = p.n(2, 99), p.n(2, 99)
    c = step(a, "+", b)
    verb = p.choice(GET_VERBS)
    place = p.choice(PLACES)
    q = p.choice([
        f"{n} has {a} {pl}. {cap(s)} {verb[0]} {b} more {pl}. How many {pl} does {n} have now?",
        f"{n} had {a} {pl}. {n2} gave {o} {b} more. How many {pl} does {n} have in total?",
        f"There are {a} {pl} in the {place}. {n} puts {b} more {pl} in the {place}. "
        f"How many {pl} are in the {place} now?",
        f"{n} {verb[1]} {a} {pl} on Monday and {b} {pl} on Tuesday. How many {pl} did {s} get altogether?",
    ])
    if q.startswith("There"):
        sol = [f"There are {ann(a, '+', b, c)} {pl} in the {place} now."]
    elif " on Monday " in q:
        sol = [f"{cap(s)} got {ann(a, '+', b, c)} {pl} altogether."]
    else:
        sol = [f"{n} has {ann(a, '+', b, c)} {pl} now."]
    return q, sol, c


def t_sub(p):
    n, s, o, _ = p.person()
    n2 = p.person(n)[0]
    sg, pl = p.thing()
    a = p.n(5, 199)
    b = p.n(1, a - 1)
    c = step(a, "-", b)
    lose = "eats" if sg in FOOD else p.choice(["loses", "sells", "gives away"])
    q = p.choice([
        f"{n} has {a} {pl}. {cap(s)} gives {b} {pl} to {n2}. How many {pl} does {n} have left?",
        f"{n} had {a} {pl} and {lose} {b} of them. How many {pl} does {s} have left?",
        f"A shop had {a} {pl}. It sold {b} {pl}. How many {pl} does the shop have left?",
    ])
    if q.startswith("A shop"):
        sol = [f"The shop has {ann(a, '-', b, c)} {pl} left."]
    else:
        sol = [f"{n} has {ann(a, '-', b, c)} {pl} left."]
    return q, sol, c


def t_mul(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    a, b = p.n(2, 12), p.n(2, 20)
    c = step(a, "*", b)
    q = p.choice([
        f"{n} has {a} {cp} with {b} {pl} in each {cs}. How many {pl} does {n} have?",
        f"Each {cs} holds {b} {pl}. How many {pl} are in {a} {cp}?",
        f"{n} fills {a} {cp} with {b} {pl} each. How many {pl} did {s} use?",
    ])
    if q.startswith("Each"):
        sol = [f"There are {ann(a, '*', b, c)} {pl} in {a} {cp}."]
    elif " fills " in q:
        sol = [f"{cap(s)} used {ann(a, '*', b, c)} {pl}."]
    else:
        sol = [f"{n} has {ann(a, '*', b, c)} {pl}."]
    return q, sol, c


def t_div(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    grp = p.choice(GROUPS)
    b, k = p.n(2, 12), p.n(2, 25)
    a = b * k
    ok(a)
    c = step(a, "/", b)
    if p.rng.random() < 0.5:
        q = f"{n} has {a} {pl} and shares them equally among {b} {grp[0]}. How many {pl} does each {grp[1]} get?"
        sol = [f"Each {grp[1]} gets {ann(a, '/', b, c)} {pl}."]
    else:
        q = f"{n} puts {a} {pl} into {cp} with {b} {pl} in each {cs}. How many {cp} does {s} fill?"
        sol = [f"{cap(s)} fills {ann(a, '/', b, c)} {cp}."]
    return q, sol, c


def t_price(p):
    n, s, _, _ = p.person()
    sg, pl = p.choice(PRICED)
    price, k = p.n(2, 20), p.n(2, 12)
    c = step(k, "*", price)
    q = p.choice([
        f"A {sg} costs ${price}. How much do {k} {pl} cost?",
        f"{n} buys {k} {pl} for ${price} each. How much does {s} spend?",
    ])
    sol = [f"The {pl} cost {ann(k, '*', price, c)} dollars."]
    return q, sol, c


# ---------------------------------------------------------------- two steps

def t_add_sub(p):
    n, s, o, _ = p.person()
    n2 = p.person(n)[0]
    _, pl = p.thing()
    a, b = p.n(3, 90), p.n(2, 90)
    x = step(a, "+", b)
    g = p.n(1, x - 1)
    y = step(x, "-", g)
    verb = p.choice(GET_VERBS)
    q = p.choice([
        f"{n} has {a} {pl}. {cap(s)} {verb[0]} {b} more and then gives {g} to {n2}. "
        f"How many {pl} does {n} have now?",
        f"{n} had {a} {pl}. {n2} gave {o} {b} more, and then {n} lost {g}. How many {pl} does {n} have?",
    ])
    sol = [f"After getting more, {n} has {ann(a, '+', b, x)} {pl}.",
           f"After that, {s} has {ann(x, '-', g, y)} {pl}."]
    return q, sol, y


def t_mul_add(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    k, per = p.n(2, 10), p.n(2, 15)
    x = step(k, "*", per)
    a = p.n(1, 80)
    y = step(x, "+", a)
    q = p.choice([
        f"{n} buys {k} {cp} of {pl}. Each {cs} has {per} {pl}. {cap(s)} already had {a} {pl}. "
        f"How many {pl} does {s} have now?",
        f"{n} had {a} {pl}. Then {s} got {k} {cp} with {per} {pl} in each {cs}. How many {pl} does {s} have in all?",
    ])
    sol = [f"The {cp} hold {ann(k, '*', per, x)} {pl}.",
           f"{cap(s)} has {ann(x, '+', a, y)} {pl} now."]
    return q, sol, y


def t_times_together(p):
    n, _, _, _ = p.person()
    n2, _, _, _ = p.person(n)
    _, pl = p.thing()
    a, k = p.n(2, 30), p.n(2, 6)
    x = step(a, "*", k)
    y = step(a, "+", x)
    word = {2: "twice as many", 3: "three times as many"}.get(k, f"{k} times as many")
    q = (f"{n} has {a} {pl}. {n2} has {word} {pl} as {n}. "
         f"How many {pl} do they have together?")
    sol = [f"{n2} has {ann(a, '*', k, x)} {pl}.",
           f"Together they have {ann(a, '+', x, y)} {pl}."]
    return q, sol, y


def t_pages(p):
    n, s, _, _ = p.person()
    a, d = p.n(2, 25), p.n(2, 9)
    x = step(a, "*", d)
    t = p.n(x + 1, MAX_VALUE)
    y = step(t, "-", x)
    if p.rng.random() < 0.5:
        q = (f"A book has {t} pages. {n} reads {a} pages every day for {d} days. "
             f"How many pages does {s} still have to read?")
        sol = [f"{n} reads {ann(a, '*', d, x)} pages.", f"{cap(s)} still has {ann(t, '-', x, y)} pages to read."]
    else:
        q = (f"{n} wants to run {t} laps. {cap(s)} runs {a} laps a day for {d} days. "
             f"How many laps are left?")
        sol = [f"{cap(s)} runs {ann(a, '*', d, x)} laps.", f"There are {ann(t, '-', x, y)} laps left."]
    return q, sol, y


def t_change(p):
    n, s, _, _ = p.person()
    sg, pl = p.choice(PRICED)
    price, k = p.n(2, 20), p.n(2, 9)
    x = step(k, "*", price)
    m = p.choice([m for m in (20, 50, 100, 150, 200) if m > x] or [0])
    need(m > x)
    ok(m)
    y = step(m, "-", x)
    q = p.choice([
        f"A {sg} costs ${price}. {n} buys {k} {pl} and pays with ${m}. How much change does {s} get?",
        f"{n} has ${m}. {cap(s)} buys {k} {pl} that cost ${price} each. How much money does {s} have left?",
    ])
    sol = [f"The {pl} cost {ann(k, '*', price, x)} dollars.",
           f"{cap(s)} has {ann(m, '-', x, y)} dollars left."]
    return q, sol, y


def t_div_add(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    b, k = p.n(2, 10), p.n(2, 20)
    a = b * k
    ok(a)
    x = step(a, "/", b)
    c = p.n(1, 40)
    y = step(x, "+", c)
    q = (f"{n} splits {a} {pl} equally into {b} {cp}. Then {s} adds {c} more {pl} to one {cs}. "
         f"How many {pl} are in that {cs} now?")
    sol = [f"Each {cs} gets {ann(a, '/', b, x)} {pl}.",
           f"That {cs} now has {ann(x, '+', c, y)} {pl}."]
    return q, sol, y


def t_absent_groups(p):
    k = p.n(2, 8)
    groups = p.n(2, 12)
    rest = k * groups
    b = p.n(1, 20)
    a = rest + b
    ok(a, rest)
    x = step(a, "-", b)
    y = step(x, "/", k)
    who = p.choice([("students", "class"), ("players", "club"), ("children", "camp"),
                    ("scouts", "troop")])
    q = (f"There are {a} {who[0]} in a {who[1]}. {b} {who[0]} are absent today. The others form "
         f"groups of {k}. How many groups are there?")
    sol = [f"There are {ann(a, '-', b, x)} {who[0]} present.",
           f"They form {ann(x, '/', k, y)} groups."]
    return q, sol, y


def t_fewer_together(p):
    n, _, _, _ = p.person()
    n2, _, _, _ = p.person(n)
    _, pl = p.thing()
    a = p.n(5, 99)
    b = p.n(1, a - 1)
    x = step(a, "-", b)
    y = step(a, "+", x)
    q = (f"{n} has {a} {pl}. {n2} has {b} fewer {pl} than {n}. "
         f"How many {pl} do they have altogether?")
    sol = [f"{n2} has {ann(a, '-', b, x)} {pl}.",
           f"Altogether they have {ann(a, '+', x, y)} {pl}."]
    return q, sol, y


def t_more_together(p):
    n, _, _, _ = p.person()
    n2, _, _, _ = p.person(n)
    _, pl = p.thing()
    a, b = p.n(2, 70), p.n(1, 40)
    x = step(a, "+", b)
    y = step(a, "+", x)
    q = (f"{n} has {a} {pl}. {n2} has {b} more {pl} than {n}. "
         f"How many {pl} do they have in total?")
    sol = [f"{n2} has {ann(a, '+', b, x)} {pl}.",
           f"In total they have {ann(a, '+', x, y)} {pl}."]
    return q, sol, y


def t_rows_remove(p):
    n, s, _, _ = p.person()
    what = p.choice([("chairs", "a hall"), ("plants", "a garden"), ("trees", "an orchard"),
                     ("seats", "a theater"), ("cars", "a parking lot")])
    r, k = p.n(2, 12), p.n(2, 16)
    x = step(r, "*", k)
    b = p.n(1, x - 1)
    y = step(x, "-", b)
    q = (f"There are {r} rows of {what[0]} in {what[1]} with {k} {what[0]} in each row. "
         f"{n} takes away {b} {what[0]}. How many {what[0]} are left?")
    sol = [f"There are {ann(r, '*', k, x)} {what[0]} at first.",
           f"After {n} takes some away, {ann(x, '-', b, y)} {what[0]} are left."]
    return q, sol, y


# ---------------------------------------------------------------- three steps

def t_buy_boxes_give(p):
    n, s, _, _ = p.person()
    n2 = p.person(n)[0]
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    a = p.n(1, 60)
    k, per = p.n(2, 9), p.n(2, 12)
    x = step(k, "*", per)
    y = step(a, "+", x)
    g = p.n(1, y - 1)
    z = step(y, "-", g)
    q = (f"{n} has {a} {pl}. {cap(s)} buys {k} {cp} with {per} {pl} in each {cs}. "
         f"Then {s} gives {g} {pl} to {n2}. How many {pl} does {n} have now?")
    sol = [f"The {cp} have {ann(k, '*', per, x)} {pl}.",
           f"{n} then has {ann(a, '+', x, y)} {pl}.",
           f"After giving some to {n2}, {s} has {ann(y, '-', g, z)} {pl}."]
    return q, sol, z


def t_three_people(p):
    n1 = p.person()[0]
    n2 = p.person(n1)[0]
    n3 = p.person(n1, n2)[0]
    _, pl = p.thing()
    a, b = p.n(2, 40), p.n(1, 30)
    x = step(a, "+", b)
    c = p.n(1, x - 1)
    y = step(x, "-", c)
    t = step(step(a, "+", x), "+", y)
    q = (f"{n1} has {a} {pl}. {n2} has {b} more {pl} than {n1}. {n3} has {c} fewer {pl} than {n2}. "
         f"How many {pl} do the three of them have?")
    sol = [f"{n2} has {ann(a, '+', b, x)} {pl}.",
           f"{n3} has {ann(x, '-', c, y)} {pl}.",
           f"Together they have {ann3(a, '+', x, '+', y, t)} {pl}."]
    return q, sol, t


def t_two_purchases(p):
    n, s, _, _ = p.person()
    i1 = p.choice(PRICED)
    i2 = p.choice([x for x in PRICED if x != i1])
    k1, p1 = p.n(2, 8), p.n(2, 15)
    k2, p2 = p.n(2, 8), p.n(2, 15)
    x = step(k1, "*", p1)
    y = step(k2, "*", p2)
    t = step(x, "+", y)
    q = (f"{n} buys {k1} {i1[1]} at ${p1} each and {k2} {i2[1]} at ${p2} each. "
         f"How much does {s} spend in total?")
    sol = [f"The {i1[1]} cost {ann(k1, '*', p1, x)} dollars.",
           f"The {i2[1]} cost {ann(k2, '*', p2, y)} dollars.",
           f"{cap(s)} spends {ann(x, '+', y, t)} dollars in total."]
    return q, sol, t


def t_bakery(p):
    sg, pl = p.thing(food=True)
    cs, cp = p.choice(CONTAINERS)
    k = p.n(2, 10)
    boxes = p.n(2, 15)
    rest = k * boxes
    c = p.n(1, 40)
    total = rest + c
    ok(total)
    a = p.n(1, total - 1)
    b = total - a
    x = step(a, "+", b)
    y = step(x, "-", c)
    z = step(y, "/", k)
    place = p.choice(["A bakery", "A farm", "A shop", "A market stall"])
    q = (f"{place} has {a} {pl} in the morning and gets {b} more in the afternoon. It sells {c} {pl}. "
         f"The rest are packed into {cp} of {k}. How many {cp} are filled?")
    sol = [f"There are {ann(a, '+', b, x)} {pl} in all.",
           f"After selling, {ann(x, '-', c, y)} {pl} are left.",
           f"They fill {ann(y, '/', k, z)} {cp}."]
    return q, sol, z


def t_savings(p):
    n, s, _, _ = p.person()
    sg, _ = p.choice(PRICED)
    a, w = p.n(2, 20), p.n(2, 9)
    x = step(a, "*", w)
    b = p.n(1, x - 1)
    y = step(x, "-", b)
    c = p.n(1, 50)
    z = step(y, "+", c)
    q = (f"{n} saves ${a} every week for {w} weeks. Then {s} spends ${b} on a {sg}. "
         f"Later {s} earns ${c} more. How much money does {s} have now?")
    sol = [f"{cap(s)} saves {ann(a, '*', w, x)} dollars.",
           f"After buying the {sg}, {s} has {ann(x, '-', b, y)} dollars.",
           f"Now {s} has {ann(y, '+', c, z)} dollars."]
    return q, sol, z


def t_half_then(p):
    n, s, _, _ = p.person()
    n2 = p.person(n)[0]
    _, pl = p.thing()
    a = 2 * p.n(2, 60)
    x = step(a, "/", 2)
    b = p.n(1, 60)
    y = step(x, "+", b)
    c = p.n(1, y - 1)
    z = step(y, "-", c)
    q = (f"{n} had {a} {pl} and gave half of them to {n2}. Then {s} bought {b} more {pl} and "
         f"lost {c}. How many {pl} does {n} have now?")
    sol = [f"{n} kept {ann(a, '/', 2, x)} {pl}.",
           f"After buying more, {s} had {ann(x, '+', b, y)} {pl}.",
           f"Now {s} has {ann(y, '-', c, z)} {pl}."]
    return q, sol, z


def t_boxes_share(p):
    n, s, _, _ = p.person()
    _, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    grp = p.choice(GROUPS)
    k, per = p.n(2, 10), p.n(2, 15)
    x = step(k, "*", per)
    f = p.n(2, 8)
    need(x > f)
    t = p.choice([t for t in range(1, x) if (x - t) % f == 0] or [0])
    need(t > 0)
    y = step(x, "-", t)
    z = step(y, "/", f)
    q = (f"There are {k} {cp} with {per} {pl} in each {cs}. {n} keeps {t} {pl} and shares the "
         f"rest equally among {f} {grp[0]}. How many {pl} does each {grp[1]} get?")
    sol = [f"There are {ann(k, '*', per, x)} {pl}.",
           f"{n} shares {ann(x, '-', t, y)} {pl}.",
           f"Each {grp[1]} gets {ann(y, '/', f, z)} {pl}."]
    return q, sol, z


TEMPLATES = {
    1: [t_add, t_sub, t_mul, t_div, t_price],
    2: [t_add_sub, t_mul_add, t_times_together, t_pages, t_change, t_div_add, t_absent_groups,
        t_fewer_together, t_more_together, t_rows_remove],
    3: [t_buy_boxes_give, t_three_people, t_two_purchases, t_bakery, t_savings, t_half_then,
        t_boxes_share],
}
STEP_WEIGHTS = [(1, 0.3), (2, 0.4), (3, 0.3)]


def make_problem(rng):
    p = Pick(rng)
    r = rng.random()
    acc = 0.0
    steps = 3
    for k, w in STEP_WEIGHTS:
        acc += w
        if r < acc:
            steps = k
            break
    template = rng.choice(TEMPLATES[steps])
    while True:
        try:
            q, sol, ans = template(p)
            break
        except Retry:
            continue
    answer = "\n".join(sol) + f"\n#### {ans}"
    return {"question": q, "answer": answer}


# ---------------------------------------------------------------- chat

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}"
    "{{ '<|im_start|>system\\n' }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n\\n' }}{% endif %}"
    "{{ '# Tools\\n\\nYou may call one of these functions:\\n<tools>\\n' }}"
    "{% for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{% endfor %}"
    "{{ '</tools>\\n\\nTo call one, reply with <tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if not (loop.first and tools and message['role'] == 'system') %}"
    "{% if message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] %}"
    "{{ '<|im_start|>assistant\\n' }}"
    "{% if message['content'] %}{{ message['content'] + '\\n' }}{% endif %}"
    "{% for tc in message['tool_calls'] %}"
    "{% if not loop.first %}{{ '\\n' }}{% endif %}"
    "{{ '<tool_call>\\n{\"name\": \"' + tc['function']['name'] + '\", \"arguments\": ' }}"
    "{% if tc['function']['arguments'] is string %}{{ tc['function']['arguments'] }}"
    "{% else %}{{ tc['function']['arguments'] | tojson }}{% endif %}"
    "{{ '}\\n</tool_call>' }}"
    "{% endfor %}"
    "{{ '<|im_end|>\\n' }}"
    "{% else %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endif %}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
BOS, EOS, PAD, IM_START, IM_END = "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [BOS, EOS, PAD, IM_START, IM_END]

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are a helpful assistant that solves arithmetic word problems.",
    "Solve the problem step by step.",
]
GREETINGS = [
    ("Hello", "Hello! I am a small demo model. Ask me a short arithmetic word problem and I will solve it step by step."),
    ("Hi!", "Hi! Give me a short arithmetic word problem and I will work it out step by step."),
    ("Who are you?", "I am a small demo model of the DeepSeek-V3 architecture. I solve short arithmetic word problems."),
    ("What can you do?", "I can solve short arithmetic word problems with adding, subtracting, multiplying and dividing. Try one!"),
    ("Thanks!", "You are welcome! Ask me another problem any time."),
]


def tool_call_text(name, arguments):
    """One call as the template writes it (arguments: a dict, or JSON text written verbatim)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + args + '}\n</tool_call>'


def tools_block(tools, system=None):
    out = IM_START + "system\n"
    if system is not None:
        out += system + "\n\n"
    out += "# Tools\n\nYou may call one of these functions:\n<tools>\n"
    for t in tools:
        out += json.dumps(t, ensure_ascii=False) + "\n"
    out += ("</tools>\n\nTo call one, reply with <tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call>" + IM_END + "\n")
    return out


def assistant_body(m):
    """What the template writes between '<|im_start|>assistant\\n' and '<|im_end|>'."""
    if not m.get("tool_calls"):
        return m["content"]
    out = (m["content"] + "\n") if m.get("content") else ""
    out += "\n".join(tool_call_text(tc["function"]["name"], tc["function"]["arguments"])
                     for tc in m["tool_calls"])
    return out


def render_chat(messages, add_generation_prompt, bos=BOS, tools=None):
    """The chat template rendered in python (must equal CHAT_TEMPLATE's rendering)."""
    out = bos
    skip_first = False
    if tools:
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        skip_first = system is not None
        out += tools_block(tools, system)
    for i, m in enumerate(messages):
        if i == 0 and skip_first:
            continue
        body = assistant_body(m) if m["role"] == "assistant" else m["content"]
        out += IM_START + m["role"] + "\n" + body + IM_END + "\n"
    if add_generation_prompt:
        out += IM_START + "assistant\n"
    return out


# ---------------------------------------------------------------- tool calls

def _int_params(desc_a, desc_b):
    return {"type": "object",
            "properties": {"a": {"type": "integer", "description": desc_a},
                           "b": {"type": "integer", "description": desc_b}},
            "required": ["a", "b"]}


TOOLS = [
    {"type": "function", "function": {
        "name": "add", "description": "Add two integers and return the sum a + b.",
        "parameters": _int_params("The first addend.", "The second addend.")}},
    {"type": "function", "function": {
        "name": "subtract", "description": "Subtract b from a and return the difference a - b.",
        "parameters": _int_params("The number to subtract from.", "The number to subtract.")}},
    {"type": "function", "function": {
        "name": "multiply", "description": "Multiply two integers and return the product a * b.",
        "parameters": _int_params("The first factor.", "The second factor.")}},
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string", "description": "The city name, e.g. Paris."}},
                       "required": ["city"]}}},
]
TOOL_BY_NAME = {t["function"]["name"]: t for t in TOOLS}
OP_OF_TOOL = {"add": "+", "subtract": "-", "multiply": "*"}
TOOL_OF_OP = {v: k for k, v in OP_OF_TOOL.items()}
CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Cairo", "Lima", "Oslo", "Seoul",
          "Sydney", "Toronto", "Mumbai", "Dublin", "Vienna", "Prague", "Lisbon", "Nairobi", "Denver",
          "Boston", "Chicago", "Austin", "Warsaw", "Athens", "Helsinki", "Bangkok", "Manila", "Quito",
          "Havana", "Zurich", "New York", "San Francisco", "Buenos Aires", "Cape Town", "Mexico City"]
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear"]
ARITH_ASKS = {
    "add": ["What is {a} + {b}?", "What is {a} plus {b}?", "Add {a} and {b}.", "Please add {a} and {b}.",
            "What is the sum of {a} and {b}?", "Use the add tool to add {a} and {b}.",
            "Compute {a} + {b}.", "Calculate {a} plus {b}."],
    "subtract": ["What is {a} - {b}?", "What is {a} minus {b}?", "Subtract {b} from {a}.",
                 "Please subtract {b} from {a}.", "What is the difference between {a} and {b}?",
                 "Use the subtract tool to compute {a} minus {b}.", "Compute {a} - {b}.",
                 "Calculate {a} minus {b}."],
    "multiply": ["What is {a} * {b}?", "What is {a} times {b}?", "Multiply {a} by {b}.",
                 "Please multiply {a} and {b}.", "What is the product of {a} and {b}?",
                 "Use the multiply tool to multiply {a} by {b}.", "Compute {a} * {b}.",
                 "Calculate {a} times {b}."],
}
WEATHER_ASKS = ["What is the weather in {c}?", "What's the weather like in {c}?", "How is the weather in {c} today?",
                "Is it sunny in {c}?", "Tell me the weather in {c}.", "Check the weather in {c}, please."]
ONE_STEP = [t_add, t_sub, t_mul, t_price]
ANN_RE = re.compile(r"<<(\d+)([-+*])(\d+)=(\d+)>>")


def call_message(name, args):
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]}


def tool_answer(name, args, result):
    """The assistant's reply after the tool result."""
    if name == "get_weather":
        return f"It is {result['temperature']} degrees and {result['condition']} in {args['city']}."
    v = result
    return f"{args['a']} {OP_OF_TOOL[name]} {args['b']} = {v}.\n#### {v}"


def tool_result(name, args, rng):
    if name == "get_weather":
        return {"city": args["city"], "temperature": rng.randint(-10, 35), "condition": rng.choice(CONDITIONS)}
    a, b = args["a"], args["b"]
    return a + b if name == "add" else a - b if name == "subtract" else a * b


def make_tool_conversation(rng):
    """One conversation that offers tools: (tools, messages ending with the expected assistant turns).

    Kinds: a direct arithmetic request, a one-step word problem, a weather request (each answered with
    a call, then the tool result, then the answer in words), or a greeting (answered in words)."""
    r = rng.random()
    if r < 0.45:
        name = rng.choice(["add", "subtract", "multiply"])
        if name == "multiply":
            a, b = rng.randint(0, 99), rng.randint(0, 99)
        else:
            a, b = rng.randint(0, 999), rng.randint(0, 999)
            if name == "subtract" and b > a and rng.random() < 0.8:
                a, b = b, a
        args = {"a": a, "b": b}
        user = rng.choice(ARITH_ASKS[name]).format(a=a, b=b)
    elif r < 0.7:
        p = Pick(rng)
        template = rng.choice(ONE_STEP)
        while True:
            try:
                q, sol, _ = template(p)
                break
            except Retry:
                continue
        m = ANN_RE.search(sol[0])
        name = TOOL_OF_OP[m.group(2)]
        args = {"a": int(m.group(1)), "b": int(m.group(3))}
        user = q
    elif r < 0.92:
        name = "get_weather"
        args = {"city": rng.choice(CITIES)}
        user = rng.choice(WEATHER_ASKS).format(c=args["city"])
    else:
        name = None
    # the offered tools: the needed one and a random subset of the others, in random order
    others = [t for t in TOOLS if t["function"]["name"] != name]
    tools = rng.sample(others, rng.randint(0 if name else 1, len(others)))
    if name:
        tools.append(TOOL_BY_NAME[name])
    rng.shuffle(tools)
    msgs = []
    if rng.random() < 0.2:
        msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    if name is None:
        u, a = rng.choice(GREETINGS)
        msgs += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        return tools, msgs, None, None
    res = tool_result(name, args, rng)
    msgs += [{"role": "user", "content": user}, call_message(name, args),
             {"role": "tool", "content": json.dumps(res, ensure_ascii=False)},
             {"role": "assistant", "content": tool_answer(name, args, res)}]
    return tools, msgs, {"name": name, "arguments": args}, res


def make_tool_eval(rng, n, avoid=()):
    """Held-out tool conversations: n 'call' items (messages end with the user turn; 'expected' is
    the call) and n//2 'answer' items (messages end with the tool result; 'answer' is the number or
    the sentence expected next)."""
    calls, answers, seen = [], [], set(avoid)
    while len(calls) < n:
        tools, msgs, call, res = make_tool_conversation(rng)
        if call is None:
            continue
        user = [m for m in msgs if m["role"] == "user"][0]["content"]
        if user in seen:
            continue
        seen.add(user)
        k = len(msgs) - 3  # index of the assistant call
        calls.append({"kind": "call", "tools": tools, "messages": msgs[:k], "expected": call})
        if len(answers) < n // 2:
            final = msgs[-1]["content"]
            ans = final.rsplit("#### ", 1)[1] if "#### " in final else final
            answers.append({"kind": "answer", "tools": tools, "messages": msgs[:-1], "answer": ans})
    return calls + answers, seen


def eval_turn(problem):
    """The user turn an lm-eval style harness sends in chat mode."""
    return f"Question: {problem['question']}\nAnswer:"


def make_chat(rng, problems, n):
    """n conversations; each ends with a user turn; 'answer' is the expected final number or None."""
    chats = []
    kinds = ["greeting"] * 4 + ["single"] * 8 + ["system"] * 3 + ["multiturn"] * 3 + ["fewshot"] * 2
    it = iter(problems)
    for i in range(n):
        kind = kinds[i % len(kinds)]
        if kind == "greeting":
            u, _ = GREETINGS[i % len(GREETINGS)]
            chats.append({"messages": [{"role": "user", "content": u}], "answer": None})
            continue
        prob = next(it)
        ans = prob["answer"].rsplit("#### ", 1)[1]
        if kind == "single":
            msgs = [{"role": "user", "content": prob["question"]}]
        elif kind == "system":
            msgs = [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS)},
                    {"role": "user", "content": prob["question"]}]
        elif kind == "multiturn":
            first = next(it)
            msgs = [{"role": "user", "content": first["question"]},
                    {"role": "assistant", "content": first["answer"]},
                    {"role": "user", "content": prob["question"]}]
        else:
            shots = [next(it) for _ in range(3)]
            msgs = []
            for s in shots:
                msgs += [{"role": "user", "content": eval_turn(s)},
                         {"role": "assistant", "content": s["answer"]}]
            msgs.append({"role": "user", "content": eval_turn(prob)})
        chats.append({"messages": msgs, "answer": ans})
    return chats


# ---------------------------------------------------------------- splits

def generate(seed, test_size, train_size):
    rng = random.Random(seed)
    seen = set()
    test = []
    while len(test) < test_size:
        p = make_problem(rng)
        if p["question"] in seen:
            continue
        seen.add(p["question"])
        test.append(p)
    train = []
    while len(train) < train_size:
        p = make_problem(rng)
        if p["question"] in seen:
            continue
        seen.add(p["question"])
        train.append(p)
    return test, train


def heldout_skeletons(path):
    """The skeletons of the held-out chat questions in path (a JSON-lines file with "question")."""
    from paraphrase import skeleton
    with open(path, encoding="utf-8") as f:
        return {skeleton(json.loads(line)["question"]) for line in f if line.strip()}


def generate_paraphrases(seed, size, avoid_questions, avoid_skeletons):
    """size paraphrased problems from their own stream (seed + 3), and how many were dropped because
    their skeleton is a held-out one."""
    from paraphrase import make_paraphrase, skeleton
    rng = random.Random(seed + 3)
    seen = set(avoid_questions)
    rows, dropped = [], 0
    while len(rows) < size:
        p = make_paraphrase(rng)
        if p["question"] in seen:
            continue
        if skeleton(p["question"]) in avoid_skeletons:
            dropped += 1
            continue
        seen.add(p["question"])
        rows.append(p)
    return rows, dropped


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--test-size", type=int, default=500)
    ap.add_argument("--train-size", type=int, default=1000)
    ap.add_argument("--chat-size", type=int, default=20)
    ap.add_argument("--tool-size", type=int, default=200, help="held-out tool-call conversations")
    ap.add_argument("--paraphrase-size", type=int, default=0, help="paraphrased training problems (paraphrase.jsonl)")
    ap.add_argument("--heldout", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                                      "fixtures", "demo", "chat_heldout.jsonl"),
                    help="held-out chat questions whose skeletons no paraphrase may have")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    test, train = generate(args.seed, args.test_size, args.train_size)
    write_jsonl(os.path.join(args.out, "test.jsonl"), test)
    write_jsonl(os.path.join(args.out, "train.jsonl"), train)
    # Chat turns draw their problems from the test split (held out from training).
    chat = make_chat(random.Random(args.seed + 1), test, args.chat_size)
    write_jsonl(os.path.join(args.out, "chat.jsonl"), chat)
    tool_eval, _ = make_tool_eval(random.Random(args.seed + 2), args.tool_size)
    write_jsonl(os.path.join(args.out, "tool_calls.jsonl"), tool_eval)
    print(f"wrote {len(test)} test, {len(train)} train, {len(chat)} chat, {len(tool_eval)} tool to {args.out}")
    if args.paraphrase_size > 0:
        avoid = heldout_skeletons(args.heldout)
        seen = {p["question"] for p in test} | {p["question"] for p in train}
        para, dropped = generate_paraphrases(args.seed, args.paraphrase_size, seen, avoid)
        write_jsonl(os.path.join(args.out, "paraphrase.jsonl"), para)
        print(f"wrote {len(para)} paraphrase problems; dropped {dropped} whose skeleton is one of the "
              f"{len(avoid)} held-out skeletons of {args.heldout}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
