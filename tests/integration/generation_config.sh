#!/bin/sh
# generation_config.sh - a model folder's generation_config.json sets the stop
# set as transformers' generate() uses it: `fgpack run` on a copy of the tiny
# fixture whose generation_config.json lists a token the greedy continuation
# produces stops there (it ran past it before); run --chat, serve (completions
# and chat, from a bundle made with pack --model, which carries the file) and
# the golden transcript use the same set; sampling keys are reported as not
# applied; a malformed file fails in one line.
. "$(dirname "$0")/../lib.sh"

M=$WORK/model
mkdir -p "$M"
cp "$TOP/tests/fixtures/oracle/bf16/config.json" "$TOP/tests/fixtures/oracle/bf16/model.safetensors" \
	"$TOP/tests/fixtures/oracle/bf16/tokenizer.json" "$M/"
P="The capital of France is"
C="hello there"
j() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# before: no generation_config.json, config.json's eos [1, 106]
check "run without generation_config.json" sh -c "'$FGPACK' run --model '$M' --prompt '$P' -n 24 -j 1 --json >'$WORK/base.json'"
check "run --chat without it" sh -c "'$FGPACK' run --model '$M' --chat '$C' -n 24 -j 1 --json >'$WORK/cbase.json'"
check_grep "before: runs to the length" '"stop":"length"' "$WORK/base.json"
check_grep "before: stop set is config.json's" '"eos_token_ids":\[1,106\]' "$WORK/base.json"
# a token the continuation produces (first seen at step >= 2), for each prompt
pick() { j "$1" "next(t for i, t in enumerate(d['generated_ids']) if i >= 2 and t not in d['generated_ids'][:i] and t not in (1, 106))"; }
T=$(pick "$WORK/base.json")
TC=$(pick "$WORK/cbase.json")
K=$(j "$WORK/base.json" "d['generated_ids'].index($T)")
echo "# stop tokens: $T (step $K of the plain prompt), $TC (chat)"
case "$T$TC" in *[!0-9]*|"") not_ok "pick stop tokens from the greedy continuations"; finish; exit 1 ;; esac

# google/gemma-4-E4B-it's generation_config.json, with the fixture's tokens added
cat >"$M/generation_config.json" <<EOF
{
  "bos_token_id": 2,
  "do_sample": true,
  "eos_token_id": [1, 106, $T, $TC],
  "pad_token_id": 0,
  "temperature": 1.0,
  "top_k": 64,
  "top_p": 0.95,
  "transformers_version": "5.5.0.dev0"
}
EOF
check "run with generation_config.json" sh -c "'$FGPACK' run --model '$M' --prompt '$P' -n 24 -j 1 --json >'$WORK/g.json' 2>'$WORK/g.err'"
check_grep "stops at eos" '"stop":"eos"' "$WORK/g.json"
check_grep "the stop set is generation_config.json's" "\"eos_token_ids\":\\[1,106,$T,$TC\\]" "$WORK/g.json"
check_grep "generation_config reported read" '"generation_config":true' "$WORK/g.json"
check "stopped at token $T (step $K): the baseline's first $((K + 1)) tokens, no more" python3 - "$WORK/base.json" "$WORK/g.json" "$K" <<'EOF'
import json, sys
b, g, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert len(b["generated_ids"]) == 24 and k < 23, b
assert g["generated_ids"] == b["generated_ids"][:k + 1], (g["generated_ids"], b["generated_ids"])
EOF
check_grep "sampling: a note, not a failure" 'fgpack run: note: generation_config.json: do_sample=true, temperature=1, top_k=64, top_p=0.95 not applied: the engine decodes greedily' "$WORK/g.err"
check "the note is one line" [ "$(grep -c 'generation_config' "$WORK/g.err")" = 1 ]
check "--ignore-eos: the baseline's 24 tokens" sh -c "'$FGPACK' run --model '$M' --prompt '$P' -n 24 -j 1 --json --ignore-eos >'$WORK/ig.json' 2>/dev/null &&
	python3 -c 'import json; a=json.load(open(\"$WORK/ig.json\")); b=json.load(open(\"$WORK/base.json\")); assert a[\"generated_ids\"]==b[\"generated_ids\"]'"
check "run --chat stops at $TC too" sh -c "'$FGPACK' run --model '$M' --chat '$C' -n 24 -j 1 --json >'$WORK/cg.json' 2>/dev/null &&
	python3 -c 'import json; a=json.load(open(\"$WORK/cg.json\")); b=json.load(open(\"$WORK/cbase.json\")); i=b[\"generated_ids\"].index($TC); assert a[\"stop\"]==\"eos\" and a[\"generated_ids\"]==b[\"generated_ids\"][:i+1], a'"

