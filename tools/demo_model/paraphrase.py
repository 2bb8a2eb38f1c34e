#!/usr/bin/env python3
"""Paraphrased problems for the demo model: the arithmetic of make_data.py's problem families told in
many wordings, so that the model learns the language of a question rather than a handful of
templates.

Each generator builds a small story (who has what, what happens, what is asked) and realizes it
with random choices: several phrasings of every fact and event (synonyms, the number before or
after its noun, the subject named or a pronoun), present or past tense, clauses joined into one
sentence or kept apart, the question at the end, in front ("How many ...? ...") or as a condition
("If ..., how many ...?"), and chat-style wrappers ("Can you tell me how many ...?", "Quick
question: ...", "... Thanks!"). Solutions keep make_data.py's format: one line per step with
calculator annotations, then "#### N"; every operand, intermediate value and answer lies in
[0, 199].

make_data.py draws these from a seeded stream of their own (its --paraphrase-size), so the
template stream and the committed fixtures do not change. skeleton() reduces a question to its
wording alone (names, numbers, objects and pronouns replaced by placeholders); make_data.py drops
any paraphrase whose skeleton is that of a held-out chat question (decontamination), and
check_heldout_skeletons.py proves that none is left.

Pure python, no dependencies.
"""
import re

from make_data import (CONTAINERS, FOOD, GROUPS, PEOPLE, PLACES, PRICED, THINGS, Pick, Retry, ann, ann3,
                       cap, need, step)

# ---------------------------------------------------------------- skeletons

_WORDS = {}
for _name, _s, _o, _p in PEOPLE:
    _WORDS[_name.lower()] = "<name>"
for _w in ("he", "she", "him", "her", "his", "hers", "they", "them", "their"):
    _WORDS[_w] = "<pron>"
for _sg, _pl in THINGS + CONTAINERS + PRICED:
    for _x in (_sg, _pl):
        _WORDS[_x] = "<item>"
for _pl, _sg in GROUPS:
    _WORDS[_pl] = _WORDS[_sg] = "<group>"
for _x in PLACES:
    _WORDS[_x] = "<item>"
_MULTI = sorted((w for w in _WORDS if " " in w), key=len, reverse=True)
_TOKEN = re.compile(r"\$?\d+|[a-z<>]+|[^\sa-z\d]")


def skeleton(question):
    """The question's wording alone: lower case, names, pronouns, objects and numbers replaced."""
    q = question.lower()
    for w in _MULTI:  # "toy cars", "bottles of juice"
        q = re.sub(r"\b" + re.escape(w) + r"\b", "<item>", q)
    toks = []
    for t in _TOKEN.findall(q):
        if t[0] == "$" or t[0].isdigit():
            toks.append("<num>")
        else:
            toks.append(_WORDS.get(t, t))
    return " ".join(toks)


def sentence_skeletons(question):
    """The skeleton of each sentence of a question (split after '.', '?' and '!')."""
    parts = re.split(r"(?<=[.?!])\s+", question.strip())
    return [skeleton(s) for s in parts if s]


# ---------------------------------------------------------------- rendering helpers

PRONOUN = re.compile(r"\b(he|she|him|her|his)\b")
PRONOUN_STARTS = {"he", "she", "they", "there", "then", "each", "every", "one", "the", "a", "an", "it",
                  "later", "after", "next", "half", "some", "all"}


def low(clause):
    """Lower-cases a clause's first letter unless it starts with a name."""
    first = clause.split(" ", 1)[0].lower()
    return clause[0].lower() + clause[1:] if first in PRONOUN_STARTS else clause


def plural(n, sg, pl):
    return sg if n == 1 else pl


class Story:
    """Clauses (without final stops), a question as (direct, indirect) pairs, and the solution."""

    def __init__(self, p):
        self.p = p
        self.clauses = []
        self.questions = []  # [(direct question, indirect question or None)]
        self.sol = []
        self.answer = None
        self.past = False
        self.first_event = 1  # clauses before this index are facts: no "Then"/"Later" in front of them

    def v(self, present, past):
        return past if self.past else present


JOINERS_SENTENCE = ["", "", "", "Then ", "Later, ", "After that, ", "Next, ", "The next day, "]
JOINERS_INLINE = [" and then ", ", and then ", ", then ", " and ", "; then "]


