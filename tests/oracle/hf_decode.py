#!/usr/bin/env python3
"""hf_decode.py - what the Rust `tokenizers` library (the decode of
transformers' fast tokenizers and of vLLM's detokenizer) gives for id lists
that stress byte-fallback decoding: runs of byte tokens that are valid UTF-8,
truncated, invalid, valid and invalid together, split by special tokens that
skip_special_tokens removes.

    hf_decode.py cases TOKENIZER_JSON OUT.json   (here: the id lists, no deps)
    hf_decode.py answer TOKENIZER_JSON CASES.json OUT.json
                                      (the GPU machine: needs `tokenizers`)

The answer file holds, per case, decode(ids, skip_special_tokens=False) and
(..., True), with the library's version and the tokenizer file's sha256."""
import hashlib
import json
import random
import sys


def byte_ids(vocab):
    return {int(k[3:5], 16): i for k, i in vocab.items() if len(k) == 6 and k.startswith("<0x") and k.endswith(">")}


def make_cases(tj):
    t = json.load(open(tj, encoding="utf-8"))
    vocab = t["model"]["vocab"]
    b = byte_ids(vocab)
    special = [a["id"] for a in t["added_tokens"] if a["special"]]
    added = [a["id"] for a in t["added_tokens"] if not a["special"]][:32]
    words = [vocab[w] for w in ("▁the", "▁cat", "ing", "▁é", "▁", "é", "hello", "▁日本") if w in vocab]
    by = lambda bs: [b[x] for x in bs]
    fixed = [
        by(b"\xc3\xa9"),                      # é, valid
        by("日本".encode()),                   # two 3-byte characters
        by("😀".encode()),                    # 4 bytes
        by("😀".encode()[:3]),                # truncated at the end
        by(b"\xc3") + words[:1],               # truncated, then a word
        by(b"\xff"), by(b"\x80\x80"),          # never valid
        by(b"\xc3\xa9\xff"),                  # valid then invalid in one run
        by(b"\xff\xc3\xa9"),
        by(b"\xf4\x84\xd9") + words[1:2],      # a lead and a continuation, then a new lead
        by(b"\xed\xa0\x80"),                  # a surrogate
        by(b"\xe0\x80\xaf"),                  # overlong
        by(b"\xf4\x90\x80\x80"),              # above U+10FFFF
        by(b"\x00") + words[:1] + by(b"\x00"),  # NUL
        by(b"\xc3") + special[:1] + by(b"\xa9"),  # a special token inside a run
        by(b"\xe6\x97") + special[2:3] + by(b"\xa5") + words[2:3],
        special[:1] + by(b"\xc3\xa9") + special[1:2],
        words[:2] + by(b"\xc3") + added[:1] + by(b"\xa9"),
    ]
    rng = random.Random(20261202)
    pool_bytes = list(range(256))
    rand = []
    for _ in range(300):
        ids = []
        for _ in range(rng.randint(1, 24)):
            r = rng.random()
            if r < 0.55:
                ids.append(b[rng.choice(pool_bytes if rng.random() < 0.3 else list(range(0x80, 0x100)))])
            elif r < 0.7:
                ids.append(rng.choice(special))
            elif r < 0.8 and added:
                ids.append(rng.choice(added))
            else:
                ids.append(rng.randrange(len(vocab)))
        rand.append(ids)
    # real characters cut into byte tokens, with specials between some
    text = "naïve café 日本語 😀👍🏽 ∑x² — “quotes” €5"
    for cut in range(1, 8):
        ids = []
        for ch in text:
            bs = by(ch.encode())
            ids += bs
            if rng.random() < 0.15 * cut / 4:
                ids.append(rng.choice(special))
        rand.append(ids[: len(ids) - cut])
    return [c for c in fixed if c] + rand


def main():
    if sys.argv[1] == "cases":
        json.dump({"cases": make_cases(sys.argv[2])}, open(sys.argv[3], "w"))
        return
    from tokenizers import Tokenizer
    import tokenizers
    tj, cases, out = sys.argv[2:5]
    tok = Tokenizer.from_file(tj)
    res = []
    for ids in json.load(open(cases))["cases"]:
        res.append({"ids": ids, "text": tok.decode(ids, skip_special_tokens=False),
                    "text_skip": tok.decode(ids, skip_special_tokens=True)})
    json.dump({"tokenizers": tokenizers.__version__,
               "tokenizer_sha256": hashlib.sha256(open(tj, "rb").read()).hexdigest(),
               "cases": res}, open(out, "w", encoding="utf-8"), ensure_ascii=False, indent=0)


if __name__ == "__main__":
    main()
