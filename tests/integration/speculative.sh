#!/bin/sh
# speculative.sh - speculative decoding with a Gemma 4 assistant drafter
# (docs/engine.md "Speculative decoding"): `fgpack run --drafter` gives plain
# greedy's tokens for every drafter (made by transformers, with and without
# the centroid-masked head) and draft count, and counts rounds, drafts and
# acceptances consistently; a bundle packed with --drafter records it, verify
# replays its golden transcript at level logits with it, serve drafts with it
# and answers what run answers; bad drafters and options fail in one line.
. "$(dirname "$0")/../lib.sh"

T=$TOP/tests/fixtures/oracle/bf16
AS=$TOP/tests/fixtures/oracle/assistant
IDS=2,17,99,5,300,41,8,8,256,3
j() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

check "run without a drafter" sh -c "'$FGPACK' run --model '$T' --ids $IDS -n 40 -j 1 --ignore-eos --json >'$WORK/base.json'"
n=0
for A in "$AS"/*/; do
	[ -f "$A/config.json" ] || continue
	v=$(basename "$A")
	n=$((n + 1))
	for K in 1 4 16; do
		check "$v, K=$K: plain greedy's 40 tokens" sh -c "'$FGPACK' run --model '$T' --drafter '$A' --draft-tokens $K --ids $IDS -n 40 -j 1 --ignore-eos --json >'$WORK/$v-$K.json' 2>'$WORK/$v-$K.err' &&
			python3 - '$WORK/base.json' '$WORK/$v-$K.json' $K" <<'EOF'
import json, sys
b, s, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert s["generated_ids"] == b["generated_ids"], (s["generated_ids"], b["generated_ids"])
sp = s["speculative"]
assert sp["draft_tokens"] == k and sp["plain_steps"] == 0, sp  # the CPU path always drafts
# 40 tokens, 39 passes of the model after the prompt's: a round starts at
# most once per pass (the last token needs no pass), at least once
assert 1 <= sp["rounds"] <= 39, sp
assert sp["rounds"] <= sp["drafted"] <= k * sp["rounds"], sp
assert 0 <= sp["accepted"] <= sp["drafted"], sp
at = sp["accepted_at"]
assert len(at) == k and all(0 <= a <= 1 for a in at), at
assert all(at[i] >= at[i + 1] for i in range(k - 1)), at  # draft j+1 is kept only after draft j
assert abs(sp["tokens_per_pass"] - (1 + sp["accepted"] / sp["rounds"])) < 1e-3, sp
EOF
	done
	check "$v: without --json" sh -c "'$FGPACK' run --model '$T' --drafter '$A' --ids $IDS -n 40 -j 1 --ignore-eos >'$WORK/t.out' 2>'$WORK/t.err'"
	check_grep "$v: the stderr line counts the rounds" "drafter .*: [0-9]+ rounds of up to 4 drafts, [0-9]+ of [0-9]+ drafts accepted \\([0-9.]+ tokens per pass\\)" "$WORK/t.err"
	check "$v: -n 1 (no round)" sh -c "'$FGPACK' run --model '$T' --drafter '$A' --ids $IDS -n 1 -j 1 --ignore-eos --json >'$WORK/one.json' &&
		python3 -c 'import json; d=json.load(open(\"$WORK/one.json\")); b=json.load(open(\"$WORK/base.json\")); assert d[\"generated_ids\"]==b[\"generated_ids\"][:1] and d[\"speculative\"][\"rounds\"]==0, d'"
	check "$v: a prompt past the sliding window (8), 3 threads" sh -c "'$FGPACK' run --model '$T' --ids $IDS,$IDS -n 24 -j 3 --ignore-eos --json >'$WORK/lb.json' &&
		'$FGPACK' run --model '$T' --drafter '$A' --ids $IDS,$IDS -n 24 -j 3 --ignore-eos --json >'$WORK/ls.json' &&
		python3 -c 'import json; a=json.load(open(\"$WORK/lb.json\")); b=json.load(open(\"$WORK/ls.json\")); assert a[\"generated_ids\"]==b[\"generated_ids\"]'"
	check "$v: --sliding-window 5 as well" sh -c "'$FGPACK' run --model '$T' --ids $IDS,$IDS -n 24 --sliding-window 5 --ignore-eos --json >'$WORK/wb.json' &&
		'$FGPACK' run --model '$T' --drafter '$A' --ids $IDS,$IDS -n 24 --sliding-window 5 --ignore-eos --json >'$WORK/ws.json' &&
		python3 -c 'import json; a=json.load(open(\"$WORK/wb.json\")); b=json.load(open(\"$WORK/ws.json\")); assert a[\"generated_ids\"]==b[\"generated_ids\"]'"
	FIRST=${FIRST:-$A}
done
check "the assistant fixtures are there" [ "$n" -ge 2 ]

# one-line errors, nothing run
check_exit "--draft-tokens without --drafter: usage" 2 "$FGPACK" run --model "$T" --ids 2 --draft-tokens 3
check_exit "--draft-tokens 0: usage" 2 "$FGPACK" run --model "$T" --ids 2 --drafter "$FIRST" --draft-tokens 0
check_exit "--draft-tokens 17: usage" 2 "$FGPACK" run --model "$T" --ids 2 --drafter "$FIRST" --draft-tokens 17
check_exit "the model itself as a drafter: exit 1" 1 "$FGPACK" run --model "$T" --ids 2 --drafter "$T"
check_grep "  ... saying it is not an assistant" "not a Gemma 4 assistant drafter" "$WORK/.out"
check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]
check_exit "a missing drafter folder: exit 1" 1 "$FGPACK" run --model "$T" --ids 2 --drafter "$WORK/nowhere"
check_exit "the assistant as the model: exit 1" 1 "$FGPACK" run --model "$FIRST" --ids 2
check_grep "  ... saying what it is" "gemma4_assistant" "$WORK/.out"
# a drafter made for another model: the backbone width differs
mkdir -p "$WORK/wide"
cp "$FIRST"/model.safetensors "$WORK/wide/"
python3 - "$FIRST/config.json" "$WORK/wide/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["backbone_hidden_size"] = c["backbone_hidden_size"] * 2
json.dump(c, open(sys.argv[2], "w"))
EOF
check_exit "a drafter for another backbone width: exit 1" 1 "$FGPACK" run --model "$T" --ids 2 --drafter "$WORK/wide"
check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]

# a bundle that carries the drafter
check "pack --model --drafter" sh -c "'$FGPACK' pack --model '$T' --drafter '$FIRST' -o '$WORK/s.fgb' >/dev/null"
check "bundle.json names the drafter" sh -c "zstd -dc '$WORK/s.fgb' | tar -xO bundle.json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"drafter\"]==\"components/drafter\", d'"
check_exit "verify with the drafter: exit 0" 0 "$FGPACK" verify "$WORK/s.fgb" --max-new 24 --warmup 2 --summary "$WORK/s.json"
check_grep "  ... the golden transcript at level logits" '"level": "logits"' "$WORK/s.json"
check_grep "  ... its speed pass drafted" '"draft_tokens": 4' "$WORK/s.json"
check "pack --model alone: no drafter in bundle.json" sh -c "'$FGPACK' pack --model '$T' -o '$WORK/p.fgb' >/dev/null &&
	zstd -dc '$WORK/p.fgb' | tar -xO bundle.json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert \"drafter\" not in d, d'"

# serve from the bundle: it drafts, and answers run's tokens
P=$(free_port)
"$FGPACK" serve "$WORK/s.fgb" --port "$P" 2>"$WORK/serve.err" &
SP=$!
at_exit "kill $SP 2>/dev/null"
check "serve the bundle" wait_port "$P"
check_grep "serve says it drafts" "speculative decoding with .*components/drafter, 4 drafts per round" "$WORK/serve.err"
check "completions: run's tokens" sh -c "curl -sf http://127.0.0.1:$P/v1/completions -H 'content-type: application/json' \
	-d '{\"prompt\": [$IDS], \"max_tokens\": 40}' >'$WORK/c.json' &&
	python3 - '$WORK/c.json' '$WORK/base.json'" <<'EOF'
import json, sys
c, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
ids = c["choices"][0]["token_ids"]
# serve stops at an eos id, run --ignore-eos does not: a prefix of run's
assert 1 <= len(ids) <= 40 and ids == b["generated_ids"][:len(ids)], (ids, b["generated_ids"])
assert len(ids) == 40 or ids[-1] in (1, 106), ids
EOF
kill "$SP" 2>/dev/null
finish