def join_clauses(p, clauses, first_event=1):
    out = cap(clauses[0])
    inline = False  # at most two clauses in one sentence
    for i, c in enumerate(clauses[1:], 1):
        if i < first_event:
            j = "" if inline else p.choice(["", "", " and ", ", and "])
            out += (j + low(c)) if j else (". " + cap(c))
            inline = bool(j)
        elif not inline and p.rng.random() < 0.3 and len(out) < 160:
            out += p.choice(JOINERS_INLINE) + low(c)
            inline = True
        else:
            j = p.choice(JOINERS_SENTENCE)
            out += ". " + (j + low(c) if j else cap(c))
            inline = False
    return out + "."


CHAT_PREFIXES = ["Can you help me with this? ", "Quick question: ", "Here is a problem: ", "Please solve this: ",
                 "Hi! ", "I have a math question. ", "Help me out: ", "Try this one: ", "Solve: ",
                 "Here's one for you. ", "Math problem: ", "My teacher gave us this: ", "Hey! ",
                 "Homework help, please. ", "Let's see if you can do this. "]
CHAT_SUFFIXES = [" Please show your steps.", " Thanks!", " Show your work.", " Explain how you got it.",
                 " Thank you.", " Please explain.", " Step by step, please.", " I'm stuck."]
INDIRECT = ["Can you tell me {q}?", "Could you work out {q}?", "I want to know {q}.", "Please figure out {q}.",
            "Tell me {q}.", "Do you know {q}?", "Work out {q}, please.", "I'm trying to figure out {q}.",
            "Can you calculate {q}?", "Please tell me {q}.", "Help me find out {q}."]


def render(story):
    """The question text of a story, with the question's position and the wrapper chosen at random."""
    p = story.p
    direct, indirect = p.choice(story.questions)
    # a question put in front of the facts must not start with a pronoun's reference unknown
    front_ok = not PRONOUN.search(direct)
    facts = join_clauses(p, story.clauses, story.first_event)
    r = p.rng.random()
    if indirect is not None and r < 0.25:
        ask = p.choice(INDIRECT).format(q=indirect)
        text = ask + " " + facts if front_ok and p.rng.random() < 0.3 else facts + " " + ask
    elif r < 0.4 and len(story.clauses) <= 3:
        # "If ..., how many ...?"
        first = story.clauses[0]
        body = low(first) if first.split(" ", 1)[0].lower() in PRONOUN_STARTS else first
        rest = [low(c) for c in story.clauses[1:]]
        if rest:
            body += (", " if len(rest) > 1 else " and ") + ", ".join(rest[:-1]) + (", and " if len(rest) > 1 else "") + rest[-1]
        text = "If " + body + ", " + direct[0].lower() + direct[1:]
    elif r < 0.5 and front_ok:
        text = direct + " " + facts
    else:
        text = facts + " " + direct
    r = p.rng.random()
    if r < 0.2:
        text = p.choice(CHAT_PREFIXES) + text
    elif r < 0.3:
        text = text + p.choice(CHAT_SUFFIXES)
    if p.rng.random() < 0.05:  # typed casually
        text = text[0].lower() + text[1:]
        if text.endswith("?"):
            text = text[:-1]
    return text


# ---------------------------------------------------------------- stories

def who(p, name, pron, name_share=0.25):
    return name if p.rng.random() < name_share else pron


