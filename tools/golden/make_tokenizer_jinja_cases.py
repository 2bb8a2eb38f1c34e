#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/jinja_cases.json: small templates with the output Jinja2 gives
under transformers' chat-template environment (sandboxed, trim_blocks, lstrip_blocks, loop
controls, raise_exception, tojson keeping non-ASCII text). A case whose rendering raises records
"error": true. Needs jinja2. Usage: make_tokenizer_jinja_cases.py OUT_FILE
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception

CTX = {
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi  there\n"},
                 {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!", "tool_calls": None},
                 {"role": "user", "content": "数学: 2+2?"}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "déjà vu", "parameters": {
        "type": "object", "properties": {"x": {"type": "number", "minimum": 1e-05, "maximum": 1.5e16}}}}}],
    "n": 7, "f": 2.5, "neg": -3, "s": "  Hello, World  ", "empty": "", "none": None, "yes": True, "no": False,
    "items": [3, 1, 2, 3], "words": ["b", "A", "c"], "d": {"b": 1, "a": [1, 2.0, None, True], "c": {"x": "y"}},
}

TEMPLATES = [
    # Whitespace control, trim_blocks, lstrip_blocks, comments, raw.
    "a\n{% if yes %}\nb\n{% endif %}\nc\n",
    "  {% if yes %}x{% endif %}  \n  {%- if yes %}y{% endif -%}  \nz",
    "{% for m in messages %}\n    {{ m.role }}\n{% endfor %}",
    "{%+ if yes %}keep{% endif +%}\nafter",
    "a {# comment #} b\n  {# line comment #}\nc",
    "{{- '  x  ' -}}  \n  {{ 'y' }}\n",
    "{% raw %}{{ not rendered }}{% endraw %}",
    "line1\r\nline2\r\n",
    "{{ 'a' }}\n\n",
    "   {{ s }}   ",
    # Output of Python values.
    "{{ none }}|{{ yes }}|{{ no }}|{{ n }}|{{ f }}|{{ neg }}|{{ 1e-05 }}|{{ 10.0 / 4 }}|{{ 2 ** 10 }}",
    "{{ items }}|{{ words }}|{{ d }}|{{ (1, 'a') }}|{{ undefined_var }}",
    "{{ \"it's\" }}|{{ ['it\\'s', \"q\\\"\"] }}|{{ {'k': 'v\\n'} }}",
    # Operators.
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 * 3 + 1 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }}",
    "{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'x' + 'y' }} {{ 1 + 2.5 }}",
    "{{ 'ell' in 'hello' }} {{ 2 in items }} {{ 'a' in d }} {{ 'z' not in d }} {{ not yes }}",
    "{{ 1 < 2 }} {{ 'a' < 'b' }} {{ 2 >= 2.0 }} {{ 1 == 1.0 }} {{ none == none }} {{ [1, 2] == [1, 2] }}",
    "{{ yes and 'A' }} {{ no or 'B' }} {{ empty or 'C' }} {{ n and n }} {{ none or empty or 0 }}",
    "{{ 'y' if yes else 'n' }} {{ 'y' if no else 'n' }} {{ 'x' if no }}.",
    # Subscripts and slices.
    "{{ items[0] }} {{ items[-1] }} {{ items[1:3] }} {{ items[::-1] }} {{ items[::2] }} {{ s[2:7] }} {{ 'héllo'[1] }}",
    "{{ messages[-1]['content'] }} {{ messages[0].role }} {{ d.c.x }} {{ d['a'][1] }} {{ items[10] is defined }}",
    # Tests.
    "{{ n is defined }} {{ nope is defined }} {{ none is none }} {{ s is string }} {{ d is mapping }} {{ items is sequence }}",
    "{{ n is number }} {{ f is float }} {{ n is integer }} {{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }}",
    "{{ n is not none }} {{ yes is true }} {{ no is false }} {{ yes is boolean }} {{ 'a' is in 'abc' }} {{ n is eq 7 }}",
    "{{ empty is string }} {{ items is iterable }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ none is sameas none }}",
    # Filters.
    "[{{ s | trim }}] [{{ s | length }}] [{{ items | length }}] [{{ 'héllo' | length }}] [{{ s | lower }}] [{{ s | upper }}]",
    "{{ s | replace('l', 'L') }} {{ s | replace('l', 'L', 1) }} {{ words | join(', ') }} {{ items | join }}",
    "{{ items | first }} {{ items | last }} {{ nope | default('dflt') }} {{ empty | default('e', true) }} {{ none | default('x') }}",
    "{{ d | items | list }} {{ d | dictsort }} {{ items | unique | list }} {{ items | sort }} {{ words | sort }}",
    "{{ words | sort(reverse=true) }} {{ items | reverse | list }} {{ 'abc' | reverse }} {{ items | sum }} {{ items | min }} {{ items | max }}",
    "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
    "{{ messages | rejectattr('role', 'eq', 'user') | map(attribute='role') | join(',') }}",
    "{{ messages | map(attribute='role') | unique | list }} {{ words | map('upper') | list }} {{ items | select('odd') | list }}",
    "{{ items | reject('odd') | list }} {{ messages | selectattr('tool_calls') | list | length }}",
    "{{ f | round }} {{ 2.567 | round(2) }} {{ 2.5 | round(0, 'floor') }} {{ '42' | int }} {{ 'x' | int }} {{ '2.5' | float }} {{ neg | abs }}",
    "{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(4, true) }}|{{ 'a\n\nb' | indent(2, blank=true) }}",
    "{{ 'hello world' | title }} {{ 'hello WORLD' | capitalize }} {{ 'one two  three' | wordcount }} {{ '<a&b>' | e }}",
    "{{ n | string }}{{ items | string }} {{ n ~ '' | length }} {{ items | batch(3) | list }}",
    "{{ tools | tojson }}",
    "{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'déjà \"q\"\n' | tojson }}|{{ none | tojson }}",
    "{{ d | tojson(sort_keys=true) }}|{{ [1.0, 0.1, 1e300, -0.0, 123456789.0, 1e16] | tojson }}",
    "{{ '%s is %d' | format('x', 3) }} {{ '%s-%s' % ('a', 'b') }}",
    "{{ d | tojson(true) }}|{{ 'déjà 😀\x7f' | tojson(ensure_ascii=true) }}|{{ items | tojson(false, 1) }}",
    "{{ '{} and {}'.format('a', 1) }} {{ '{1}{0}{{x}}'.format('a', 'b') }} {{ '{n}!'.format(n=none) }}",
    # String, dict and list methods.
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ s.upper() }}|{{ s.lower() }}",
    "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a\nb\r\nc'.splitlines() }}",
    "{{ s.startswith('  He') }} {{ s.endswith(('x', '  ')) }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.count('b') }} {{ 'abc'.replace('b', 'B') }}",
    "{{ '-'.join(words) }} {{ 'hello world'.title() }} {{ 'abc'.capitalize() }} {{ '123'.isdigit() }} {{ 'a1'.isdigit() }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %} {{ d.keys() | list }} {{ d.get('b') }} {{ d.get('zz', 'no') }}",
    "{{ messages[2].content.split('</think>')[-1].lstrip('\n') }}|{{ messages[2].content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}",
    "{{ items.index(2) }} {{ items.count(3) }}",
    # Loops.
    "{% for x in items %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }} {% endfor %}",
    "{% for x in items %}{{ loop.previtem | default('-') }}>{{ x }}>{{ loop.nextitem | default('-') }} {{ loop.cycle('odd', 'even') }}|{% endfor %}",
    "{% for x in [] %}a{% else %}empty{% endfor %} {% for x in items if x > 1 %}{{ x }}{{ loop.index }}{% endfor %}",
    "{% for x in items %}{% if x == 2 %}{% continue %}{% endif %}{% if loop.index > 3 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %} {% for c in 'héj' %}[{{ c }}]{% endfor %} {% for k in d %}{{ k }}{% endfor %}",
    "{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }} {% endfor %}{% endfor %}{{ range(2, 10, 3) | list }}",
    # Assignments, namespaces, macros.
    "{% set x = 5 %}{% set y, z = 1, 2 %}{{ x + y + z }}{% for i in items %}{% set x = i %}{% endfor %} {{ x }}",
    "{% set ns = namespace(total=0, seen=false) %}{% for i in items %}{% set ns.total = ns.total + i %}{% endfor %}{{ ns.total }} {{ ns.seen }}",
    "{% set block %}inner {{ n }}{% endset %}[{{ block }}] {% set up | upper %}shout{% endset %}{{ up }}",
    "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }}",
    "{% macro render(m) %}{{ m.role | upper }}: {{ m.content | trim }}{% endmacro %}{% for m in messages %}{{ render(m) }}\n{% endfor %}",
    "{% filter upper %}abc {{ n }}{% endfilter %}",
    "{% if n > 5 %}big{% elif n > 2 %}mid{% else %}small{% endif %} {% if none %}x{% elif empty %}y{% else %}z{% endif %}",
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ add_generation_prompt }}",
    "{{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ {'x': 1, 'y': [2]} }} {{ [1, [2, 3]] | tojson }}",
    # Errors.
    "{{ raise_exception('bad input') }}",
    "{{ nope.attr }}",
    "{{ items + 1 }}",
    "{{ 1 / 0 }}",
    "{{ items.append(4) }}",
    "{% for x in n %}{% endfor %}",
    "{{ 'a' < 1 }}",
    "{% set ns = 1 %}{% set ns.x = 2 %}",
]


def main():
    cases = []
    for t in TEMPLATES:
        case = {"template": t}
        try:
            case["output"] = ENV.from_string(t).render(**CTX)
        except Exception as e:  # the interpreter must fail on the same templates
            case["error"] = True
            case["reference_error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump({"jinja2_version": jinja2.__version__, "context": CTX, "cases": cases}, f, ensure_ascii=False,
                  indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases ({sum('error' in c for c in cases)} errors) to {sys.argv[1]}")


if __name__ == "__main__":
    main()
