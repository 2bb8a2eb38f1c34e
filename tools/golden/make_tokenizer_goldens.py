#!/usr/bin/env python3
"""Records tokenizer goldens from the Hugging Face reference (transformers + tokenizers).

For each --tokenizer-dir NAME=DIR it writes OUT/tokenizer_golden_NAME.jsonl, one JSON object a line:
  {"meta": {...}}                                   versions, special ids, reference faithfulness
  {"kind": "encode", "source": "corpus", "index": I, "ids": [...], ...}
  {"kind": "encode", "source": "gsm8k/test.jsonl", "line": L, "field": "question", "ids": [...], ...}
  {"kind": "chat", "conversation": K, "name": ..., "text": ...}    (or "error": message)
Corpus strings are not copied: "corpus" indexes tests/fixtures/tokenizer/corpus.jsonl and gsm8k lines
are re-read from the shared dataset by the tests.

Encode records: "ids" are AutoTokenizer ids with add_special_tokens=False. "ids_fast" (from
PreTrainedTokenizerFast, which keeps tokenizer.json's pipeline as is) and "ids_raw" (the tokenizers
library alone) appear only when they differ from "ids". A subset also has "ids_special"
(add_special_tokens=True) and its decodes. "decode" appears when decode(ids) differs from the string.

Runs offline: python3 make_tokenizer_goldens.py --tokenizer-dir deepseek_v3=DIR --tokenizer-dir
qwen3=DIR --gsm8k-dir ../shared/datasets/gsm8k --out OUT
"""
import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.normpath(os.path.join(HERE, "..", "..", "tests", "fixtures", "tokenizer"))
GSM8K_FILE = "test.jsonl"
GSM8K_ROWS = 700          # questions and answers of the first rows: 1,400 strings
SPECIAL_EVERY = 5         # every 5th string also gets add_special_tokens=True


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def load_corpus(gsm8k_dir):
    """Returns [(record_key_dict, text)]."""
    items = []
    with open(os.path.join(FIXTURES, "corpus.jsonl"), encoding="utf-8") as f:
        for i, line in enumerate(f):
            items.append(({"source": "corpus", "index": i}, json.loads(line)))
    with open(os.path.join(gsm8k_dir, GSM8K_FILE), encoding="utf-8") as f:
        for line_no, line in enumerate(f):
            if line_no >= GSM8K_ROWS:
                break
            row = json.loads(line)
            for field in ("question", "answer"):
                items.append(({"source": "gsm8k/" + GSM8K_FILE, "line": line_no, "field": field}, row[field]))
    return items


def load_conversations():
    with open(os.path.join(FIXTURES, "chat_conversations.json"), encoding="utf-8") as f:
        return json.load(f)