def inventory(p):
    """Someone's count of things changes by events: gains, boxes of them, losses, halving."""
    st = Story(p)
    st.past = p.rng.random() < 0.5
    v = st.v
    n, s, o, ps = p.person()
    n2 = p.person(n)[0]
    sg, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    place = p.choice(PLACES)
    food = sg in FOOD
    a = p.n(2, 120)
    st.clauses.append(p.choice([
        f"{n} {v('has', 'had')} {a} {pl}",
        f"{n} {v('owns', 'owned')} {a} {pl}",
        f"{n} {v('starts', 'started')} with {a} {pl}",
        f"{n} {v('keeps', 'kept')} {a} {pl} in a {place}",
        f"there {v('are', 'were')} {a} {pl} in {n}'s {place}",
        f"{a} {pl} {v('belong', 'belonged')} to {n}",
        f"{n}'s {place} {v('holds', 'held')} {a} {pl}",
        f"{n} {v('has', 'had')} a {place} with {a} {pl} in it",
        f"{n} {v('has', 'had')} {a} {pl} at first",
    ]))
    kinds = p.choice([["gain"], ["lose"], ["boxes"], ["gain", "lose"], ["lose", "gain"], ["boxes", "lose"],
                      ["gain", "gain"], ["lose", "lose"], ["half", "gain"], ["half", "gain", "lose"],
                      ["boxes", "gain"], ["gain", "boxes"], ["lose", "boxes"]])
    x = a
    for i, kind in enumerate(kinds):
        subj = who(p, n, s)
        if kind == "gain":
            b = p.n(1, 60)
            y = step(x, "+", b)
            st.clauses.append(p.choice([
                f"{subj} {v('buys', 'bought')} {b} more",
                f"{subj} {v('buys', 'bought')} {b} more {pl}",
                f"{subj} {v('finds', 'found')} another {b}",
                f"{n2} {v('gives', 'gave')} {o} {b} more {pl}",
                f"{subj} {v('gets', 'got')} {b} {plural(b, sg, pl)} from {n2}",
                f"{subj} {v('picks', 'picked')} up {b} more",
                f"{subj} {v('receives', 'received')} {b} {plural(b, sg, pl)} as a gift",
                f"{subj} {v('wins', 'won')} {b} more {pl} in a game",
                f"{b} more {pl} {v('are', 'were')} added",
                f"{subj} {v('collects', 'collected')} {b} more",
                f"{n2} {v('hands', 'handed')} {o} another {b} {plural(b, sg, pl)}",
                f"{subj} {v('adds', 'added')} {b} {plural(b, sg, pl)} to the pile",
            ]))
            st.sol.append(p.choice([f"After getting {b} more, {s} has {ann(x, '+', b, y)} {pl}.",
                                    f"{cap(s)} gets {b} more, so {s} has {ann(x, '+', b, y)} {pl}.",
                                    f"Adding {b} gives {ann(x, '+', b, y)} {pl}."]))
        elif kind == "lose":
            need(x > 1)
            g = p.n(1, x - 1)
            y = step(x, "-", g)
            forms = [
                f"{subj} {v('gives', 'gave')} {g} of them to {n2}",
                f"{subj} {v('gives', 'gave')} {n2} {g} {plural(g, sg, pl)}",
                f"{subj} {v('loses', 'lost')} {g}",
                f"{g} of them {v('get', 'got')} lost",
                f"{subj} {v('sells', 'sold')} {g} {plural(g, sg, pl)}",
                f"{subj} {v('drops', 'dropped')} {g} and {v('cannot', 'could not')} find them",
                f"{n2} {v('takes', 'took')} {g} of {ps} {pl}",
                f"{subj} {v('uses', 'used')} {g} {plural(g, sg, pl)} for a project",
                f"{subj} {v('hands', 'handed')} {g} {plural(g, sg, pl)} to {n2}",
                f"{g} of the {pl} {v('break', 'broke')}" if not food else f"{g} of the {pl} {v('go', 'went')} bad",
            ]
            if food:
                forms += [f"{subj} {v('eats', 'ate')} {g}", f"{subj} and {n2} {v('eat', 'ate')} {g} of them"]
            st.clauses.append(p.choice(forms))
            st.sol.append(p.choice([f"After losing {g}, {s} has {ann(x, '-', g, y)} {pl}.",
                                    f"Taking away {g} leaves {ann(x, '-', g, y)} {pl}.",
                                    f"{cap(s)} has {ann(x, '-', g, y)} {pl} left."]))
        elif kind == "boxes":
            k, per = p.n(2, 9), p.n(2, 12)
            c = step(k, "*", per)
            y = step(x, "+", c)
            st.clauses.append(p.choice([
                f"{subj} {v('buys', 'bought')} {k} {cp} of {pl}, and each {cs} {v('holds', 'held')} {per}",
                f"{subj} {v('gets', 'got')} {k} {cp} that {v('hold', 'held')} {per} {pl} each",
                f"{subj} {v('buys', 'bought')} {k} {cp}, {per} {pl} to a {cs}",
                f"{k} {cp} of {pl} {v('arrive', 'arrived')}, with {per} in each",
                f"{n2} {v('gives', 'gave')} {o} {k} {cp}, each with {per} {pl}",
                f"{subj} {v('adds', 'added')} {k} full {cp}, {per} {pl} per {cs}",
                f"{subj} {v('picks', 'picked')} up {k} {cp} holding {per} {pl} apiece",
            ]))
            st.sol.append(f"The {cp} hold {ann(k, '*', per, c)} {pl}.")
            st.sol.append(f"{cap(s)} then has {ann(x, '+', c, y)} {pl}.")
        else:  # half
            need(x % 2 == 0)
            y = step(x, "/", 2)
            st.clauses.append(p.choice([
                f"{subj} {v('gives', 'gave')} half of them to {n2}",
                f"{subj} {v('sells', 'sold')} half of {ps} {pl}",
                f"half of them {v('are', 'were')} given away",
                f"{subj} {v('keeps', 'kept')} only half",
            ]))
            st.sol.append(f"Half of {x} is {ann(x, '/', 2, y)}, so {s} keeps {y} {pl}.")
        x = y
    now = "now " if p.rng.random() < 0.6 else ""
    st.questions = [
        (f"How many {pl} does {n} have {now}?".replace(" ?", "?"), f"how many {pl} {n} has {now}".strip()),
        (f"How many {pl} does {s} have in the end?", f"how many {pl} {s} has in the end"),
        (f"What is the number of {pl} {n} has now?", f"the number of {pl} {n} has now"),
        (f"How many does {s} have {now}?".replace(" ?", "?"), None),
        (f"How many {pl} is {n} left with?", f"how many {pl} {n} is left with"),
    ]
    if st.past:
        st.questions += [(f"How many {pl} did {n} end up with?", f"how many {pl} {n} ended up with"),
                         (f"How many {pl} did {s} have after that?", f"how many {pl} {s} had after that")]
    if kinds[-1] == "lose":
        st.questions.append((f"How many {pl} does {s} have left?", f"how many {pl} {s} has left"))
    st.answer = x
    return st


