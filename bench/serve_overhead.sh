#!/bin/sh
# serve_overhead.sh FGPACK MODEL [DEVICE] - what a served request costs beside
# its decode steps, in one run: `FGPACK serve --model MODEL --device DEVICE`
# (default cuda), 64 one-token warm-ups, then medians of 7 requests of 1, 2, 8,
# 32 and 128 new tokens (token ids, ignore_eos) after a 1-id and a 16-id
# prompt; the per-token time (1 -> 128 new tokens) and the fixed part of a
# request (prefill, HTTP, JSON); then `FGPACK run` on the same model and
# prompt for the engine's own decode rate (FG_RUN_N new tokens, default 128:
# 64 for the tiny fixtures, whose context holds 128).
set -u
if [ $# -lt 2 ]; then # `make bench` runs every script bare
	echo "serve_overhead.sh: needs FGPACK MODEL [DEVICE] (an E4B-shaped checkpoint on the GPU machine: docs/bench.md); skipped"
	exit 0
fi
F=$1 M=$2 D=${3:-cuda}
log=$(mktemp)
"$F" serve --model "$M" --device "$D" --port 18231 2>"$log" &
SP=$!
i=0; while [ $i -lt 600 ] && ! grep -q listening "$log"; do sleep 0.2; i=$((i + 1)); done
grep -q listening "$log" || { cat "$log"; kill $SP; exit 1; }
python3 - <<'P'
import json, statistics, time, urllib.request
def post(d):
    r = urllib.request.Request("http://127.0.0.1:18231/v1/completions", json.dumps(d).encode())
    return json.load(urllib.request.urlopen(r))
for _ in range(64):
    post({"prompt": [2], "max_tokens": 1})
def t(prompt, n, reps, **kw):
    v = []
    for _ in range(reps):
        t0 = time.perf_counter(); r = post(dict({"prompt": prompt, "max_tokens": n, "ignore_eos": True}, **kw)); v.append(time.perf_counter() - t0)
        assert r["usage"]["completion_tokens"] == n
    return statistics.median(v) * 1000, min(v) * 1000
p16 = [2] + [3 + (i * 37) % 250 for i in range(15)]
ctx = json.load(urllib.request.urlopen("http://127.0.0.1:18231/v1/models"))["data"][0].get("max_model_len", 4096)
top = min(128, ctx - len(p16))
for name, p in (("1-id prompt", [2]), ("16-id prompt", p16)):
    for n in (1, 2, 8, 32, top):
        med, mn = t(p, n, 7)
        print("%-13s max_tokens %3d: median %8.2f ms  min %8.2f ms" % (name, n, med, mn))
m1, _ = t(p16, 1, 9); mt, _ = t(p16, top, 5)
print("16-id prompt: per token %.3f ms (from 1 to %d new tokens), fixed %.2f ms a request" % ((mt - m1) / (top - 1), top, m1 - (mt - m1) / (top - 1)))
P
kill $SP
"$F" run --model "$M" --device "$D" --ids 2,3,40,77,114,151,188,225,12,49,86,123,160,197,234,21 -n "${FG_RUN_N:-128}" --ignore-eos --json 2>/dev/null |
	python3 -c "import json,sys; d=json.load(sys.stdin); print('fgpack run: decode %.1f tokens/s, prefill %.1f tokens/s, seconds %.3f' % (d['tokens_per_s'], d['prefill_tokens_per_s'], d['seconds']))"
