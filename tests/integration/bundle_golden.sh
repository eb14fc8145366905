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
# a replay extracts in lanes (the engine and the model start frames of
# their own), which compute the id from the states pack keeps: the same id,
# files and verdict as with the lanes off
"$FGPACK" verify "$WORK/g.fgb" --no-bench --threads 2 --json --summary - >"$WORK/gl.json" 2>/dev/null
FG_TAR_LANES=0 "$FGPACK" verify "$WORK/g.fgb" --no-bench --threads 2 --json --summary - >"$WORK/gs.json" 2>/dev/null
check "replay, 2 threads: extracted in lanes on both (3 or 4), the id with them; 1 lane with FG_TAR_LANES=0" sh -c "grep -q '\"lanes\": [34]' '$WORK/gl.json' && grep -q '\"lanes\": 1' '$WORK/gs.json'"
check_grep "replay in lanes: the id they compute is pack's" "\"bundle\": \"$(cat "$WORK/g.id")\"" "$WORK/gl.json"
check "replay in lanes: the same summary as from start to end (but times)" sh -c "python3 - '$WORK/gl.json' '$WORK/gs.json' <<'PY'
import json, sys
def strip(p):
    d = json.load(open(p))
    d['files'].pop('lanes'); d['files'].pop('seconds'); d['files'].pop('mb_per_s')
    for k in ('tps', 'bench', 'seconds', 'wall_s'):
        d.pop(k, None)
    return d
a, b = strip(sys.argv[1]), strip(sys.argv[2])
sys.exit(0 if a == b else 1)
PY"

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
textprompts() { # TRANSCRIPT: every prompt has text, and its ids are that text encoded (with <bos>)
	python3 -c '
import json, subprocess, sys
tr = json.load(open(sys.argv[1]))["prompts"]
assert len(tr) == 4 and all("text" in p for p in tr), tr
for p in tr:
    out = subprocess.run([sys.argv[2], "tokenize", "--tokenizer", sys.argv[3], "--add-special"],
                         input=p["text"].encode(), capture_output=True, check=True).stdout
    assert json.loads(out) == p["ids"], (p, out)' "$1" "$FGPACK" "$MODEL/tokenizer.json"
}
zstd -dc "$WORK/g.fgb" | tar -xOf - golden/transcript.json >"$WORK/g.tr.json"
check "text prompts: each prompt's ids are its text encoded by the model's tokenizer (fgpack tokenize --add-special)" textprompts "$WORK/g.tr.json"
# ... and token ids when the model folder has no tokenizer, or one that does not fit
idprompts() { # TRANSCRIPT: no text, the documented id sequences (lengths 1, 7, 16, 33; BOS first)
	python3 -c '
import json, sys
tr = json.load(open(sys.argv[1]))
ps = tr["prompts"]
assert all("text" not in p for p in ps), ps
assert [len(p["ids"]) for p in ps] == [1, 7, 16, 33], [len(p["ids"]) for p in ps]
cfg = json.load(open(sys.argv[2]))
bos, vocab = cfg.get("bos_token_id", 2), cfg.get("vocab_size") or cfg["text_config"]["vocab_size"]
x = 88172645463325252
for p in ps:
    want = []
    for i in range(len(p["ids"])):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        want.append(bos if i == 0 and bos >= 0 else (x >> 33) % vocab)
    assert p["ids"] == want, (p["ids"], want)' "$1" "$MODEL/config.json"
}
mkdir -p "$WORK/notok" "$WORK/badtok"
for f in config.json model.safetensors; do ln "$MODEL/$f" "$WORK/notok/$f" 2>/dev/null || cp "$MODEL/$f" "$WORK/notok/$f"; cp "$WORK/notok/$f" "$WORK/badtok/$f"; done
check "pack a model folder without tokenizer.json" sh -c "'$FGPACK' pack --model '$WORK/notok' -o '$WORK/n.fgb' >/dev/null 2>'$WORK/n.err'"
check "no tokenizer: no note (nothing went wrong)" sh -c "! grep -q 'golden prompts as token ids' '$WORK/n.err'"
zstd -dc "$WORK/n.fgb" | tar -xOf - golden/transcript.json >"$WORK/n.tr.json"
check "no tokenizer: prompts are the documented token id sequences, no text" idprompts "$WORK/n.tr.json"
check_exit "no tokenizer: the id-prompt transcript replays" 0 "$FGPACK" verify "$WORK/n.fgb" --no-bench --summary "$WORK/n.json"
check_grep "no tokenizer: at level logits" '"level": "logits"' "$WORK/n.json"
# a tokenizer whose ids run past the model's vocabulary does not belong to it
python3 - "$MODEL/tokenizer.json" "$WORK/badtok/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
v = t["model"]["vocab"]
shift = 100000
t["model"]["vocab"] = {k: i + shift for k, i in v.items()} if isinstance(v, dict) else v
for a in t.get("added_tokens", []):
    a["id"] += shift
json.dump(t, open(sys.argv[2], "w"))
PY
check "pack a model whose tokenizer does not fit it" sh -c "'$FGPACK' pack --model '$WORK/badtok' -o '$WORK/b.fgb' >/dev/null 2>'$WORK/b.err'"
check_grep "misfit tokenizer: a note says why the prompts are ids" 'note: golden prompts as token ids: .*beyond the model' "$WORK/b.err"
zstd -dc "$WORK/b.fgb" | tar -xOf - golden/transcript.json >"$WORK/b.tr.json"
check "misfit tokenizer: prompts are the documented id sequences" idprompts "$WORK/b.tr.json"
# the default number of new tokens shrinks to the context, with a note
"$FGPACK" verify "$WORK/g.fgb" --warmup 1 --summary "$WORK/fit.json" >/dev/null 2>"$WORK/fit.err"
check "verify: default 128 new tokens shrink to the 128-token context" grep -q 'note: timing [0-9]* new tokens per prompt, not 128' "$WORK/fit.err"
check_grep "... and every timed prompt completes" '"completed": "4/4"' "$WORK/fit.json"
IDS=$(python3 -c 'print(",".join(["5"] * 120))')
check "run: the default 32 new tokens shrink to what the context leaves, with a note" sh -c "'$FGPACK' run --model '$MODEL' --ids $IDS --json 2>'$WORK/run.err' | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"n_generated\"] <= 9 else 1)' && grep -q 'note: generating 9 tokens, not the default 32' '$WORK/run.err'"
check_exit "run: an explicit -n that does not fit is refused" 1 "$FGPACK" run --model "$MODEL" --ids 5,6 -n 200

finish