def comparison(p):
    """Two or three people compared (more, fewer, times as many); asked for one of them or the total."""
    st = Story(p)
    n = p.person()[0]
    n2 = p.person(n)[0]
    n3 = p.person(n, n2)[0]
    sg, pl = p.thing()
    a = p.n(2, 60)
    rel = p.choice(["more", "fewer", "times"])
    if rel == "more":
        b = p.n(1, 50)
        x = step(a, "+", b)
        rs = [f"{n2} has {b} more {pl} than {n}", f"{n2} has {b} more than {n} does",
              f"{n2} owns {b} more {pl} than {n}", f"compared with {n}, {n2} has {b} more {pl}",
              f"{n2} has {b} {pl} more than {n}", f"{n2} has {n}'s number of {pl} plus {b}"]
        line = f"{n2} has {ann(a, '+', b, x)} {pl}."
    elif rel == "fewer":
        b = p.n(1, a - 1)
        x = step(a, "-", b)
        rs = [f"{n2} has {b} fewer {pl} than {n}", f"{n2} has {b} fewer than {n} does",
              f"{n2} has {b} less than {n}", f"compared with {n}, {n2} has {b} fewer {pl}",
              f"{n2} owns {b} {pl} fewer than {n}", f"{n2} is {b} {pl} short of {n}"]
        line = f"{n2} has {ann(a, '-', b, x)} {pl}."
    else:
        k = p.n(2, 5)
        x = step(a, "*", k)
        word = {2: "twice as many", 3: "three times as many"}.get(k, f"{k} times as many")
        rs = [f"{n2} has {word} {pl} as {n}", f"{n2} has {k} times the number of {pl} that {n} has",
              f"{n2} owns {word} as {n}"]
        if k == 2:
            rs += [f"{n2} has double that amount", f"{n2} has double the number of {pl}"]
        if k == 3:
            rs.append(f"{n2} has triple that number")
        line = f"{n2} has {ann(a, '*', k, x)} {pl}."
    first = p.choice([f"{n} has {a} {pl}", f"{n} owns {a} {pl}", f"{n} collected {a} {pl}",
                      f"there are {a} {pl} in {n}'s collection", f"{n} has a set of {a} {pl}"])
    st.clauses = [first, p.choice(rs)]
    st.first_event = 99
    st.sol = [line]
    mode = p.choice(["one", "total", "total", "three"])
    if mode == "one":
        st.questions = [(f"How many {pl} does {n2} have?", f"how many {pl} {n2} has"),
                        (f"What is the number of {pl} {n2} has?", f"the number of {pl} {n2} has"),
                        (f"How many does {n2} own?", None)]
        st.answer = x
    elif mode == "total":
        y = step(a, "+", x)
        st.sol.append(p.choice([f"Together they have {ann(a, '+', x, y)} {pl}.",
                                f"In total they have {ann(a, '+', x, y)} {pl}.",
                                f"Both of them have {ann(a, '+', x, y)} {pl}."]))
        st.questions = [(f"How many {pl} do they have together?", f"how many {pl} they have together"),
                        (f"What is the total number of {pl} the two of them have?",
                         f"the total number of {pl} the two of them have"),
                        (f"How many {pl} do {n} and {n2} have altogether?", f"how many {pl} {n} and {n2} have altogether"),
                        (f"How many {pl} do both of them have combined?", f"how many {pl} both of them have combined"),
                        (f"How many {pl} are there in all?", f"how many {pl} there are in all")]
        st.answer = y
    else:
        c = p.n(1, 40)
        more = p.rng.random() < 0.5
        if not more:
            need(c < x)
        z = step(x, "+" if more else "-", c)
        t = step(step(a, "+", x), "+", z)
        st.clauses.append(p.choice([f"{n3} has {c} {'more' if more else 'fewer'} {pl} than {n2}",
                                    f"{n3} has {c} {'more' if more else 'fewer'} than {n2}",
                                    f"compared with {n2}, {n3} has {c} {'more' if more else 'fewer'}"]))
        st.sol.append(f"{n3} has {ann(x, '+' if more else '-', c, z)} {pl}.")
        st.sol.append(f"Together they have {ann3(a, '+', x, '+', z, t)} {pl}.")
        st.questions = [(f"How many {pl} do the three of them have?", f"how many {pl} the three of them have"),
                        (f"How many {pl} do {n}, {n2} and {n3} have in total?",
                         f"how many {pl} {n}, {n2} and {n3} have in total"),
                        (f"What is the total for all three?", None)]
        st.answer = t
    return st


