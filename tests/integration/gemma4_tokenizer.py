#!/usr/bin/env python3
"""gemma4_tokenizer.py - writes a Gemma 4 kind of tokenizer for tests, made
from a Gemma 3 kind one (no Gemma 4 tokenizer.json is available offline).

    gemma4_tokenizer.py SRC_TOKENIZER_JSON OUT_DIR [--pad N]

Gemma 4 keeps Gemma 3's vocabulary; its chat-turn tokens have Gemma 3's ids
with new names: <start_of_turn> becomes <|turn> and <end_of_turn> becomes
<turn|> (ids 105/106 in the real files). Where the source holds the spare
placeholders <unusedN> at ids 98, 100 and 101, they become Gemma 4's <|think|>,
<|channel>, <channel|> (their ids in Gemma 4), special as the turn tokens are.
A tokenizer_config.json beside the source is copied with the same renames
(eos_token <eos>, its Gemma 3 chat_template dropped). --pad N adds plain
vocabulary pieces up to N ids (the tiny test model has 512). Writes
OUT_DIR/tokenizer.json and, when there is a config, OUT_DIR/tokenizer_config.json.
"""
import json
import os
import re
import sys


def main():
    args = sys.argv[1:]
    pad = 0
    if "--pad" in args:
        i = args.index("--pad")
        pad = int(args[i + 1])
        del args[i:i + 2]
    src, out = args
    t = json.load(open(src, encoding="utf-8"))
    vocab = t["model"]["vocab"]
    added = {a["id"]: a for a in t["added_tokens"]}
    rename = {}
    for old, new in (("<start_of_turn>", "<|turn>"), ("<end_of_turn>", "<turn|>")):
        ids = [i for i, a in added.items() if a["content"] == old]
        assert len(ids) == 1, "%s: no added token %s" % (src, old)
        rename[ids[0]] = new
    for i, new in ((98, "<|think|>"), (100, "<|channel>"), (101, "<channel|>")):
        if i in added and re.fullmatch(r"<unused\d+>", added[i]["content"]):
            rename[i] = new
    for i, new in rename.items():
        old = added[i]["content"]
        assert new not in vocab, "%s already holds %s" % (src, new)
        added[i]["content"] = new
        added[i]["special"] = True
        if vocab.get(old) == i:
            del vocab[old]
            vocab[new] = i
    top = max(vocab.values())
    for i in range(top + 1, pad):
        vocab["\u2581w%d" % i] = i
    os.makedirs(out, exist_ok=True)
    json.dump(t, open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8"), ensure_ascii=False)
    cfg_path = os.path.join(os.path.dirname(src), "tokenizer_config.json")
    if os.path.exists(cfg_path):
        c = json.load(open(cfg_path, encoding="utf-8"))
        for k, a in c.get("added_tokens_decoder", {}).items():
            if int(k) in rename:
                a["content"] = rename[int(k)]
                a["special"] = True
        c["eos_token"] = "<eos>"
        c["sot_token"], c["eot_token"] = "<|turn>", "<turn|>"
        c.pop("chat_template", None)
        json.dump(c, open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8"), ensure_ascii=False)
    print(" ".join("%d=%s" % (i, rename[i]) for i in sorted(rename)))


if __name__ == "__main__":
    main()
