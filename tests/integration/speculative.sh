#!/bin/sh
# speculative.sh - speculative decoding with a Gemma 4 assistant drafter
# (docs/engine.md "Speculative decoding"): `fgpack run --drafter` gives plain
# greedy's tokens for every drafter (made by transformers, with and without
# the centroid-masked head) and draft count, and counts rounds, drafts and
# acceptances consistently; a bundle packed with --drafter records it, verify
# replays its golden transcript at level logits with it, serve drafts with it
# and answers what run answers; bad drafters and options fail in one line.
# The drafter's centroid top-k override (--centroid-top-k, the challenge's
# CENTROID_TOP_K): plain greedy's tokens whatever k, --json reports the k in
# effect, bad values fail in one line; pack honours CENTROID_TOP_K with an
# ordered assistant, and verify and serve apply the bundle's.
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

# the centroid top-k override: the ordered assistant has 32 centroids, top 4
ORD=$AS/ordered
for K in 1 7 32; do
	check "--centroid-top-k $K: plain greedy's 40 tokens, --json reports $K" sh -c "'$FGPACK' run --model '$T' --drafter '$ORD' --centroid-top-k $K --ids $IDS -n 40 -j 1 --ignore-eos --json >'$WORK/tk-$K.json' &&
		python3 - '$WORK/base.json' '$WORK/tk-$K.json' $K" <<'EOF'
import json, sys
b, s, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert s["generated_ids"] == b["generated_ids"], (s["generated_ids"], b["generated_ids"])
sp = s["speculative"]
assert sp["centroid_top_k"] == k and sp["draft_tokens"] == 4 and sp["rounds"] >= 1, sp
EOF
done
check "without --centroid-top-k: the config's top 4 in --json" python3 -c "import json; assert json.load(open('$WORK/ordered-4.json'))['speculative']['centroid_top_k'] == 4"
check "a drafter without centroids: centroid_top_k null in --json" python3 -c "import json; assert json.load(open('$WORK/plain-4.json'))['speculative']['centroid_top_k'] is None"
check "--centroid-top-k 2 with --sliding-window 5, 3 threads: plain greedy's tokens" sh -c "'$FGPACK' run --model '$T' --drafter '$ORD' --centroid-top-k 2 --ids $IDS,$IDS -n 24 --sliding-window 5 -j 3 --ignore-eos --json >'$WORK/tkw.json' &&
	python3 -c 'import json; a=json.load(open(\"$WORK/wb.json\")); b=json.load(open(\"$WORK/tkw.json\")); assert a[\"generated_ids\"]==b[\"generated_ids\"]'"
check_exit "--centroid-top-k without --drafter: usage" 2 "$FGPACK" run --model "$T" --ids 2 --centroid-top-k 3
check_grep "  ... saying it needs --drafter" "centroid-top-k applies with --drafter only" "$WORK/.out"
for V in 0 65 -1 x; do
	check_exit "--centroid-top-k $V: usage" 2 "$FGPACK" run --model "$T" --ids 2 --drafter "$ORD" --centroid-top-k "$V"
	check_grep "  ... naming the range" "centroid-top-k wants 1\.\.64, not $V" "$WORK/.out"
	check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]
done
check_exit "--centroid-top-k 33, beyond the drafter's 32 centroids: exit 1" 1 "$FGPACK" run --model "$T" --ids 2 --drafter "$ORD" --centroid-top-k 33
check_grep "  ... naming the value and the bound" "centroid top-k 33 is out of the range 1\.\.32 \(num_centroids 32" "$WORK/.out"
check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]
check_exit "--centroid-top-k for a drafter without centroids: exit 1" 1 "$FGPACK" run --model "$T" --ids 2 --drafter "$AS/plain" --centroid-top-k 3
check_grep "  ... saying it has no centroid head" "centroid top-k 3 given, but the drafter has no centroid head" "$WORK/.out"
check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]

# a bundle that carries the drafter
check "pack --model --drafter" sh -c "'$FGPACK' pack --model '$T' --drafter '$FIRST' -o '$WORK/s.fgb' >/dev/null"
check "bundle.json names the drafter" sh -c "zstd -dc '$WORK/s.fgb' | tar -xO bundle.json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"drafter\"]==\"components/drafter\", d'"
check_exit "verify with the drafter: exit 0" 0 "$FGPACK" verify "$WORK/s.fgb" --max-new 24 --warmup 2 --summary "$WORK/s.json"
check_grep "  ... the golden transcript at level logits" '"level": "logits"' "$WORK/s.json"
check_grep "  ... its speed pass drafted" '"draft_tokens": 4' "$WORK/s.json"
check "pack --model alone: no drafter in bundle.json" sh -c "'$FGPACK' pack --model '$T' -o '$WORK/p.fgb' >/dev/null &&
	zstd -dc '$WORK/p.fgb' | tar -xO bundle.json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert \"drafter\" not in d, d'"