def groups_of(p):
    """Containers or rows of equal size; the total, optionally less some taken away."""
    st = Story(p)
    n, s, _, _ = p.person()
    sg, pl = p.thing()
    cs, cp = p.choice(CONTAINERS + [("row", "rows"), ("shelf", "shelves"), ("stack", "stacks")])
    k, per = p.n(2, 12), p.n(2, 15)
    x = step(k, "*", per)
    st.clauses.append(p.choice([
        f"there are {k} {cp}, and each {cs} has {per} {pl}",
        f"each of the {k} {cp} holds {per} {pl}",
        f"{n} has {k} {cp} of {pl}, {per} in every {cs}",
        f"{per} {pl} fit in one {cs}, and {n} fills {k} {cp}",
        f"{n} packs {per} {pl} into each of {k} {cp}",
        f"{n} lines up {k} {cp} of {per} {pl}",
        f"{n} arranges the {pl} in {k} {cp} of {per}",
        f"there are {per} {pl} in every {cs}, and {n} has {k} {cp}",
    ]))
    st.sol.append(p.choice([f"There are {ann(k, '*', per, x)} {pl}.", f"{k} {cp} of {per} make {ann(k, '*', per, x)} {pl}."]))
    if p.rng.random() < 0.5:
        st.questions = [(f"How many {pl} are there in all?", f"how many {pl} there are in all"),
                        (f"How many {pl} are there altogether?", f"how many {pl} there are altogether"),
                        (f"What is the total number of {pl}?", f"the total number of {pl}"),
                        (f"How many {pl} does {n} have?", f"how many {pl} {n} has")]
        st.answer = x
        return st
    b = p.n(1, x - 1)
    y = step(x, "-", b)
    subj = who(p, n, s, 0.5)
    st.clauses.append(p.choice([f"{subj} removes {b} {plural(b, sg, pl)}", f"{b} of them are taken away",
                                f"{subj} gives away {b}", f"{subj} sells {b} of the {pl}",
                                f"{b} {plural(b, sg, pl)} fall out and are lost"]))
    st.sol.append(f"After {b} are gone, {ann(x, '-', b, y)} {pl} are left.")
    st.questions = [(f"How many {pl} remain?", f"how many {pl} remain"),
                    (f"How many {pl} are still there?", f"how many {pl} are still there"),
                    (f"How many are left now?", None)]
    st.answer = y
    return st


def sharing(p):
    """Equal shares among people, or packing into containers of a given size (exact division)."""
    st = Story(p)
    n, s, _, _ = p.person()
    sg, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    g, g1 = p.choice(GROUPS)
    b, k = p.n(2, 12), p.n(2, 16)
    a = step(b, "*", k)
    if p.rng.random() < 0.5:
        st.clauses.append(p.choice([
            f"{n} splits {a} {pl} evenly between {b} {g}",
            f"{a} {pl} are divided equally among {b} {g}",
            f"{n} has {a} {pl} to hand out fairly to {b} {g}",
            f"{n} wants to give {b} {g} the same number of {pl} from a pile of {a}",
            f"there are {a} {pl} to share fairly among {b} {g}",
            f"{n} gives out {a} {pl} so that each of {b} {g} gets the same amount",
        ]))
        st.sol.append(f"Each {g1} gets {ann(a, '/', b, k)} {pl}.")
        st.questions = [(f"How many {pl} does each {g1} receive?", f"how many {pl} each {g1} receives"),
                        (f"How many does each {g1} get?", f"how many each {g1} gets"),
                        (f"What is each {g1}'s share?", f"each {g1}'s share")]
    else:
        st.clauses.append(p.choice([
            f"{n} packs {a} {pl}, {b} to a {cs}",
            f"{a} {pl} are packed in {cp} of {b}",
            f"each {cs} takes {b} {pl}, and {n} has {a} {pl} to pack",
            f"{n} has {a} {pl} and puts {b} in every {cs}",
            f"{n} sorts {a} {pl} into {cp}, with {b} {pl} per {cs}",
        ]))
        st.sol.append(f"{cap(s)} fills {ann(a, '/', b, k)} {cp}.")
        st.questions = [(f"How many {cp} does {s} need?", f"how many {cp} {s} needs"),
                        (f"How many {cp} are filled?", f"how many {cp} are filled"),
                        (f"How many {cp} can {s} fill?", f"how many {cp} {s} can fill")]
    st.answer = k
    return st


