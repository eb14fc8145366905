#!/bin/sh
# serve_logprobs_gpu.sh ENGINE MODEL - on the GPU machine: `ENGINE serve
# --model MODEL --device cuda` held to transformers' logits by
# tests/integration/serve_logprobs.py, then the same requests to a CPU server
# beside it (tokens equal; the largest log-probability differences printed).
# MODEL: the tiny bf16 fixture with a tokenizer padded to its 512 ids, as
# serve_openai.sh makes it. Output under $OUT (or ./out).
set -u
E=$1 M=$2 O=${OUT:-out}
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$O"
start() { # port device
	"$E" serve --model "$M" --device "$2" --port "$1" 2>"$O/serve-$2.err" &
	i=0; while [ $i -lt 150 ] && ! grep -q listening "$O/serve-$2.err"; do sleep 0.2; i=$((i + 1)); done
}
start 18200 cuda; GP=$!
start 18201 cpu; CP=$!
head -3 "$O/serve-cuda.err"
python3 "$top/tests/integration/serve_logprobs.py" http://127.0.0.1:18200 "$top/tests/fixtures/oracle/bf16"
echo "serve_logprobs.py against the GPU: exit $?"
python3 - <<'P'
import json, urllib.request
def post(port, d):
    return json.load(urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, json.dumps(d).encode())))
d = {"prompt": [2, 17, 33, 90, 120, 7], "max_tokens": 24, "logprobs": 5, "ignore_eos": True}
g, c = post(18200, d)["choices"][0], post(18201, d)["choices"][0]
print("tokens equal", g["token_ids"] == c["token_ids"])
print("max |lp gpu - lp cpu|", max(abs(a - b) for a, b in zip(g["logprobs"]["token_logprobs"], c["logprobs"]["token_logprobs"])))
e = {"prompt": list(range(2, 120)), "max_tokens": 0, "echo": True, "logprobs": 0}
g, c = post(18200, e)["choices"][0], post(18201, e)["choices"][0]
print("echo max |lp gpu - lp cpu|", max(abs(a - b) for a, b in zip(g["logprobs"]["token_logprobs"][1:], c["logprobs"]["token_logprobs"][1:])))
P
kill $GP $CP
