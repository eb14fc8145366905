#!/bin/sh
# bundle_golden.sh - the CPU engine's golden transcript replays exactly; a
# transcript edited to disagree (re-listed in bundle.json so that file hashes
# still match) is reported at the right level, step and prompt.
. "$(dirname "$0")/../lib.sh"

MODEL=$TOP/tests/fixtures/oracle/bf16
check "pack the tiny model with a golden transcript" sh -c "'$FGPACK' pack --model '$MODEL' -o '$WORK/g.fgb' >'$WORK/g.id'"
check "pack again: same bytes (the transcript is deterministic)" sh -c "'$FGPACK' pack --model '$MODEL' -o '$WORK/g2.fgb' >/dev/null && cmp '$WORK/g.fgb' '$WORK/g2.fgb'"
check_exit "verify replays it: exit 0" 0 "$FGPACK" verify "$WORK/g.fgb" --max-new 48 --warmup 8 --summary "$WORK/s.json"
check_grep "level: logits (same device class)" '"level": "logits"' "$WORK/s.json"
check_grep "verdict: verified" '"verdict": "verified"' "$WORK/s.json"
check_grep "tokens/s measured" '"tps": [0-9]' "$WORK/s.json"
check_grep "all timed requests completed" '"completed": "4/4"' "$WORK/s.json"
check_grep "perplexity measured" '"ppl": [0-9]' "$WORK/s.json"
check_grep "device named" '"kind": "cpu"' "$WORK/s.json"
check "--json prints the summary" sh -c "'$FGPACK' verify '$WORK/g.fgb' --no-bench --json --summary - | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"verdict\"]==\"verified\", d'"

# rewrite the transcript inside the bundle, keep bundle.json consistent
edit() { # mode out
python3 - "$WORK/g.fgb" "$1" "$2" <<'EOF'
import hashlib, io, json, subprocess, sys, tarfile
src, mode, out = sys.argv[1:]
d = subprocess.run(["zstd", "-dc", src], capture_output=True, check=True).stdout
t = tarfile.open(fileobj=io.BytesIO(d))
members = {m.name: t.extractfile(m).read() for m in t.getmembers()}
tr = json.loads(members["golden/transcript.json"])
if mode == "token":
    tr["prompts"][2]["tokens"][5] = (tr["prompts"][2]["tokens"][5] + 1) % 512
else:
    tr["prompts"][1]["chain"][3] = "0" * 64
new = (json.dumps(tr, indent=2, sort_keys=True) + "\n").encode()
members["golden/transcript.json"] = new
b = json.loads(members["bundle.json"])
for f in b["files"]:
    if f["path"] == "golden/transcript.json":
        f["sha256"] = hashlib.sha256(new).hexdigest(); f["size"] = len(new)
members["bundle.json"] = (json.dumps(b, indent=2, sort_keys=True) + "\n").encode()
o = tarfile.open(out, "w", format=tarfile.PAX_FORMAT)
for name in sorted(members):
    ti = tarfile.TarInfo(name); ti.size = len(members[name]); ti.mode = 0o755 if name == "engine/fgpack" else 0o644
    o.addfile(ti, io.BytesIO(members[name]))
o.close()
EOF
}
edit token "$WORK/tok.tar"
"$FGPACK" verify "$WORK/tok.tar" --no-bench --summary "$WORK/tok.json" >"$WORK/tok.out" 2>&1
check "edited token: exit 3" [ $? -eq 3 ]
check_grep "edited token: step 5 of prompt 2" 'mismatch at step 5 of prompt 2' "$WORK/tok.out"
check_grep "edited token: summary says where" '"step": 5' "$WORK/tok.json"
edit chain "$WORK/chain.tar"
check_exit "edited logits hash only: exit 0" 0 "$FGPACK" verify "$WORK/chain.tar" --no-bench --summary "$WORK/chain.json"
check_grep "edited logits hash only: level tokens" '"level": "tokens"' "$WORK/chain.json"
check_grep "edited logits hash only: first difference located" '"first_logits_difference_step": 3' "$WORK/chain.json"
check_grep "edited logits hash only: verdict verified-tokens" '"verdict": "verified-tokens"' "$WORK/chain.json"
# golden prompts are text when the model folder has a tokenizer that fits
check "golden prompts are text, encoded by the model's tokenizer" sh -c "zstd -dc '$WORK/g.fgb' | tar -xOf - golden/transcript.json | grep -q '\"text\": \"The capital of France is\"'"
# the default number of new tokens shrinks to the context, with a note
"$FGPACK" verify "$WORK/g.fgb" --warmup 1 --summary "$WORK/fit.json" >/dev/null 2>"$WORK/fit.err"
check "verify: default 128 new tokens shrink to the 128-token context" grep -q 'note: timing [0-9]* new tokens per prompt, not 128' "$WORK/fit.err"
check_grep "... and every timed prompt completes" '"completed": "4/4"' "$WORK/fit.json"
IDS=$(python3 -c 'print(",".join(["5"] * 120))')
check "run: the default 32 new tokens shrink to what the context leaves, with a note" sh -c "'$FGPACK' run --model '$MODEL' --ids $IDS --json 2>'$WORK/run.err' | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"n_generated\"] <= 9 else 1)' && grep -q 'note: generating 9 tokens, not the default 32' '$WORK/run.err'"
check_exit "run: an explicit -n that does not fit is refused" 1 "$FGPACK" run --model "$MODEL" --ids 5,6 -n 200

finish