# serve_bg ERR ARGS...: `fgpack serve ARGS --port P` in the background,
# stderr into ERR; sets P and SP (killed at exit)
serve_bg() {
	err=$1
	shift
	P=$(free_port)
	"$FGPACK" serve "$@" --port "$P" 2>"$err" &
	SP=$!
	at_exit "kill $SP 2>/dev/null"
}

# serve from the bundle: it drafts, and answers run's tokens
serve_bg "$WORK/serve.err" "$WORK/s.fgb"
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
wait "$SP" 2>/dev/null

# a manifest's CENTROID_TOP_K: honoured with the ordered assistant, applied
# by verify and serve
mkdir -p "$WORK/man"
cat >"$WORK/man/manifest.json" <<'EOF'
{"name": "topk", "model_id": "google/gemma-4-E4B-it", "serve": ["python", "serve.py"],
 "env": {"CENTROID_TOP_K": "7",
         "SPECULATIVE_CONFIG": "{\"method\":\"mtp\",\"model\":\"/tmp/d\",\"num_speculative_tokens\":3}"}}
EOF
settings() { zstd -dc "$1" | tar -xO bundle.json | python3 -c "import json,sys; s=json.load(sys.stdin)['settings']; u={x['key']: x['why'] for x in s['unhonoured']}; $2"; }
check "pack MANIFEST --model --drafter ordered, CENTROID_TOP_K 7" sh -c "'$FGPACK' pack '$WORK/man/manifest.json' --model '$T' --drafter '$ORD' -o '$WORK/k.fgb' >/dev/null"
check "  ... settings list CENTROID_TOP_K under honoured, centroid_top_k 7" settings "$WORK/k.fgb" \
	"assert s['centroid_top_k'] == 7 and 'CENTROID_TOP_K' in s['honoured'] and 'SPECULATIVE_CONFIG' in s['honoured'] and not u, s"
check_exit "verify applies it: exit 0" 0 "$FGPACK" verify "$WORK/k.fgb" --max-new 24 --warmup 1 --summary "$WORK/k.json"
check "  ... its speed pass drafted with top-k 7, 3 drafts" python3 -c "import json; sp=json.load(open('$WORK/k.json'))['speculative']; assert sp['centroid_top_k'] == 7 and sp['draft_tokens'] == 3 and sp['rounds'] > 0, sp"
check "pack with the drafter without centroids" sh -c "'$FGPACK' pack '$WORK/man/manifest.json' --model '$T' --drafter '$AS/plain' --no-golden -o '$WORK/kp.fgb' >/dev/null 2>'$WORK/kp.err'"
check "  ... CENTROID_TOP_K stays unhonoured, saying why" settings "$WORK/kp.fgb" \
	"assert 'no centroid head' in u['CENTROID_TOP_K'] and 'CENTROID_TOP_K' not in s['honoured'] and 'SPECULATIVE_CONFIG' in s['honoured'], s"
check_grep "  ... with a note from pack" "note: CENTROID_TOP_K=7 not applied by the bundled drafter" "$WORK/kp.err"
sed 's/"CENTROID_TOP_K": "7"/"CENTROID_TOP_K": "40"/' "$WORK/man/manifest.json" >"$WORK/man/m40.json"
check "pack with CENTROID_TOP_K 40, beyond the drafter's 32 centroids" sh -c "'$FGPACK' pack '$WORK/man/m40.json' --model '$T' --drafter '$ORD' --no-golden -o '$WORK/k40.fgb' >/dev/null 2>&1"
check "  ... stays unhonoured, naming the bound" settings "$WORK/k40.fgb" \
	"assert 'out of the range 1..32' in u['CENTROID_TOP_K'] and 'CENTROID_TOP_K' not in s['honoured'], s"
