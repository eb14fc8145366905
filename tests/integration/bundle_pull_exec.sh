#!/bin/sh
# bundle_pull_exec.sh - the example challenge manifest pulled from the local
# test hub (tests/servers/serve-hub.sh, laid out like gemma-challenge's buckets
# plus the model repo, small fake content; the drafter pin set to the fake
# drafter's digest), packed from the lock + store with nothing else given, and
# run with exec: the stand-in command's environment points inside the
# verified copy, and its files are the bytes the hub served.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
hub=$WORK/hub
commit=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c
W=$hub/buckets/gemma-challenge/gemma-chiku-inu/weights/osoi5-v0-baked
D=$hub/buckets/gemma-challenge/gemma-kenyan-duma/weights/drafter-ft/ft-v1-epoch_001
K=$hub/buckets/gemma-challenge/gemma-dixie-flatline/weights/int4-pck04c-12k
R=$hub/models/google/gemma-4-E4B-it@$commit
mkdir -p "$W" "$D" "$K" "$R" "$WORK/sub"
python3 - "$W" "$D" "$K" "$R" <<'PY'
import os, sys
w, d, k, r = sys.argv[1:5]
def put(p, data):
    with open(p, 'wb') as f:
        f.write(data)
put(w + '/config.json', b'{"architectures": ["Gemma4ForConditionalGeneration"]}\n')
put(w + '/model.safetensors', os.urandom(41943047))  # 40 MiB + 7: one chain state
put(w + '/pck04_keepset.json', b'{"keep": [1, 2, 3]}\n')
put(d + '/model.safetensors', os.urandom(120000))
put(k + '/keepset.json', b'{"keep": [4, 5]}\n')
put(r + '/config.json', b'{"model_type": "gemma4"}\n')
PY
ports=$(sh $S/serve-hub.sh start "$hub" "$WORK/st") || { not_ok "hub starts"; finish; exit 1; }
at_exit "sh $S/serve-hub.sh stop $WORK/st"
export HF_ENDPOINT="http://127.0.0.1:${ports%% *}" FGPACK_HOME="$WORK/store"
unset HF_HUB_OFFLINE HF_TOKEN

dsha=$(sha256sum "$D/model.safetensors" | cut -d' ' -f1)
sed "s/ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e/$dsha/" \
	"$TOP/tests/fixtures/manifests/precache-kenyan.json" >"$WORK/sub/manifest.json"
printf 'print("serve")\n' >"$WORK/sub/serve.py"
check "pull the challenge manifest from the test hub" "$FGPACK" pull "$WORK/sub/manifest.json" --lock "$WORK/sub/buckets.lock"
check "pack it from the lock and store alone" sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --no-golden -o '$WORK/c.fgb' >'$WORK/c.id'"
check "pack again: same bytes" sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --no-golden -o '$WORK/c2.fgb' >/dev/null && cmp '$WORK/c.fgb' '$WORK/c2.fgb'"
check_exit "verify the bundle" 0 "$FGPACK" verify "$WORK/c.fgb" --summary -
# the fetcher kept the weights' chain state (after 32 MiB) beside the blob,
# and pack lists it for the member it names by the blob
wsha=$(sha256sum "$W/model.safetensors" | cut -d' ' -f1)
check "pull kept the weights' chain states in the store (states/<sha256>)" sh -c "head -2 '$FGPACK_HOME/states/$wsha' | tr '\n' ' ' | grep -qx 'fgpack-states 1 every 33554432 ' && [ \$(wc -l <'$FGPACK_HOME/states/$wsha') -eq 3 ]"
zstd -dc "$WORK/c.fgb" | tar xOf - bundle.json >"$WORK/cb.json"
check "bundle.json lists them for the weights" python3 -c "
import json, sys
f = [f for f in json.load(open('$WORK/cb.json'))['files'] if f['sha256'] == '$wsha'][0]
st = open('$FGPACK_HOME/states/$wsha').read().split()[4:]
sys.exit(not (f['sha256_states'] == {'every': 33554432, 'states': st}))"
rm -rf "$FGPACK_HOME/states"
check "states gone from the store: pack hashes the weights instead (same bytes), and keeps their states again" sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --no-golden -o '$WORK/c5.fgb' >/dev/null 2>&1 && cmp '$WORK/c.fgb' '$WORK/c5.fgb' && [ -s '$FGPACK_HOME/states/$wsha' ]"
rm -rf "$FGPACK_HOME/states"
check "store verify keeps them again" sh -c "'$FGPACK' store verify >/dev/null 2>&1 && [ -s '$FGPACK_HOME/states/$wsha' ]"
# the blobs pull just checked are named by their stamps, not hashed again
check "pack names the store's blobs by their stamps" sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --no-golden -o '$WORK/c3.fgb' 2>'$WORK/c3.err' >/dev/null"
check_grep "pack says how many files it did not hash" '^fgpack pack: [1-9][0-9]* files? \([0-9.]+ GB\) named by their store blob' "$WORK/c3.err"
check "pack --rehash: the same bytes" sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --no-golden --rehash -o '$WORK/c4.fgb' 2>'$WORK/c4.err' >/dev/null && cmp '$WORK/c.fgb' '$WORK/c4.fgb'"
check "pack --rehash hashes every file" sh -c "! grep -q 'named by their store blob' '$WORK/c4.err'"
# the weights as pull --into placed them (hard links to the blobs), packed as
# a plain --model folder: named by their stamps too, same member digests
check "pull --into a folder" "$FGPACK" pull "$WORK/sub/manifest.json" --lock "$WORK/sub/buckets.lock" --into "$WORK/into"
check "pack --model of the placed weights names them by their stamps" sh -c "'$FGPACK' pack --model '$WORK/into/tmp/osoi5-v0-baked' --no-golden -o '$WORK/m.fgb' 2>'$WORK/m.err' >/dev/null && grep -q 'named by their store blob' '$WORK/m.err'"
check "... and the same bytes as with --rehash" sh -c "'$FGPACK' pack --model '$WORK/into/tmp/osoi5-v0-baked' --no-golden --rehash -o '$WORK/m2.fgb' 2>/dev/null >/dev/null && cmp '$WORK/m.fgb' '$WORK/m2.fgb'"
check_exit "verify it" 0 "$FGPACK" verify "$WORK/m.fgb" --no-replay --summary -
# the store named with --store instead of FGPACK_HOME: the lock's blobs and
# their stamps come from there
check "pack --store DIR: the same bundle, the files named by their stamps" sh -c "env -u FGPACK_HOME HOME='$WORK/nohome' '$FGPACK' pack '$WORK/sub/manifest.json' --no-golden --store '$FGPACK_HOME' -o '$WORK/s.fgb' 2>'$WORK/s.err' >/dev/null && cmp '$WORK/c.fgb' '$WORK/s.fgb' && grep -q 'named by their store blob' '$WORK/s.err'"
check_exit "pack --store of a folder that is no store" 1 sh -c "'$FGPACK' pack --model '$WORK/into/tmp/osoi5-v0-baked' --no-golden --store '$WORK/sub' -o '$WORK/n.fgb' 2>'$WORK/n.err'"
check_grep "  says so in one line" "^fgpack pack: --store: .*sub: not an fgpack store \\(no blobs/sha256\\)$" "$WORK/n.err"
zstd -dc "$WORK/c.fgb" | tar xOf - bundle.json >"$WORK/bundle.json"
check_grep "bundle.json records each component's tree digest from the lock" '"tree_digest": "[0-9a-f]{64}"' "$WORK/bundle.json"
check_grep "bundle.json records the source bucket" '"source": "hf://buckets/gemma-challenge/gemma-kenyan-duma/weights/drafter-ft/ft-v1-epoch_001"' "$WORK/bundle.json"

