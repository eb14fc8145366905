#!/usr/bin/env python3
"""hf_split.py - what the Rust `tokenizers` library (the tokenizer of
transformers' fast tokenizers and of vLLM) gives for the parts of the
pipeline where the JavaScript reference of the tokenizer tests
(@lenml/tokenizers 3.7.2) is not that library: the Split pre-tokenizer's
behaviours (the reference implements Isolated alone, and its Removed keeps
the delimiter: it splits on the pattern wrapped in a capture group) and a
Prepend normalizer meeting a section a Replace emptied (the library leaves an
empty section empty, the reference prepends). Over variants of
tests/fixtures/tokenizer_tiny.json.

    hf_split.py answer TINY_JSON OUT.json        (the GPU machine: `tokenizers`)
    hf_split.py check TINY_JSON FIXTURE FGPACK [GEMMA_TOKENIZE_JS]
                                                 (here: ours against the answers;
                                                 with the driver, also counts where
                                                 the JavaScript reference differs)

The answer file holds the library's version, the tiny file's sha256 and, per
variant, each text with its ids (add_special_tokens=False)."""
import copy
import hashlib
import json
import os
import subprocess
import sys
import tempfile

BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
# "▁" and "▁▁" as the normalizer writes spaces, "l" inside the merges of
# "hello", ">" before the merge ">▁", " " that the normalizer leaves none of
PATTERNS = ["\u2581", "\u2581\u2581", "l", ">", " "]
TEXTS = ["a>\u2581b", "x> y", "> > >", "a>  b", ">\u2581\u2581x", "hello> world", " >a", ">", "\u2581>\u2581",
         "ab>  >c", "> ll >", "a > > b", "hel>lo", "l>l>\u2581l"]
# for the Prepend after a Replace of "x" by nothing: sections that become
# empty, alone and between added tokens and newlines
PREPEND_TEXTS = ["x", "o\nx", "x<bos>", "x<b>c\u0085", "x<bos>x", "x<bos>\u3000\u00e9all", "<bos>bll\u00e9x\nx",
                 "x\n\n   \nc  a\t\u180e\u00e9", "<b><bos>ca\u200bc\u200b\nx<b>",
                 " <b> \ufeff<bos>x<bos>\u3000c\u3000", "\u2581x", "x\ufeff", "hx", "xe"]


def variants(tiny):
    out = {}
    for b in BEHAVIORS:
        for k, p in enumerate(PATTERNS):
            t = copy.deepcopy(tiny)
            t["pre_tokenizer"] = {"type": "Split", "pattern": {"String": p}, "behavior": b, "invert": False}
            out["%s-%d" % (b, k)] = t
    t = copy.deepcopy(tiny)
    t["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"String": "x"}, "content": ""},
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    out["prepend-after-empty"] = t
    return out


def texts_of(name):
    return PREPEND_TEXTS if name.startswith("prepend") else TEXTS


def answer(tj, out):
    import tokenizers
    from tokenizers import Tokenizer
    res = {}
    for name, t in variants(json.load(open(tj, encoding="utf-8"))).items():
        tok = Tokenizer.from_str(json.dumps(t))
        res[name] = [[x, tok.encode(x, add_special_tokens=False).ids] for x in texts_of(name)]
    json.dump({"tokenizers": tokenizers.__version__,
               "tokenizer_sha256": hashlib.sha256(open(tj, "rb").read()).hexdigest(),
               "cases": res}, open(out, "w", encoding="utf-8"), ensure_ascii=False, indent=0)


def check(tj, fixture, fgpack, js=None):
    fx = json.load(open(fixture, encoding="utf-8"))
    if fx["tokenizer_sha256"] != hashlib.sha256(open(tj, "rb").read()).hexdigest():
        print("the fixture was answered for another %s" % tj)
        return 1
    bad = js_bad = n = 0
    vs = variants(json.load(open(tj, encoding="utf-8")))
    if sorted(vs) != sorted(fx["cases"]):
        print("the fixture's variants are not this script's")
        return 1
    with tempfile.TemporaryDirectory() as d:
        for name, t in vs.items():
            texts = [x for x, _ in fx["cases"][name]]
            if texts != texts_of(name):
                print("%s: the fixture's texts are not this script's" % name)
                return 1
            hexes = "".join(x.encode().hex() + "\n" for x in texts)
            with open(os.path.join(d, "texts.hex"), "w") as f:
                f.write(hexes)
            with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
                json.dump(t, f, ensure_ascii=False)
            got = subprocess.run([fgpack, "tokenize", "--tokenizer", os.path.join(d, "tokenizer.json"), "--lines",
                                  "--hex"], input=hexes.encode(), capture_output=True, check=True).stdout.decode()
            got = got.split("\n")[:-1]
            want = [json.dumps(ids, separators=(",", ":")) for _, ids in fx["cases"][name]]
            n += len(want)
            if len(got) != len(want):
                bad += 1
                print("%s: %d answers, %d of ours" % (name, len(want), len(got)))
            for x, a, b in zip(texts, got, want):
                if a != b:
                    bad += 1
                    print("%s %r: ours %s, tokenizers %s" % (name, x, a, b))
            if js:
                with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                    f.write("{}")
                ref = subprocess.run(["node", js, "--dir=" + d, "--lines", "--hex", os.path.join(d, "texts.hex")],
                                     capture_output=True, check=True).stdout.decode().split("\n")[:-1]
                js_bad += sum(a != b for a, b in zip(ref, want))
    print("%d texts over %d variants as tokenizers %s gives them: %d differ%s" % (
        n, len(vs), fx["tokenizers"], bad, "; the JavaScript reference differs on %d" % js_bad if js else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "answer":
        answer(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (5, 6) and sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