def versions():
    out = {"python": sys.version.split()[0]}
    for mod in ("transformers", "tokenizers", "jinja2"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:  # keep going: versions are informational
            out[mod] = f"unavailable: {e}"
    return out


def component_json(tok, key):
    """The pipeline component `key` as the loaded tokenizer runs it (None when unknown)."""
    try:
        return json.loads(tok.backend_tokenizer.to_str()).get(key)
    except Exception:
        return None


def encode(tok, text, special):
    return list(tok.encode(text, add_special_tokens=special))


def record_tokenizer(name, directory, items, conversations, out_dir):
    from transformers import AutoTokenizer
    started = time.time()
    auto = AutoTokenizer.from_pretrained(directory)
    fast = None
    try:
        from transformers import PreTrainedTokenizerFast
        fast = PreTrainedTokenizerFast.from_pretrained(directory)
    except Exception as e:
        print(f"[{name}] PreTrainedTokenizerFast unavailable: {e}", file=sys.stderr)
    raw = None
    try:
        import tokenizers
        raw = tokenizers.Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    except Exception as e:
        print(f"[{name}] tokenizers.Tokenizer unavailable: {e}", file=sys.stderr)

    with open(os.path.join(directory, "tokenizer.json"), encoding="utf-8") as f:
        file_json = json.load(f)
    # transformers may swap parts of tokenizer.json's pipeline for its own per tokenizer class.
    faithful = {key: component_json(auto, key) == file_json.get(key)
                for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder")}
    meta = {
        "name": name,
        "versions": versions(),
        "auto_class": type(auto).__name__,
        "fast_class": type(fast).__name__ if fast is not None else None,
        "auto_matches_tokenizer_json": faithful,
        "bos_token": auto.bos_token, "eos_token": auto.eos_token,
        "bos_token_id": auto.bos_token_id, "eos_token_id": auto.eos_token_id,
        "len": len(auto),
        "gsm8k_file": GSM8K_FILE, "gsm8k_rows": GSM8K_ROWS, "special_every": SPECIAL_EVERY,
    }
    counts = {"encode": 0, "fast_differs": 0, "raw_differs": 0, "encode_errors": 0,
              "chat": 0, "chat_errors": 0}
    path = os.path.join(out_dir, f"tokenizer_golden_{name}.jsonl")
    tmp = path + ".partial"
    lines = []
    for n, (key, text) in enumerate(items):
        rec = {"kind": "encode", **key}
        try:
            ids = encode(auto, text, False)
            rec["ids"] = ids
            if fast is not None:
                ids_fast = encode(fast, text, False)
                if ids_fast != ids:
                    rec["ids_fast"] = ids_fast
                    counts["fast_differs"] += 1
            if raw is not None:
                ids_raw = list(raw.encode(text, add_special_tokens=False).ids)
                if ids_raw != ids:
                    rec["ids_raw"] = ids_raw
                    counts["raw_differs"] += 1
            decoded = auto.decode(ids, skip_special_tokens=False)
            if decoded != text:
                rec["decode"] = decoded
            if n % SPECIAL_EVERY == 0:
                ids_special = encode(auto, text, True)
                rec["ids_special"] = ids_special
                rec["decode_special"] = auto.decode(ids_special, skip_special_tokens=False)
                rec["decode_special_skip"] = auto.decode(ids_special, skip_special_tokens=True)
                if fast is not None:
                    ids_special_fast = encode(fast, text, True)
                    if ids_special_fast != ids_special:
                        rec["ids_special_fast"] = ids_special_fast
                        rec["decode_special_fast"] = fast.decode(ids_special_fast, skip_special_tokens=False)
                        rec["decode_special_skip_fast"] = fast.decode(ids_special_fast, skip_special_tokens=True)
                    decoded_fast = fast.decode(rec.get("ids_fast", ids), skip_special_tokens=False)
                    if decoded_fast != text:
                        rec["decode_fast"] = decoded_fast
            counts["encode"] += 1
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"
            counts["encode_errors"] += 1
        lines.append(dumps(rec))

    for k, conv in enumerate(conversations):
        rec = {"kind": "chat", "conversation": k, "name": conv["name"]}
        try:
            kwargs = dict(conv.get("kwargs") or {})
            text = auto.apply_chat_template(conv["messages"], tools=conv.get("tools"),
                                            add_generation_prompt=conv["add_generation_prompt"],
                                            tokenize=False, **kwargs)
            if not isinstance(text, str):
                raise TypeError(f"apply_chat_template returned {type(text).__name__}")
            rec["text"] = text
            counts["chat"] += 1
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {e}"
            counts["chat_errors"] += 1
        lines.append(dumps(rec))

    meta["counts"] = counts
    meta["seconds"] = round(time.time() - started, 1)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(dumps({"meta": meta}) + "\n")
        for line in lines:
            f.write(line + "\n")
    os.replace(tmp, path)
    print(f"[{name}] wrote {path}: {dumps(counts)} faithful={dumps(faithful)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer-dir", action="append", required=True, metavar="NAME=DIR")
    parser.add_argument("--gsm8k-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    items = load_corpus(args.gsm8k_dir)
    conversations = load_conversations()
    print(f"corpus: {len(items)} strings, {len(conversations)} conversations")
    failures = 0
    for spec in args.tokenizer_dir:
        name, sep, directory = spec.partition("=")
        if not sep or not name or not directory:
            parser.error(f"--tokenizer-dir wants NAME=DIR, got {spec!r}")
        try:
            record_tokenizer(name, directory, items, conversations, args.out)
        except Exception:
            failures += 1
            print(f"[{name}] FAILED:", file=sys.stderr)
            traceback.print_exc()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