# the length keys: max_new_tokens is run's default -n; -n wins
sed 's/"top_p": 0.95,/"top_p": 0.95, "max_new_tokens": 2,/' "$M/generation_config.json" >"$WORK/gl.json"
mkdir -p "$WORK/ml" && cp "$M/config.json" "$M/model.safetensors" "$M/tokenizer.json" "$WORK/ml/" && cp "$WORK/gl.json" "$WORK/ml/generation_config.json"
check "max_new_tokens 2: run's default length" sh -c "'$FGPACK' run --model '$WORK/ml' --prompt '$P' -j 1 --json 2>/dev/null | grep -q '\"n_generated\":2,'"
check "-n 3 wins over max_new_tokens" sh -c "'$FGPACK' run --model '$WORK/ml' --prompt '$P' -n 3 -j 1 --json 2>/dev/null | grep -q '\"n_generated\":3,'"

# malformed: one line naming the file and the key
mkdir -p "$WORK/bad" && cp "$M/config.json" "$M/model.safetensors" "$WORK/bad/"
printf '{"eos_token_id": [1, "106"]}\n' >"$WORK/bad/generation_config.json"
check_exit "malformed eos_token_id: exit 1" 1 "$FGPACK" run --model "$WORK/bad" --ids 2,3 -n 2
cp "$WORK/.out" "$WORK/bad.out"
check "... one line naming the file and the key" sh -c "[ \$(wc -l <'$WORK/bad.out') = 1 ] && grep -q 'bad/generation_config.json: key eos_token_id' '$WORK/bad.out'"
printf '{"do_sample": 1}\n' >"$WORK/bad/generation_config.json"
check_exit "do_sample not a boolean: exit 1" 1 "$FGPACK" run --model "$WORK/bad" --ids 2,3 -n 2
check_grep "... named" 'generation_config.json: key do_sample is not a boolean' "$WORK/.out"

# pack --model: the file travels; the transcript records the stop set
check "pack --model DIR" sh -c "'$FGPACK' pack --model '$M' --prompts 2 --golden-tokens 8 -o '$WORK/b.fgb' >/dev/null 2>'$WORK/pack.err'"
check_grep "pack notes the sampling keys" 'fgpack pack: note: generation_config.json: do_sample=true' "$WORK/pack.err"
check "the bundle carries generation_config.json, byte for byte" sh -c "zstd -dc '$WORK/b.fgb' | tar xOf - components/model/generation_config.json | cmp - '$M/generation_config.json'"
check "the transcript records the stop set" sh -c "zstd -dc '$WORK/b.fgb' | tar xOf - golden/transcript.json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"eos_token_ids\"]==[1,106,$T,$TC]'"
check "verify: verified, stop set as recorded, sampling unhonoured" sh -c "'$FGPACK' verify '$WORK/b.fgb' --no-bench --json --summary - 2>'$WORK/v.err' | python3 -c '
import json,sys; d=json.load(sys.stdin)
assert d[\"verdict\"]==\"verified\", d
assert d[\"golden\"][\"eos_token_ids\"]==[1,106,$T,$TC] and d[\"golden\"][\"eos_token_ids_recorded\"]==\"same\", d[\"golden\"]
assert any(u[\"key\"]==\"generation_config.json\" and \"do_sample=true\" in u[\"value\"] for u in d[\"unhonoured\"]), d'"
check_grep "verify notes it on stderr" 'fgpack verify: note: generation_config.json: do_sample=true' "$WORK/v.err"

# serve the bundle: completions and chat stop where run does
PORT=$(free_port)
B=http://127.0.0.1:$PORT
"$FGPACK" serve "$WORK/b.fgb" --port "$PORT" 2>"$WORK/serve.err" &
SPID=$!
at_exit "kill $SPID 2>/dev/null"
i=0; while [ $i -lt 300 ] && ! grep -q listening "$WORK/serve.err"; do sleep 0.1; i=$((i + 1)); done
check "serve the bundle" wait_port "$PORT"
check_grep "serve notes the sampling keys" 'fgpack serve: note: generation_config.json: do_sample=true' "$WORK/serve.err"
curl -s "$B/v1/completions" -H 'Content-Type: application/json' \
	-d "{\"prompt\": \"$P\", \"max_tokens\": 24}" >"$WORK/sc.json"
check "completions: stops at $T as run does (finish_reason stop, the eos id counted as vLLM counts it)" python3 - "$WORK/sc.json" "$WORK/g.json" <<'EOF'
import json, sys
s, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
c = s["choices"][0]
assert c["finish_reason"] == "stop" and c["stop_reason"] is None, s
assert c["token_ids"] == r["generated_ids"], (c["token_ids"], r["generated_ids"])
assert s["usage"]["completion_tokens"] == len(r["generated_ids"]), s
EOF
curl -s "$B/v1/chat/completions" -H 'Content-Type: application/json' \
	-d "{\"messages\": [{\"role\": \"user\", \"content\": \"$C\"}], \"max_tokens\": 24}" >"$WORK/sch.json"
check "chat: stops at $TC as run --chat does" python3 - "$WORK/sch.json" "$WORK/cg.json" <<'EOF'
import json, sys
s, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
c = s["choices"][0]
assert c["finish_reason"] == "stop", s
assert c["message"]["content"] == r["text"], (c["message"]["content"], r["text"])
assert s["usage"]["completion_tokens"] == len(r["generated_ids"]), (s["usage"], r)
EOF
kill "$SPID" 2>/dev/null
finish
