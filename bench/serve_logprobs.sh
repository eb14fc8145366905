#!/bin/sh
# serve_logprobs.sh FGPACK MODEL [DEVICE] - what log-probabilities cost a
# served answer, side by side in one run: `FGPACK serve --model MODEL
# --device DEVICE` (default cuda), 64 one-token warm-up requests, then rounds
# that alternate a 128-token greedy completion (token ids, ignore_eos) with
# none, with `logprobs: 0` and with `logprobs: 5` (fewer tokens where the
# model's context is short); prints the median tokens/s
# of each and the ratios. Then prompt scoring, the perplexity request: a
# prompt of up to 512 ids with `echo`, `logprobs: 0` and `max_tokens: 0`,
# and the same with vLLM's `prompt_logprobs: 5`: median prompt tokens/s.
# FG_BENCH_ROUNDS (default 5) rounds.
set -u
if [ $# -lt 2 ]; then # `make bench` runs every script bare
	echo "serve_logprobs.sh: needs FGPACK MODEL [DEVICE] (an E4B-shaped checkpoint on the GPU machine: docs/bench.md); skipped"
	exit 0
fi
F=$1 M=$2 D=${3:-cuda}
R=${FG_BENCH_ROUNDS:-5}
log=$(mktemp)
"$F" serve --model "$M" --device "$D" --port 18230 2>"$log" &
SP=$!
i=0; while [ $i -lt 600 ] && ! grep -q listening "$log"; do sleep 0.2; i=$((i + 1)); done
grep -q listening "$log" || { cat "$log"; kill $SP; exit 1; }
python3 - "$R" <<'P'
import json, statistics, sys, time, urllib.request
rounds = int(sys.argv[1])
def post(d):
    r = urllib.request.Request("http://127.0.0.1:18230/v1/completions", json.dumps(d).encode())
    return json.load(urllib.request.urlopen(r))
for _ in range(64):
    post({"prompt": [2], "max_tokens": 1})
prompt = [2] + [3 + (i * 37) % 250 for i in range(15)]
m = json.load(urllib.request.urlopen("http://127.0.0.1:18230/v1/models"))["data"][0]
new = min(128, m.get("max_model_len", 4096) - len(prompt))
kinds = {"none": {}, "logprobs 0": {"logprobs": 0}, "logprobs 5": {"logprobs": 5}}
tps = {k: [] for k in kinds}
for _ in range(rounds):
    for k, extra in kinds.items():
        t0 = time.perf_counter()
        r = post(dict({"prompt": prompt, "max_tokens": new, "ignore_eos": True}, **extra))
        dt = time.perf_counter() - t0
        assert r["usage"]["completion_tokens"] == new, r["usage"]
        tps[k].append(new / dt)
med = {k: statistics.median(v) for k, v in tps.items()}
for k in kinds:
    print("%-11s %8.1f tokens/s (median of %d; runs %s)" % (k, med[k], rounds, ", ".join("%.1f" % x for x in tps[k])))
print("%d new tokens a request" % new)
print("ratio none / logprobs 0: %.2fx, none / logprobs 5: %.2fx" % (med["none"] / med["logprobs 0"], med["none"] / med["logprobs 5"]))
long = [2] + [3 + (i * 37) % 250 for i in range(min(512, m.get("max_model_len", 4096) - 1) - 1)]
score = {"echo lp 0": {"echo": True, "logprobs": 0}, "prompt_lp 5": {"echo": True, "prompt_logprobs": 5}}
sps = {k: [] for k in score}
for _ in range(rounds):
    for k, extra in score.items():
        t0 = time.perf_counter()
        r = post(dict({"prompt": long, "max_tokens": 0}, **extra))
        dt = time.perf_counter() - t0
        assert r["usage"]["prompt_tokens"] == len(long), r["usage"]
        sps[k].append(len(long) / dt)
for k in score:
    print("score %-11s %8.1f prompt tokens/s (median of %d; %d ids; runs %s)" % (k, statistics.median(sps[k]), rounds, len(long), ", ".join("%.1f" % x for x in sps[k])))
P
kill $SP
