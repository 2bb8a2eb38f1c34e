#!/usr/bin/env python3
"""Writes the committed tokenizer corpus (tests/fixtures/tokenizer/corpus.jsonl).

The corpus holds our own strings: source code, CJK, emoji, other scripts, runs of whitespace, digit
runs and text containing special-token spellings. Deterministic: the same script writes the same file.
The gsm8k part of the golden corpus is not stored here; goldens reference it by line index.

Usage: make_tokenizer_corpus.py OUT_FILE
"""
import json
import random
import sys

BASE = [
    "", " ", "  ", "\n", "\t", "\r\n", "a", "A", "Hello", "hello world", " hello world", "Hello, World!",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure you'll see they've done it, haven't they? He'd say she's right.",
    "DON'T SHOUT! It'S fine. I'LL go.",
    "e.g. i.e. etc. Mr. Smith went to Washington, D.C. on 3/14/2015 at 10:30am.",
    "email: someone@example.com, url: https://example.org/path?q=1&x=%20#frag",
    "C:\\Users\\name\\Documents\\file.txt",
    "$100.50 + €20,00 = ¥12,345 (approx.) ±5% ≈ £3",
    "3.14159265358979323846264338327950288419716939937510",
    "1234567890", "12345678901234567890123", "0", "00", "007", "1,000,000", "1.000.000,00", "-42", "+7",
    "2^10 = 1024; 10**9+7; 0x1F; 0b1010; 1e-9; 6.022e23",
    "<<16-3-4=9>>9 duck eggs", "#### 18",
    "中文测试：你好，世界！这是一个句子。", "今天天气很好，我们去公园散步吧。",
    "日本語のテキスト、ひらがなとカタカナ（カタカナ）を含む。", "ｶﾀｶﾅ半角 ＡＢＣ全角 １２３",
    "한국어 문장입니다. 안녕하세요!", "Tiếng Việt có dấu: Xin chào, thế giới!",
    "Русский текст: Привет, мир! Ёжик.", "Ελληνικά: Γειά σου Κόσμε", "עברית: שלום עולם",
    "العربية: مرحبا بالعالم", "हिन्दी: नमस्ते दुनिया", "ไทย: สวัสดีชาวโลก", "ქართული ენა", "Հայերեն",
    "தமிழ் மொழி", "বাংলা ভাষা", "አማርኛ", "ᚠᛇᚻ᛫ᛒᛦᚦ", "𐌰𐌱𐌲 gothic", "Ωmega ohm Ω Å Å ﬁ ﬀ ǅ",
    "emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✨🎉", "🙂", "🤖 robots 🤖🤖", "keycap 1️⃣ #️⃣",
    "combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323", "decomposed: Cafe\u0301 vs composed Café",
    "zero\u200bwidth\u200cjoin\u200dnon", "bom\ufeffinside", "nbsp\u00a0here\u2009thin\u3000ideographic",
    "math: ∀x∈ℝ, ∃y: x²+y²≤1 ⇒ √(x²) = |x|; ∑ᵢ aᵢ ∫₀¹ f(x)dx",
    "arrows → ← ↑ ↓ ⇔ and boxes ┌─┐│└┘ and braille ⠓⠑⠇⠇⠕",
    "quotes “double” ‘single’ «guillemets» „low“ — em dash – en dash … ellipsis",
    "tab\tseparated\tvalues\there", "line1\nline2\n\nline4\n\n\n", "\n\n\n\n", "   leading spaces",
    "trailing spaces   ", "mixed \t \n \r\n whitespace \t\t", "a  b   c    d     e", " \n \n ",
    "\t\t\tindent", "        eight spaces", "x" + " " * 40 + "y", "\r\r\r", "\u2028line sep\u2029para sep",
    "<｜begin▁of▁sentence｜>Hello<｜end▁of▁sentence｜>", "<｜User｜>Hi<｜Assistant｜>Hello!",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "<|im_end|><|im_end|>",
    "text <think>reasoning</think> answer", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get", "almost <|im_start  not special",
    "<|im_start|><|im_start|>x", "partial <｜User", "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>",
    "<s> </s> <unk> [INST] [/INST] <<SYS>>", "<｜▁pad▁｜>", " <|im_end|> spaced ", "Ġhello Ċ ĉ",
    "\\n literal backslash-n and \\t", "'s 't 're 've 'm 'll 'd", "''' \"\"\" ``` ~~~",
    "!!!???...,,,;;;:::", "((([[[{{{}}}]]])))", "<<<>>>===!==", "a-b_c.d/e\\f|g", "@#$%^&*", "___init___",
]

