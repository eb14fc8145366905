#!/bin/sh
# pull_challenge.sh - the real example challenge manifest
# (tests/fixtures/manifests/precache-kenyan.json) pulled from a local hub laid
# out like gemma-challenge's buckets plus the google/gemma-4-E4B-it model repo,
# with small fake content. Unchanged, its DRAFTER_SHA256 pin cannot match the
# fake drafter: the pull must fail naming file, expected and actual digest and
# leave nothing behind. With the pin set to the fake drafter's digest, every
# component lands under --into at its LOCAL_*_DIR / *_DST / SPECULATIVE_CONFIG path.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
M=$TOP/tests/fixtures/manifests/precache-kenyan.json
hub=$WORK/hub
commit=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c
W=$hub/buckets/gemma-challenge/gemma-chiku-inu/weights/osoi5-v0-baked
D=$hub/buckets/gemma-challenge/gemma-kenyan-duma/weights/drafter-ft/ft-v1-epoch_001
K=$hub/buckets/gemma-challenge/gemma-dixie-flatline/weights/int4-pck04c-12k
R=$hub/models/google/gemma-4-E4B-it@$commit
mkdir -p "$W" "$D" "$K" "$R" "$hub/buckets/gemma-challenge/gemma-chiku-inu/weights/other"
python3 - "$W" "$D" "$K" "$R" "$hub" <<'PY'
import os, sys
w, d, k, r, hub = sys.argv[1:6]
def put(p, data):
    with open(p, 'wb') as f:
        f.write(data)
put(w + '/config.json', b'{"architectures": ["Gemma4ForConditionalGeneration"]}\n')
put(w + '/model-00001-of-00002.safetensors', os.urandom(300000))
put(w + '/model-00002-of-00002.safetensors', os.urandom(200000))
put(w + '/pck04_keepset.json', b'{"keep": [1, 2, 3]}\n')
put(d + '/config.json', b'{"model_type": "gemma4_assistant"}\n')
put(d + '/model.safetensors', os.urandom(120000))
put(k + '/keepset.json', b'{"keep": [4, 5]}\n')
put(k + '/lm_head.safetensors', os.urandom(50000))
put(r + '/config.json', b'{"model_type": "gemma4"}\n')
put(r + '/model.safetensors', os.urandom(80000))
put(hub + '/buckets/gemma-challenge/gemma-chiku-inu/weights/other/x.bin', b'not asked for')
PY
ports=$(sh $S/serve-hub.sh start "$hub" "$WORK/st" --cdn '*.safetensors') || { not_ok "hub starts"; finish; exit 1; }
at_exit "sh $S/serve-hub.sh stop $WORK/st"
export HF_ENDPOINT="http://127.0.0.1:${ports%% *}" FGPACK_HOME="$WORK/store"
unset HF_HUB_OFFLINE HF_TOKEN

check_exit "unchanged manifest: the real DRAFTER_SHA256 pin fails" 3 "$FGPACK" pull "$M" --lock "$WORK/a.lock" --into "$WORK/out0"
check_grep "pin failure names file, expected and actual" \
	"DRAFTER_BUCKET: model.safetensors: expected sha256 ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e \(DRAFTER_SHA256\), got [0-9a-f]{64}" "$WORK/.out"
dsha=$(sha256sum "$D/model.safetensors" | cut -d' ' -f1)
if [ -z "$(find "$FGPACK_HOME/blobs" -name "$dsha")" ]; then ok "the mismatching drafter blob is not in the store"; else not_ok "the mismatching drafter blob is not in the store"; fi
if [ ! -e "$WORK/a.lock" ] && [ ! -e "$WORK/out0" ]; then ok "no lock, nothing materialized"; else not_ok "no lock, nothing materialized"; fi

sed "s/ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e/$dsha/" "$M" >"$WORK/manifest.json"
# stdout alone is the JSON (stderr warns about the manifest's unpinned dependencies)
check "pinned to the fake drafter: pull succeeds" sh -c '"$0" pull "$1" --lock "$2" --into "$3" --json >"$4"' \
	"$FGPACK" "$WORK/manifest.json" "$WORK/b.lock" "$WORK/out" "$WORK/pull.json"
check_grep "unpinned dependencies warned about" 'warning: dependency "torch" is not pinned' "$WORK/.out"
o=$WORK/out
check "weights at LOCAL_MODEL_DIR" cmp "$W/model-00002-of-00002.safetensors" "$o/tmp/osoi5-v0-baked/model-00002-of-00002.safetensors"
check "keepset file inside the weights folder (PCK04_KEEPSET)" cmp "$W/pck04_keepset.json" "$o/tmp/osoi5-v0-baked/pck04_keepset.json"
check "drafter at SPECULATIVE_CONFIG.model" cmp "$D/model.safetensors" "$o/tmp/qat-assistant/model.safetensors"
check "LM-head keepset at LM_HEAD_PRUNE_DST" cmp "$K/lm_head.safetensors" "$o/tmp/osoi5-12k-baked/lm_head.safetensors"
check "base model repo fetched" cmp "$R/model.safetensors" "$o/_components/model_id/model.safetensors"
if [ ! -e "$o/tmp/osoi5-v0-baked/other" ]; then ok "bucket files outside the component not fetched"; else not_ok "bucket files outside the component not fetched"; fi
check_grep "model repo locked at its commit" "\"revision\": \"$commit\"" "$WORK/b.lock"
rsha=$(sha256sum "$R/model.safetensors" | cut -d' ' -f1)
check_grep "LFS file's sha256 in the lock" "$rsha" "$WORK/b.lock"
check_grep "owners recorded" '"owner": "gemma-challenge/gemma-kenyan-duma"' "$WORK/b.lock"
check "--json lists four components" python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['schema']==1 and len(d['components'])==4, d" "$WORK/pull.json"
check "--locked passes" "$FGPACK" pull "$WORK/manifest.json" --lock "$WORK/b.lock" --locked
check "offline re-pull from the store" env HF_HUB_OFFLINE=1 "$FGPACK" pull "$WORK/manifest.json" --lock "$WORK/b.lock" --into "$WORK/out2"
check "offline materialization matches" diff -r "$WORK/out" "$WORK/out2"
finish
