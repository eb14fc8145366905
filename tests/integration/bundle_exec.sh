#!/bin/sh
# bundle_exec.sh - a bundle packed from the example challenge manifest (its
# components in a lock + store, as fgpack pull leaves them) runs a stand-in
# command whose environment points inside the verified, materialized copy.
. "$(dirname "$0")/../lib.sh"

export FGPACK_HOME="$WORK/home"
SUB=$WORK/submission
mkdir -p "$SUB" "$WORK/src/weights" "$WORK/src/drafter" "$WORK/src/keepset" "$WORK/src/model" "$WORK/bin"
# the example manifest, plus a second name for the weights' folder that is
# not LOCAL_MODEL_DIR's path (MODEL_PATH, as vLLM-style scripts read it)
python3 -c "import json, sys
m = json.load(open(sys.argv[1]))
m['env']['MODEL_PATH'] = '/srv/elsewhere/weights'
# paths inside the weights' target (rewritten, so --print-env shows them):
# one of printable UTF-8 with a space and a quote, one with ESC, a C1 CSI
# (U+009B), a quote and a backslash
m['env']['PLAIN_PATH'] = '/tmp/osoi5-v0-baked/\u00e9 it\x27s.json'
m['env']['ESC_PATH'] = '/tmp/osoi5-v0-baked/\x1b[31mred\u009b\x27q\x5c.json'
json.dump(m, open(sys.argv[2], 'w'), indent=2)" "$TOP/tests/fixtures/manifests/precache-kenyan.json" "$SUB/manifest.json"
cat >"$SUB/serve.py" <<'EOF'
import os, sys
print("SERVE cwd=" + os.getcwd())
print("SERVE LOCAL_MODEL_DIR=" + os.environ["LOCAL_MODEL_DIR"])
EOF
printf '# a patch\n' >"$SUB/fa_sliding_patch.py"
printf '{"architectures": ["Gemma4ForCausalLM"]}\n' >"$WORK/src/weights/config.json"
head -c 200000 /dev/urandom >"$WORK/src/weights/model.safetensors"
printf '{"keep_ids": [0, 1, 2]}\n' >"$WORK/src/weights/pck04_keepset.json"
head -c 50000 /dev/urandom >"$WORK/src/drafter/model.safetensors"
printf '{"keep_ids": [0, 1]}\n' >"$WORK/src/keepset/keep.json"
printf '{"model_type": "gemma4"}\n' >"$WORK/src/model/config.json"

# the store and lock fgpack pull would leave (pull's own tests cover pulling)
python3 - "$SUB/manifest.json" "$WORK/src" "$FGPACK_HOME" "$SUB/buckets.lock" <<'EOF'
import hashlib, json, os, sys
manifest, src, home, lockp = sys.argv[1:]
mbytes = open(manifest, "rb").read()
env = json.loads(mbytes)["env"]
comps = {
  "WEIGHTS_BUCKET": ("weights", "gemma-challenge/gemma-chiku-inu", "/tmp/osoi5-v0-baked", "weights"),
  "DRAFTER_BUCKET": ("drafter", "gemma-challenge/gemma-kenyan-duma", "/tmp/qat-assistant", "drafter"),
  "LM_HEAD_KEEPSET_BUCKET": ("keepset", "gemma-challenge/gemma-dixie-flatline", "/tmp/osoi5-12k-baked", "keepset"),
}
out = {}
for key, (role, owner, target, folder) in comps.items():
    files = []
    for name in sorted(os.listdir(os.path.join(src, folder))):
        data = open(os.path.join(src, folder, name), "rb").read()
        h = hashlib.sha256(data).hexdigest()
        d = os.path.join(home, "blobs", "sha256", h[:2]); os.makedirs(d, exist_ok=True)
        p = os.path.join(d, h)
        open(p, "wb").write(data); os.chmod(p, 0o444)
        files.append({"path": name, "remote": {}, "sha256": h, "size": len(data)})
    tree = hashlib.sha256("".join("%s %d %s\n" % (f["sha256"], f["size"], f["path"]) for f in files).encode()).hexdigest()
    pins = {"DRAFTER_SHA256": env["DRAFTER_SHA256"]} if key == "DRAFTER_BUCKET" else {}
    out[key] = {"files": files, "kind": "bucket", "owner": owner, "pins": pins, "role": role,
                "source": env[key], "target": target, "tree_digest": tree}
lock = {"manifests": {"manifest.json": {"components": out, "name": json.loads(mbytes)["name"],
        "sha256": hashlib.sha256(mbytes).hexdigest()}}, "schema": 1}
open(lockp, "w").write(json.dumps(lock, indent=2, sort_keys=True) + "\n")
EOF

