#!/usr/bin/env python3
"""Trains the demo model's byte-level BPE tokenizer with the Hugging Face `tokenizers` library.

Pipeline: no normalizer; pre-tokenizer Sequence[Digits(individual_digits=True), ByteLevel(no prefix
space, GPT-2 regex)], so every digit is a token of its own; BPE model; TemplateProcessing that puts
<s> in front of a sequence; ByteLevel decoder. Special tokens, in id order: <s> </s> <pad>
<|im_start|> <|im_end|>. Writes tokenizer.json and tokenizer_config.json (with the chat template)
into --out, then loads the folder back through transformers' AutoTokenizer and checks that it
encodes, decodes and renders chats as intended.

usage: train_tokenizer.py --train DATA/train.jsonl --out MODEL_DIR [--vocab-size 4096]
       train_tokenizer.py --reuse OLD/tokenizer.json --out MODEL_DIR   (keeps the vocabulary, rewrites the config)
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_data as md  # noqa: E402


def corpus(train_path, limit):
    with open(train_path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= limit:
                break
            r = json.loads(line)
            yield f"Question: {r['question']}\nAnswer: {r['answer']}"
    for _ in range(50):
        for u, a in md.GREETINGS:
            yield "user\n" + u + "\nassistant\n" + a + "\n"
        for s in md.SYSTEM_PROMPTS:
            yield "system\n" + s + "\n"


def build(train_path, vocab_size, limit):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=md.SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(train_path, limit), trainer=trainer)
    bos_id = tok.token_to_id(md.BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{md.BOS} $A", pair=f"{md.BOS} $A {md.BOS} $B", special_tokens=[(md.BOS, bos_id)])
    for i, t in enumerate(md.SPECIAL_TOKENS):
        assert tok.token_to_id(t) == i, (t, tok.token_to_id(t))
    return tok


def tokenizer_config(tok):
    added = {}
    for i, t in enumerate(md.SPECIAL_TOKENS):
        added[str(i)] = {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                         "single_word": False, "special": True}
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": added,
        "bos_token": md.BOS,
        "chat_template": md.CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": md.EOS,
        "model_max_length": 2048,
        "pad_token": md.PAD,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def check_with_transformers(out, tok):
    """Loads the folder through transformers and compares with the raw tokenizer; returns a report."""
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(out)
    rep = {"hf_class": type(hf).__name__, "vocab": len(hf)}
    s = "Question: Tom has 13 apples and buys 4 more.\nAnswer: Tom has 13+4=<<13+4=17>>17 apples.\n#### 17"
    raw = tok.encode(s, add_special_tokens=False).ids
    ids = hf(s)["input_ids"]
    rep["hf_adds_one_bos"] = ids == [0] + raw
    rep["hf_ids_head"] = ids[:6]
    rep["roundtrip"] = hf.decode(ids, skip_special_tokens=True) == s
    rep["tokens_sample"] = tok.encode(s, add_special_tokens=False).tokens[:24]
    msgs = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "What is 2+3?"}]
    for gen in (True, False):
        text = hf.apply_chat_template(msgs, add_generation_prompt=gen, tokenize=False)
        rep[f"chat_template_matches_python_gen{int(gen)}"] = text == md.render_chat(msgs, gen)
    text = hf.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    rep["chat_render"] = text
    chat_ids = hf(text, add_special_tokens=False)["input_ids"]
    rep["chat_ids_start_with_one_bos"] = chat_ids[0] == 0 and chat_ids[1] != 0
    tmsgs = [{"role": "user", "content": "What is 12 + 5?"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"type": "function", "function": {"name": "add", "arguments": {"a": 12, "b": 5}}}]},
             {"role": "tool", "content": "17"}]
    text = hf.apply_chat_template(tmsgs, tools=md.TOOLS, add_generation_prompt=True, tokenize=False)
    rep["tool_template_matches_python"] = text == md.render_chat(tmsgs, True, tools=md.TOOLS)
    rep["tool_render_tokens"] = len(hf(text, add_special_tokens=False)["input_ids"])
    rep["special_ids"] = {t: hf.convert_tokens_to_ids(t) for t in md.SPECIAL_TOKENS}
    return rep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train")
    ap.add_argument("--reuse", help="an existing tokenizer.json to keep instead of training a new one")
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--limit", type=int, default=100000, help="train problems used for the merges")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = Tokenizer.from_file(args.reuse) if args.reuse else build(args.train, args.vocab_size, args.limit)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(tok), f, indent=2, ensure_ascii=False)
        f.write("\n")
    print(json.dumps({"vocab_size": tok.get_vocab_size()}))
    try:
        rep = check_with_transformers(args.out, tok)
        print(json.dumps(rep, ensure_ascii=False, indent=1))
        bad = [k for k, v in rep.items() if v is False]
        if bad:
            print("TOKENIZER CHECK FAILED:", bad)
    except Exception as e:  # report, never lose the tokenizer over a check
        import traceback
        traceback.print_exc()
        print("TOKENIZER CHECK ERROR:", repr(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