check "pack without a drafter: CENTROID_TOP_K unhonoured" sh -c "'$FGPACK' pack '$WORK/man/manifest.json' --model '$T' --no-golden -o '$WORK/kn.fgb' >/dev/null 2>&1"
check "  ... saying the bundle has no such drafter" settings "$WORK/kn.fgb" "assert 'no Gemma 4 assistant drafter' in u['CENTROID_TOP_K'], s"
# bundle.json edited after packing (verify checks members against it, not
# it against an id): a centroid_top_k the engine cannot take (retop VALUE
# [KEY]: KEY, centroid_top_k by default, set to VALUE in settings)
retop() {
	python3 - "$WORK/k.fgb" "$WORK/bad.tar" "$1" "${2:-centroid_top_k}" <<'EOF'
import io, json, sys, subprocess, tarfile
raw = subprocess.run(["zstd", "-dc", sys.argv[1]], capture_output=True, check=True).stdout
src = tarfile.open(fileobj=io.BytesIO(raw))
out = tarfile.open(sys.argv[2], "w", format=tarfile.PAX_FORMAT)
for m in src.getmembers():
    data = src.extractfile(m).read() if m.isfile() else None
    if m.name == "bundle.json":
        d = json.loads(data)
        d["settings"][sys.argv[4]] = json.loads(sys.argv[3])
        data = json.dumps(d, indent=1).encode()
        m.size = len(data)
    out.addfile(m, io.BytesIO(data) if data is not None else None)
out.close()
EOF
	zstd -qf "$WORK/bad.tar" -o "$WORK/bad.fgb"
}
for V in 99 -2 '"7"' 2.5; do
	retop "$V"
	check_exit "a bundle with centroid_top_k $V: verify exits 1" 1 "$FGPACK" verify "$WORK/bad.fgb" --max-new 4
	check_grep "  ... naming the key" "bundle.json: settings centroid_top_k = .* is not an integer in 0\.\.64" "$WORK/.out"
	check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]
done
# a sliding window or context that an int would cut (2^32 + 5 -> 5) or that
# is no integer: refused, not applied cut
for KV in "sliding_window 4294967301" "max_model_len 2.5" "max_model_len 0"; do
	key=${KV% *}; val=${KV#* }
	retop "$val" "$key"
	check_exit "a bundle with $key $val: verify exits 1" 1 "$FGPACK" verify "$WORK/bad.fgb" --max-new 4
	check_grep "  ... naming the key" "bundle.json: settings $key = .* is not an integer in 1\.\." "$WORK/.out"
	check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]
	check_exit "  ... and serve exits 1" 1 "$FGPACK" serve "$WORK/bad.fgb" --port 0
	check_grep "  ... naming the key" "bundle.json: settings $key = " "$WORK/.out"
done
retop 40
check_exit "a bundle with centroid_top_k 40 (32 centroids): serve exits 1" 1 "$FGPACK" serve "$WORK/bad.fgb" --port 0
check_grep "  ... naming the key and the bound" "settings centroid_top_k 40: .*centroid top-k 40 is out of the range 1\.\.32" "$WORK/.out"
check "  ... in one line" [ "$(wc -l <"$WORK/.out")" -eq 1 ]
check_exit "serve --centroid-top-k, a bundle without a drafter: usage" 2 "$FGPACK" serve "$WORK/p.fgb" --centroid-top-k 3
check_exit "serve --model --centroid-top-k without --drafter: usage" 2 "$FGPACK" serve --model "$T" --centroid-top-k 3
check_exit "serve --centroid-top-k 65: usage" 2 "$FGPACK" serve "$WORK/k.fgb" --centroid-top-k 65
serve_bg "$WORK/serve-k.err" "$WORK/k.fgb"
check "serve the CENTROID_TOP_K bundle" wait_port "$P"
check_grep "serve drafts with the bundle's top-k" "speculative decoding with .*components/drafter, 3 drafts per round, centroid top-k 7" "$WORK/serve-k.err"
check "completions: run's tokens" sh -c "curl -sf http://127.0.0.1:$P/v1/completions -H 'content-type: application/json' \
	-d '{\"prompt\": [$IDS], \"max_tokens\": 40}' >'$WORK/ck.json' &&
	python3 -c 'import json; c=json.load(open(\"$WORK/ck.json\")); b=json.load(open(\"$WORK/base.json\")); ids=c[\"choices\"][0][\"token_ids\"]; assert 1 <= len(ids) and ids == b[\"generated_ids\"][:len(ids)], ids'"
kill "$SP" 2>/dev/null
wait "$SP" 2>/dev/null
serve_bg "$WORK/serve-k2.err" "$WORK/k.fgb" --centroid-top-k 2
check "serve the bundle with --centroid-top-k 2" wait_port "$P"
check_grep "  ... the flag over the bundle's 7" "3 drafts per round, centroid top-k 2" "$WORK/serve-k2.err"
kill "$SP" 2>/dev/null
finish