def shopping(p):
    """Items at a price: the cost, the change from a bill, or two kinds of items."""
    st = Story(p)
    n, s, _, _ = p.person()
    (sg, pl) = p.choice(PRICED)
    price, k = p.n(2, 20), p.n(2, 9)
    x = step(k, "*", price)
    price_fact = p.choice([f"a {sg} costs ${price}", f"{pl} cost ${price} each", f"one {sg} is ${price}",
                           f"each {sg} sells for ${price}", f"the price of a {sg} is ${price}",
                           f"{pl} are ${price} apiece"])
    buys = [f"{n} buys {k} {pl}", f"{n} wants {k} {pl}", f"{n} picks out {k} {pl}", f"{n} orders {k} {pl}"]
    if p.rng.random() < 0.5:
        st.clauses = [price_fact, p.choice(buys + [f"{n} gets {k} of them"])]
    else:
        st.clauses = [p.choice(buys), price_fact]
    st.first_event = 2
    st.sol = [f"The {pl} cost {ann(k, '*', price, x)} dollars."]
    mode = p.choice(["cost", "cost", "change", "two"])
    if mode == "cost":
        st.questions = [(f"How much does {s} pay?", f"how much {s} pays"),
                        (f"How much money does {s} spend?", f"how much money {s} spends"),
                        ("What is the total cost?", "the total cost"),
                        (f"How many dollars does {s} need?", f"how many dollars {s} needs")]
        st.answer = x
    elif mode == "change":
        m = p.choice([m for m in (20, 50, 100, 150, 200) if m > x] or [0])
        need(m > x)
        y = step(m, "-", x)
        st.clauses.append(p.choice([f"{s} pays with a ${m} bill", f"{s} hands over ${m}",
                                    f"{s} brought ${m}",
                                    f"{s} gives the cashier ${m}"]))
        st.sol.append(f"{cap(s)} gets {ann(m, '-', x, y)} dollars back.")
        st.questions = [(f"How much change does {s} get back?", f"how much change {s} gets back"),
                        ("How much money is left?", "how much money is left"),
                        (f"How many dollars does {s} have after paying?", f"how many dollars {s} has after paying")]
        st.answer = y
    else:
        (sg2, pl2) = p.choice([i for i in PRICED if i[0] != sg])
        p2, k2 = p.n(2, 15), p.n(2, 8)
        x2 = step(k2, "*", p2)
        t = step(x, "+", x2)
        st.clauses.append(p.choice([f"{s} also buys {k2} {pl2} at ${p2} each",
                                    f"{s} adds {k2} {pl2} that cost ${p2} apiece",
                                    f"{k2} {pl2} at ${p2} each go in the cart too"]))
        st.sol.append(f"The {pl2} cost {ann(k2, '*', p2, x2)} dollars.")
        st.sol.append(f"Altogether that is {ann(x, '+', x2, t)} dollars.")
        st.questions = [(f"How much does {s} spend in all?", f"how much {s} spends in all"),
                        ("What is the total bill?", "the total bill"),
                        (f"How many dollars does {s} pay altogether?", f"how many dollars {s} pays altogether")]
        st.answer = t
    return st