check "pack the example manifest from lock + store" sh -c "'$FGPACK' pack '$SUB/manifest.json' --component model_id='$WORK/src/model' --no-golden -o '$WORK/k.fgb' >'$WORK/k.id' 2>'$WORK/k.err'"
cp "$SUB/buckets.lock" "$WORK/other.lock"
check "--lock names the lock explicitly (same bundle)" sh -c "'$FGPACK' pack '$SUB/manifest.json' --lock '$WORK/other.lock' --component model_id='$WORK/src/model' --no-golden -o '$WORK/k2.fgb' 2>/dev/null | cmp - '$WORK/k.id'"
check_grep "pack warns that the fake drafter misses its pin" 'warning: .*DRAFTER' "$WORK/k.err"
zstd -dc "$WORK/k.fgb" | tar tf - >"$WORK/k.list"
check_grep "bundle holds the lock" '^buckets.lock$' "$WORK/k.list"
check_grep "bundle holds the weights from the store" '^components/weights/model.safetensors$' "$WORK/k.list"
check_grep "bundle holds the patches" '^patches/fa_sliding_patch.py$' "$WORK/k.list"

cat >"$WORK/show.sh" <<'EOF'
#!/bin/sh
env | LC_ALL=C sort >"$OUTF"
cmp "$LOCAL_MODEL_DIR/model.safetensors" "$SRC/weights/model.safetensors" && echo weights-same >>"$OUTF"
cmp "$PCK04_KEEPSET" "$SRC/weights/pck04_keepset.json" && echo keepset-same >>"$OUTF"
echo "bundle-dir $FGPACK_BUNDLE" >>"$OUTF"
exit 7
EOF
chmod +x "$WORK/show.sh"
OUTF=$WORK/env.txt SRC=$WORK/src TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"
export OUTF SRC TMPDIR
check_exit "exec runs the stand-in and returns its status" 7 "$FGPACK" exec "$WORK/k.fgb" -- "$WORK/show.sh"
B=$(sed -n 's/^bundle-dir //p' "$WORK/env.txt")
check "FGPACK_BUNDLE is set" [ -n "$B" ]
check_grep "LOCAL_MODEL_DIR -> components/weights" "^LOCAL_MODEL_DIR=$B/components/weights\$" "$WORK/env.txt"
check_grep "WEIGHTS_BUCKET -> components/weights" "^WEIGHTS_BUCKET=$B/components/weights\$" "$WORK/env.txt"
check_grep "DRAFTER_BUCKET -> components/drafter" "^DRAFTER_BUCKET=$B/components/drafter\$" "$WORK/env.txt"
check_grep "LM_HEAD_PRUNE_DST -> components/keepset" "^LM_HEAD_PRUNE_DST=$B/components/keepset\$" "$WORK/env.txt"
check_grep "PCK04_KEEPSET -> a file inside the weights" "^PCK04_KEEPSET=$B/components/weights/pck04_keepset.json\$" "$WORK/env.txt"
check_grep "PLE_FOLD_TARGET_MODEL rewritten too" "^PLE_FOLD_TARGET_MODEL=$B/components/weights\$" "$WORK/env.txt"
check_grep "MODEL_PATH, the weights' other target, -> components/weights" "^MODEL_PATH=$B/components/weights\$" "$WORK/env.txt"
check_grep "SPECULATIVE_CONFIG.model -> components/drafter" "^SPECULATIVE_CONFIG=.*\"model\":\"$B/components/drafter\"" "$WORK/env.txt"
check_grep "SPECULATIVE_CONFIG keeps K" '^SPECULATIVE_CONFIG=.*"num_speculative_tokens":7' "$WORK/env.txt"
check_grep "other manifest env passed through" '^MAX_MODEL_LEN=4096$' "$WORK/env.txt"
check_grep "HF_HUB_OFFLINE=1" '^HF_HUB_OFFLINE=1$' "$WORK/env.txt"
check_grep "FGPACK_BUNDLE_ID is the bundle id" "^FGPACK_BUNDLE_ID=$(cat "$WORK/k.id")\$" "$WORK/env.txt"
check_grep "materialized weights equal the source" '^weights-same$' "$WORK/env.txt"
check_grep "the keepset inside the weights equals the source" '^keepset-same$' "$WORK/env.txt"
# --print-env: a printable value as it is, one with control bytes in
# $'...' with them as \xNN (no ESC or C1 reaches stderr), which a shell
# reads back as the bytes the command got
"$FGPACK" exec "$WORK/k.fgb" --print-env -- sh -c 'printf %s "$ESC_PATH" >"$OUTF.esc"; printf %s "$PLAIN_PATH" >"$OUTF.plain"' 2>"$WORK/penv.err"
check "--print-env: nothing printed holds ESC or C1 bytes" sh -c "! LC_ALL=C grep -q \"\$(printf '\\033\\|\\302\\233')\" '$WORK/penv.err'"
check_grep "--print-env: a value with control bytes in \$'...' as \\xNN" \
	"^ESC_PATH=\\\$'/.*/components/weights/\\\\x1b\\[31mred\\\\xc2\\\\x9b\\\\'q\\\\\\\\\\.json'\$" "$WORK/penv.err"
