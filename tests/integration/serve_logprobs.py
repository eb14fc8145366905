#!/usr/bin/env python3
"""serve_logprobs.py BASE FIXDIR - a running fgpack serve of the tiny model
(FIXDIR: tests/fixtures/oracle/bf16, whose oracle.json and logits.bin hold
transformers' fp32 logits after every token of 4 prompts and their 32-token
greedy continuations) held to those logits: each generated token's
log-probability and the top 5 (/v1/completions, logprobs 5), the same values
streamed chunk by chunk, every prompt token's with echo and max_tokens 0 and
with vLLM's prompt_logprobs (log-probability, rank, top 3), and the form of a
chat's logprobs. Tolerance 5e-3, the engine's logit tolerance
(docs/engine.md). Used by serve_openai.sh, and on the GPU machine against
`serve --device cuda` (docs/gpu.md). Prints "lpcheck ok N M" (log-probabilities
and top-5 lists compared) or fails with an assertion."""
import json, math, struct, sys, urllib.request
base, fix = sys.argv[1:3]
orc = json.load(open(fix + "/oracle.json"))
raw = open(fix + "/logits.bin", "rb").read()
V, TOL = orc["vocab"], 5e-3
def post(path, d):
    return json.load(urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(d).encode())))
def logsoftmax(off, row):
    x = struct.unpack_from("<%df" % V, raw, 4 * (off + row * V))
    m = max(x)
    lse = m + math.log(sum(math.exp(v - m) for v in x))
    return [v - lse for v in x]
checked = tops = 0
for p in orc["prompts"]:
    prompt, gen, off = p["prompt"], p["generated"], p["logits_offset"]
    r = post("/v1/completions", {"prompt": prompt, "max_tokens": len(gen), "logprobs": 5, "ignore_eos": True})
    c = r["choices"][0]
    assert c["token_ids"] == gen, (c["token_ids"], gen)
    lp = c["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(gen), lp
    for t, tok in enumerate(gen):
        want = logsoftmax(off, len(prompt) - 1 + t)
        assert abs(lp["token_logprobs"][t] - want[tok]) < TOL, (t, lp["token_logprobs"][t], want[tok])
        top = list(lp["top_logprobs"][t].values())
        if len(top) == 5:  # no two of the 5 share a text
            best = sorted(want, reverse=True)[:5]
            assert all(abs(a - b) < TOL for a, b in zip(top, best)), (top, best)
            tops += 1
        checked += 1
    # streamed: the same values, chunk by chunk
    got = []
    req = urllib.request.Request(base + "/v1/completions", json.dumps(
        {"prompt": prompt, "max_tokens": len(gen), "logprobs": 5, "ignore_eos": True, "stream": True}).encode())
    for line in urllib.request.urlopen(req):
        line = line.decode().strip()
        if line.startswith("data: {"):
            got += json.loads(line[6:])["choices"][0]["logprobs"]["token_logprobs"]
    assert got == lp["token_logprobs"], (got, lp["token_logprobs"])
    # echo, nothing generated: the prompt and continuation scored
    seq = prompt + gen
    e = post("/v1/completions", {"prompt": seq, "max_tokens": 0, "echo": True, "logprobs": 0})["choices"][0]
    el = e["logprobs"]["token_logprobs"]
    assert e["token_ids"] == [] and len(el) == len(seq) and el[0] is None, e
    for i in range(1, len(seq)):
        want = logsoftmax(off, i - 1)[seq[i]]
        assert abs(el[i] - want) < TOL, (i, el[i], want)
        checked += 1
    # vLLM's prompt_logprobs: each prompt id's log-probability, rank and the
    # 3 most likely, keyed by id
    pl = post("/v1/completions", {"prompt": seq, "max_tokens": 1, "prompt_logprobs": 3})["choices"][0]["prompt_logprobs"]
    assert len(pl) == len(seq) and pl[0] is None, pl[:2]
    for i in range(1, len(seq)):
        want = logsoftmax(off, i - 1)
        got = pl[i][str(seq[i])]
        assert abs(got["logprob"] - want[seq[i]]) < TOL, (i, got, want[seq[i]])
        above = sum(w > want[seq[i]] + 2 * TOL for w in want)
        near = sum(abs(w - want[seq[i]]) <= 2 * TOL for w in want)
        assert above + 1 <= got["rank"] <= above + near, (i, got["rank"], above, near)
        best = sorted(want, reverse=True)[:3]
        others = [e["logprob"] for t, e in pl[i].items() if t != str(seq[i])]
        assert all(any(abs(o - b) < TOL for b in best) for o in others) and len(pl[i]) >= 3, (pl[i], best)
        checked += 1
assert checked > 400 and tops > 20, (checked, tops)
# chat: {content: [{token, logprob, bytes, top_logprobs}]} per generated token;
# prompt_logprobs at the top level, as vLLM
c = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                                  "logprobs": True, "top_logprobs": 3, "prompt_logprobs": 0})
assert c["prompt_logprobs"][0] is None and len(c["prompt_logprobs"]) == c["usage"]["prompt_tokens"], c
assert all(len(e) == 1 for e in c["prompt_logprobs"][1:]), c["prompt_logprobs"]
content = c["choices"][0]["logprobs"]["content"]
assert len(content) == c["usage"]["completion_tokens"], c
for e in content:
    assert bytes(e["bytes"]) == e["token"].encode() and len(e["top_logprobs"]) == 3, e
    assert e["top_logprobs"][0]["logprob"] >= e["top_logprobs"][1]["logprob"] >= e["top_logprobs"][2]["logprob"], e
    assert abs(e["logprob"] - e["top_logprobs"][0]["logprob"]) < 1e-6, e  # greedy: the most likely
print('lpcheck ok', checked, tops)