def money(p):
    """Money saved, spent and earned."""
    st = Story(p)
    st.past = p.rng.random() < 0.4
    v = st.v
    n, s, o, ps = p.person()
    n2 = p.person(n)[0]
    (sg, pl) = p.choice(PRICED)
    if p.rng.random() < 0.5:
        m = p.n(10, 150)
        st.clauses.append(p.choice([f"{n} {v('has', 'had')} ${m}", f"{n} {v('has', 'had')} ${m} in a piggy bank",
                                    f"{n}'s wallet {v('holds', 'held')} ${m}", f"{n} {v('has', 'had')} saved ${m}"]))
        x = m
    else:
        a, w = p.n(2, 20), p.n(2, 9)
        x = step(a, "*", w)
        st.clauses.append(p.choice([f"{n} {v('saves', 'saved')} ${a} a week for {w} weeks",
                                    f"for {w} weeks, {n} {v('puts', 'put')} away ${a} each week",
                                    f"{n} {v('earns', 'earned')} ${a} every week for {w} weeks"]))
        st.sol.append(f"{cap(s)} saves {ann(a, '*', w, x)} dollars.")
    for kind in p.choice([["spend"], ["spend", "earn"], ["earn", "spend"], ["spend", "spend"]]):
        subj = who(p, n, s)
        if kind == "spend":
            need(x > 1)
            b = p.n(1, x - 1)
            y = step(x, "-", b)
            st.clauses.append(p.choice([f"{subj} {v('buys', 'bought')} a {sg} for ${b}",
                                        f"a {sg} {v('costs', 'cost')} {o} ${b}",
                                        f"{subj} {v('pays', 'paid')} ${b} for a {sg}",
                                        f"{subj} {v('uses', 'used')} ${b} of it on a {sg}"]))
            st.sol.append(f"After the {sg}, {s} has {ann(x, '-', b, y)} dollars.")
        else:
            c = p.n(1, 50)
            y = step(x, "+", c)
            st.clauses.append(p.choice([f"{subj} {v('earns', 'earned')} ${c} more", f"{n2} {v('gives', 'gave')} {o} ${c}",
                                        f"{subj} {v('makes', 'made')} ${c} selling lemonade",
                                        f"{subj} {v('gets', 'got')} ${c} for doing chores"]))
            st.sol.append(f"With ${c} more, {s} has {ann(x, '+', c, y)} dollars.")
        x = y
    st.questions = [(f"How much money does {n} have now?", f"how much money {n} has now"),
                    (f"How many dollars does {s} have left?", f"how many dollars {s} has left"),
                    (f"How much does {s} have in the end?", f"how much {s} has in the end")]
    st.answer = x
    return st


def progress(p):
    """A goal (pages, laps, steps of a puzzle) minus a daily amount over some days."""
    st = Story(p)
    n, s, _, _ = p.person()
    a, d = p.n(2, 25), p.n(2, 9)
    x = step(a, "*", d)
    t = p.n(x + 1, 199)
    y = step(t, "-", x)
    unit, goal = p.choice([("pages", [f"a book has {t} pages", f"{n}'s book is {t} pages long",
                                      f"{n} has to read a {t}-page book"]),
                           ("laps", [f"{n} wants to swim {t} laps", f"{n}'s goal is {t} laps",
                                     f"the coach asks {n} to run {t} laps"]),
                           ("pieces", [f"a puzzle has {t} pieces", f"{n} is building a {t}-piece puzzle"])])
    goal = p.choice(goal)
    verb = {"pages": "reads", "laps": "does", "pieces": "places"}[unit]
    daily = p.choice([f"{s} {verb} {a} {unit} a day for {d} days", f"every day for {d} days, {s} {verb} {a} {unit}",
                      f"{s} {verb} {a} {unit} each day, for {d} days"])
    st.clauses = [goal, daily]
    st.first_event = 99
    st.sol = [f"In {d} days {s} {verb} {ann(a, '*', d, x)} {unit}.", f"That leaves {ann(t, '-', x, y)} {unit}."]
    st.questions = [(f"How many {unit} are left?", f"how many {unit} are left"),
                    (f"How many {unit} does {s} still have to go?", f"how many {unit} {s} still has to go"),
                    (f"How many more {unit} remain?", f"how many more {unit} remain")]
    st.answer = y
    return st