CODE = [
    'def fib(n):\n    """Return the n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n',
    '#include <cstdio>\nint main(int argc, char** argv) {\n\tprintf("%d\\n", argc);\n\treturn 0;\n}\n',
    'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}\n',
    'function f(x) { return x === undefined ? null : x?.y ?? 0; }\nconst arr = [1, 2, 3].map((n) => n ** 2);',
    'SELECT id, name FROM users WHERE age >= 18 AND name LIKE \'%son\' ORDER BY id DESC LIMIT 10;',
    '<html>\n  <body>\n    <div class="x">Hi &amp; bye</div>\n  </body>\n</html>',
    '{"key": "value", "n": [1, 2.5, -3e10], "nested": {"t": true, "f": false, "z": null}}',
    'x = {"a": 1}\nif x["a"] == 1:\n\tprint(f"{x!r:>10}")\n',
    '    if (a &&\n        b) {\n            c();\n        }\n',
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("hello")\n}\n',
    'public static void main(String[] args) { System.out.println("Hi"); }',
    '$ ls -la | grep "\\.py$" | wc -l\n#!/bin/bash\nset -euo pipefail\n',
    'diff --git a/x b/x\n@@ -1,3 +1,4 @@\n-old line\n+new line\n context\n',
    'matrix = [[1, 2, 3],\n          [4, 5, 6]]\n\n\n\nresult = sum(map(sum, matrix))  # 21',
    '\\begin{equation}\n  E = mc^2 \\quad \\forall x \\in \\mathbb{R}\n\\end{equation}',
    '| col1 | col2 |\n|------|------|\n| a    | b    |\n',
    '# Title\n\n## Subtitle\n\n- item 1\n- item 2\n  - nested\n\n1. first\n2. second\n\n> quote\n',
    'name: ci\non: [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n',
]

WORDS = ["the", "cat", "déjà", "vu", "über", "naïve", "中文", "日本", "한글", "😀", "42", "3.5", "don't", "it's",
         "HTTP", "json", "x", "Ω", "tab\t", "nl\n", "  ", "<|im_end|>", "<｜User｜>", "ñ", "İstanbul", "ß", "ﬁ",
         "1000000", "२०२४", "٣٤٥", "١٢", "Ⅻ", "½", "²", "①", "\u00a0", "—", "…", "'s", "'LL"]


def synthetic(rng, count):
    out = []
    for _ in range(count):
        n = rng.randint(1, 24)
        parts = []
        for _ in range(n):
            w = rng.choice(WORDS)
            sep = rng.choice([" ", " ", " ", "", "\n", "  ", "\t", ", ", ". ", "\n\n", " \n"])
            parts.append(w + sep)
        out.append("".join(parts))
    return out


def whitespace_runs():
    out = []
    for ch in [" ", "\t", "\n", "\r\n", " \n", "\n "]:
        for n in [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 64, 100]:
            out.append("a" + ch * n + "b")
            out.append(ch * n)
    return out


def digit_runs(rng):
    out = []
    for n in range(1, 41):
        out.append("".join(rng.choice("0123456789") for _ in range(n)))
    for n in [1, 2, 3, 4, 5, 6, 7, 9, 12, 25]:
        out.append("x" + "7" * n + "y " + "1" * n + ".5")
    return out


def main():
    rng = random.Random(20261130)
    strings = list(BASE) + list(CODE)
    strings += whitespace_runs()
    strings += digit_runs(rng)
    strings += synthetic(rng, 560)
    # Long strings stress the regex and BPE caches.
    strings.append(" ".join(CODE) * 3)
    strings.append("".join(BASE[20:60]) * 5)
    seen, unique = set(), []
    for s in strings:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        for s in unique:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    print(f"wrote {len(unique)} strings to {sys.argv[1]}")


if __name__ == "__main__":
    main()