cat >"$WORK/show.sh" <<'EOF'
#!/bin/sh
echo "B=$FGPACK_BUNDLE"
echo "LOCAL_MODEL_DIR=$LOCAL_MODEL_DIR"
echo "SPECULATIVE_CONFIG=$SPECULATIVE_CONFIG"
echo "PCK04_KEEPSET=$PCK04_KEEPSET"
echo "LM_HEAD_PRUNE_DST=$LM_HEAD_PRUNE_DST"
cmp "$LOCAL_MODEL_DIR/model.safetensors" "$HUBW/model.safetensors" && echo weights-as-served
cmp "$PCK04_KEEPSET" "$HUBW/pck04_keepset.json" && echo keepset-as-served
cmp "$FGPACK_COMPONENT_DRAFTER_BUCKET/model.safetensors" "$HUBD/model.safetensors" && echo drafter-as-served
EOF
chmod +x "$WORK/show.sh"
check "exec runs the stand-in against the bundle" sh -c "HUBW='$W' HUBD='$D' '$FGPACK' exec '$WORK/c.fgb' -- '$WORK/show.sh' >'$WORK/env.txt'"
B=$(sed -n 's/^B=//p' "$WORK/env.txt")
check "the bundle folder is named" [ -n "$B" ]
check_grep "LOCAL_MODEL_DIR inside the bundle copy" "^LOCAL_MODEL_DIR=$B/components/weights\$" "$WORK/env.txt"
check_grep "SPECULATIVE_CONFIG.model inside the bundle copy" "^SPECULATIVE_CONFIG=.*\"model\":\"$B/components/drafter\"" "$WORK/env.txt"
check_grep "PCK04_KEEPSET inside the bundle copy" "^PCK04_KEEPSET=$B/components/weights/pck04_keepset.json\$" "$WORK/env.txt"
check_grep "LM_HEAD_PRUNE_DST inside the bundle copy" "^LM_HEAD_PRUNE_DST=$B/components/keepset\$" "$WORK/env.txt"
check_grep "weights are the bytes the hub served" '^weights-as-served$' "$WORK/env.txt"
check_grep "keepset file is the bytes the hub served" '^keepset-as-served$' "$WORK/env.txt"
check_grep "drafter is the bytes the hub served" '^drafter-as-served$' "$WORK/env.txt"
# a blob written in place (its stamp moves with the write): hashed, and the
# pack refuses it, naming the file and both digests; no bundle is left
wsha=$(sha256sum "$W/model.safetensors" | cut -d' ' -f1)
blob=$FGPACK_HOME/blobs/sha256/$(echo "$wsha" | cut -c1-2)/$wsha
chmod u+w "$blob" && printf 'X' | dd of="$blob" bs=1 seek=100 conv=notrunc 2>/dev/null
check_exit "pack refuses a store blob that no longer holds its name" 1 sh -c "'$FGPACK' pack '$WORK/sub/manifest.json' --no-golden -o '$WORK/bad.fgb' 2>'$WORK/bad.err'"
check_grep "... naming the blob and the digest it must have" "holds sha256 [0-9a-f]{64}, not the $wsha it is named by" "$WORK/bad.err"
check "... and writes no bundle" [ ! -e "$WORK/bad.fgb" ]
finish
