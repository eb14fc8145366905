#!/bin/sh
# engine_run.sh - `fgpack run` on the tiny Gemma 4 fixtures: greedy tokens equal
# to transformers' (read from the oracle JSON with python3, independently of
# the engine), --json fields, -j1/-j2 identical output, --sliding-window, and
# the errors a user can cause.
. "$(dirname "$0")/../lib.sh"
FIX=tests/fixtures/oracle
PY=/usr/bin/python3

# expected greedy continuation of prompt number $2 in oracle file $1, comma-separated
expect() {
	$PY -c 'import json,sys; p=json.load(open(sys.argv[1]))["prompts"][int(sys.argv[2])]; print(",".join(map(str,p["prompt"]))+" "+",".join(map(str,p["generated"])))' "$1" "$2"
}

gen_ids() { # fgpack run args... -> generated ids, comma-separated
	"$FGPACK" run --json "$@" 2>/dev/null | $PY -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)["generated_ids"])))'
}

for v in bf16 int4; do
	for i in 0 1 2 3; do
		set -- $(expect $FIX/$v/oracle.json $i)
		got=$(gen_ids --model $FIX/$v --ids "$1" -n 32 --ignore-eos -j 2)
		if [ "$got" = "$2" ]; then ok "$v prompt $i: 32 greedy tokens equal transformers'"; else
			not_ok "$v prompt $i: got $got, expected $2"; fi
	done
done
set -- $(expect $FIX/bf16/oracle-window5.json 0)
got=$(gen_ids --model $FIX/bf16 --ids "$1" -n 32 --ignore-eos --sliding-window 5)
if [ "$got" = "$2" ]; then ok "--sliding-window 5 equals transformers with sliding_window=5"; else
	not_ok "--sliding-window 5: got $got, expected $2"; fi

"$FGPACK" run --model $FIX/int4 --ids 2,17,300,5 -n 12 --json -j 1 >"$WORK/j1" 2>"$WORK/e1"
"$FGPACK" run --model $FIX/int4 --ids 2,17,300,5 -n 12 --json -j 2 >"$WORK/j2" 2>"$WORK/e2"
check "--json is one JSON object with the promised fields" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["schema"] == 1 and len(d["generated_ids"]) <= 12 and d["prompt_ids"] == [2, 17, 300, 5]
assert d["tokens_per_s"] >= 0 and d["sliding_window"] == 8 and d["weight_format"] == "int4-g32"
assert d["threads"] == 1 and d["stop"] in ("eos", "length")
assert isinstance(d["load_seconds"], (int, float)) and 0 <= d["load_seconds"] < 600' "$WORK/j1"
check "-j1 and -j2 generate the same ids" $PY -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["generated_ids"] == b["generated_ids"] and b["threads"] == 2' "$WORK/j1" "$WORK/j2"
"$FGPACK" run --model $FIX/bf16 --ids 2 -n 4 --json --sliding-window 188 >"$WORK/w" 2>&1
check_grep "--json reports the window in use" '"sliding_window":188' "$WORK/w"

long=$($PY -c 'print(",".join(str(3 + i % 500) for i in range(129)))')
"$FGPACK" run --model $FIX/bf16 --ids "$long" -n 1 >"$WORK/long" 2>&1
check_exit "a prompt longer than the maximum fails (exit 1)" 1 "$FGPACK" run --model $FIX/bf16 --ids "$long" -n 1
check_grep "... and says why" "longer than the maximum sequence of 128" "$WORK/long"
check_exit "token id out of range fails" 1 "$FGPACK" run --model $FIX/bf16 --ids 2,512 -n 1
check_exit "missing --model is a usage error" 2 "$FGPACK" run --ids 2
check_exit "both --prompt and --ids is a usage error" 2 "$FGPACK" run --model $FIX/bf16 --ids 2 --prompt hi
check_exit "bad --ids is a usage error" 2 "$FGPACK" run --model $FIX/bf16 --ids 2,,3
check_exit "a folder without a model fails" 1 "$FGPACK" run --model "$WORK" --ids 2
# --prompt: the fixtures' tokenizer.json is tests/fixtures/tokenizer_tiny.json
# with extra pieces so its 512 ids cover the tiny model's vocabulary
"$FGPACK" run --model $FIX/int4 --prompt "hello world" -n 16 --ignore-eos --json >"$WORK/p" 2>&1
check "--prompt encodes with DIR/tokenizer.json (<bos> first) and --json has the text" $PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["prompt_ids"][0] == 2 and len(d["prompt_ids"]) > 2 and len(d["generated_ids"]) == 16
assert isinstance(d["text"], str) and len(d["text"]) > 0' "$WORK/p"
ids=$($PY -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$WORK/p")
a=$("$FGPACK" run --model $FIX/int4 --prompt "hello world" -n 16 --ignore-eos --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')
b=$("$FGPACK" run --model $FIX/int4 --ids "$ids" -n 16 --ignore-eos --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["generated_ids"])')
if [ "$a" = "$b" ]; then ok "--prompt and --ids of its encoding generate the same"; else not_ok "--prompt $a vs --ids $b"; fi
mkdir -p "$WORK/notok" && ln -s "$TOP/$FIX/bf16/config.json" "$TOP/$FIX/bf16/model.safetensors" "$WORK/notok/"
"$FGPACK" run --model "$WORK/notok" --prompt hi >"$WORK/nt" 2>&1 && not_ok "--prompt without tokenizer.json should fail" || ok "--prompt without tokenizer.json fails"
check_grep "... naming the missing tokenizer.json" "no tokenizer.json" "$WORK/nt"
# the INT4 fixture is `fgpack bake int4 --group 32` of the bf16 one; rebaking
# reproduces it, and numpy's own compressed-tensors quantizer agrees
mkdir -p "$WORK/src" && cp $FIX/bf16/config.json $FIX/bf16/model.safetensors $FIX/bf16/tokenizer.json "$WORK/src/"
"$FGPACK" bake int4 "$WORK/src" "$WORK/baked" --group 32 --no-sync >/dev/null 2>&1
check "fgpack bake int4 of the bf16 fixture reproduces the INT4 fixture byte for byte" cmp "$WORK/baked/model.safetensors" $FIX/int4/model.safetensors
check "numpy's compressed-tensors quantizer (tests/oracle) agrees with the bake, value for value" \
	$PY tests/oracle/tiny_gemma4.py --compare-int4 $FIX/bf16 "$WORK/baked" 32
check "run --help" "$FGPACK" run --help
finish