check "  which bash reads back as the bytes the command got" sh -c "bash -c \"\$(grep '^ESC_PATH=' '$WORK/penv.err'); printf %s \\\"\\\$ESC_PATH\\\"\" | cmp - '$OUTF.esc'"
check "--print-env: a printable value as it is" sh -c "grep '^PLAIN_PATH=' '$WORK/penv.err' | cut -d= -f2- | tr -d '\n' | cmp - '$OUTF.plain'"
check "the temporary copy is removed after the command" sh -c "[ ! -e '$B' ] && [ -z \"\$(ls -A '$TMPDIR')\" ]"

# without a command: the manifest's serve command, in patches/
printf '#!/bin/sh\nexec python3 "$@"\n' >"$WORK/bin/python"
chmod +x "$WORK/bin/python"
check "exec without a command runs the manifest's serve in patches/" sh -c "PATH='$WORK/bin':\$PATH '$FGPACK' exec '$WORK/k.fgb' --dir '$WORK/keep' >'$WORK/serve.out'"
check_grep "serve.py ran in patches/" "^SERVE cwd=$WORK/keep/patches\$" "$WORK/serve.out"
check_grep "serve.py saw the rewritten LOCAL_MODEL_DIR" "^SERVE LOCAL_MODEL_DIR=$WORK/keep/components/weights\$" "$WORK/serve.out"
check "--dir keeps the copy" [ -f "$WORK/keep/components/weights/config.json" ]

# a tampered bundle runs nothing
python3 - "$WORK/k.fgb" "$WORK/bad.tar" <<'EOF'
import io, subprocess, sys, tarfile
d = bytearray(subprocess.run(["zstd", "-dc", sys.argv[1]], capture_output=True, check=True).stdout)
m = tarfile.open(fileobj=io.BytesIO(bytes(d))).getmember("patches/serve.py")
d[m.offset_data] ^= 0x01
open(sys.argv[2], "wb").write(d)
EOF
rm -f "$WORK/ran"
check_exit "tampered bundle: exit 3" 3 "$FGPACK" exec "$WORK/bad.tar" -- touch "$WORK/ran"
check "tampered bundle: the command did not run" [ ! -e "$WORK/ran" ]
"$FGPACK" exec "$WORK/bad.tar" -- true 2>"$WORK/bad.err"
check "tampered bundle: the file named in one line, once" sh -c "[ \"\$(wc -l <'$WORK/bad.err')\" -eq 1 ] && grep -q '^fgpack exec: patches/serve.py: sha256 differs from bundle.json\$' '$WORK/bad.err'"
# with --dir: the copy that did not check out is not left at DIR (where it
# looked usable and made the next try fail with "already exists"), nor
# beside it
check_exit "tampered bundle, --dir: exit 3" 3 "$FGPACK" exec "$WORK/bad.tar" --dir "$WORK/badkeep" -- touch "$WORK/ran"
check "  nothing left at DIR or beside it, the command did not run" sh -c "[ ! -e '$WORK/badkeep' ] && ! ls '$WORK' | grep -q '^badkeep' && [ ! -e '$WORK/ran' ]"
python3 - "$WORK/nobj.tar" "$WORK/badjson.tar" <<'EOF'
import io, sys, tarfile
for out, name, data in ((sys.argv[1], "f", b"x"), (sys.argv[2], "bundle.json", b"{x}")):
    t = tarfile.open(out, "w"); ti = tarfile.TarInfo(name); ti.size = len(data)
    t.addfile(ti, io.BytesIO(data)); t.close()
EOF
check_fails "no bundle.json, --dir: refused" "$FGPACK" exec "$WORK/nobj.tar" --dir "$WORK/nobjkeep" -- true
check "  nothing left at DIR" sh -c "! ls '$WORK' | grep -q '^nobjkeep'"
check_fails "bundle.json not JSON, --dir: refused" "$FGPACK" exec "$WORK/badjson.tar" --dir "$WORK/bjkeep" -- true
check "  nothing left at DIR" sh -c "! ls '$WORK' | grep -q '^bjkeep'"
finish