def regroup(p):
    """Split, add to one part; people absent then grouped; keep some and share the rest; a day's stock."""
    st = Story(p)
    n, s, _, _ = p.person()
    sg, pl = p.thing()
    cs, cp = p.choice(CONTAINERS)
    kind = p.choice(["split_add", "absent", "keep_share", "stock"])
    if kind == "split_add":
        b, k = p.n(2, 10), p.n(2, 20)
        a = step(b, "*", k)
        c = p.n(1, 40)
        y = step(k, "+", c)
        st.clauses = [p.choice([f"{n} divides {a} {pl} evenly into {b} {cp}", f"{a} {pl} are split equally among {b} {cp}",
                                f"{n} shares {a} {pl} out over {b} {cp} equally"]),
                      p.choice([f"{n} puts {c} extra {pl} into one {cs}", f"one {cs} gets {c} more {pl}",
                                f"{n} adds another {c} to one of the {cp}"])]
        st.sol = [f"Each {cs} gets {ann(a, '/', b, k)} {pl}.", f"That {cs} now has {ann(k, '+', c, y)} {pl}."]
        st.questions = [(f"How many {pl} are in that {cs}?", f"how many {pl} are in that {cs}"),
                        (f"How many {pl} does that {cs} hold now?", f"how many {pl} that {cs} holds now")]
        st.answer = y
    elif kind == "absent":
        k, groups = p.n(2, 8), p.n(2, 12)
        rest = step(k, "*", groups)
        b = p.n(1, 20)
        a = step(rest, "+", b)
        pp, club = p.choice([("students", "class"), ("players", "team"), ("children", "camp"), ("dancers", "studio")])
        st.clauses = [p.choice([f"a {club} has {a} {pp}", f"there are {a} {pp} in the {club}", f"{a} {pp} belong to a {club}"]),
                      p.choice([f"{b} of them stay home today", f"{b} {pp} are missing today", f"today {b} are away"]),
                      p.choice([f"the rest make groups of {k}", f"the others split into groups of {k}",
                                f"those present form teams of {k}"])]
        st.first_event = 99
        st.sol = [f"{ann(a, '-', b, rest)} {pp} are there.", f"They make {ann(rest, '/', k, groups)} groups."]
        st.questions = [("How many groups are there?", "how many groups there are"),
                        ("How many groups can they make?", "how many groups they can make")]
        st.answer = groups
    elif kind == "keep_share":
        g, g1 = p.choice(GROUPS)
        k, per = p.n(2, 10), p.n(2, 15)
        x = step(k, "*", per)
        f = p.n(2, 8)
        need(x > f)
        t = p.choice([t for t in range(1, x) if (x - t) % f == 0] or [0])
        need(t > 0)
        y = step(x, "-", t)
        z = step(y, "/", f)
        st.clauses = [p.choice([f"{n} has {k} {cp} of {pl} with {per} in each", f"{k} {cp} hold {per} {pl} each"]),
                      p.choice([f"{n} keeps {t} of them",
                                f"{t} {plural(t, sg, pl)} are kept aside"]),
                      p.choice([f"the rest are shared equally by {f} {g}", f"{f} {g} split the others evenly"])]
        st.sol = [f"There are {ann(k, '*', per, x)} {pl}.", f"{ann(x, '-', t, y)} {pl} are shared.",
                  f"Each {g1} gets {ann(y, '/', f, z)} {pl}."]
        st.questions = [(f"How many {pl} does each {g1} get?", f"how many {pl} each {g1} gets"),
                        (f"What is each {g1}'s share?", f"each {g1}'s share")]
        st.answer = z
    else:
        fsg, fpl = p.thing(food=True)
        k, boxes = p.n(2, 10), p.n(2, 15)
        rest = step(k, "*", boxes)
        c = p.n(1, 40)
        total = step(rest, "+", c)
        a = p.n(1, total - 1)
        b = total - a
        ok_b = step(a, "+", b)
        place = p.choice(["a bakery", "a farm stand", "a shop", "the market"])
        st.clauses = [p.choice([f"{place} makes {a} {fpl} before noon and {b} more after noon",
                                f"in the morning {place} has {a} {fpl}, and {b} more come in later"]),
                      p.choice([f"{c} {fpl} are sold", f"customers buy {c} of them"]),
                      p.choice([f"the remaining {fpl} go into {cp} of {k}", f"what is left is packed {k} to a {cs}"])]
        st.sol = [f"There are {ann(a, '+', b, ok_b)} {fpl}.", f"{ann(ok_b, '-', c, rest)} are left.",
                  f"They fill {ann(rest, '/', k, boxes)} {cp}."]
        st.questions = [(f"How many {cp} are filled?", f"how many {cp} are filled"),
                        (f"How many {cp} do they need?", f"how many {cp} they need")]
        st.answer = boxes
    return st


STORIES = [(inventory, 0.3), (comparison, 0.15), (groups_of, 0.1), (sharing, 0.1), (shopping, 0.12),
           (money, 0.08), (progress, 0.05), (regroup, 0.1)]


def make_paraphrase(rng):
    """One paraphrased problem {"question", "answer"} from the seeded stream rng."""
    r = rng.random()
    acc = 0.0
    gen = STORIES[-1][0]
    for g, w in STORIES:
        acc += w
        if r < acc:
            gen = g
            break
    while True:
        try:
            st = gen(Pick(rng))
            break
        except Retry:
            continue
    q = render(st)
    return {"question": q, "answer": "\n".join(st.sol) + f"\n#### {st.answer}"}
