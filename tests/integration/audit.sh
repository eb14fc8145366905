#!/bin/sh
# audit.sh - fgpack audit on the example challenge manifest (owners of the
# three community buckets, the drafter pin, unpinned warnings, hard-coded env
# defaults in serve.py), against a lock (pin disagreement), on a bundle
# (provenance, signer), online against a local hub (bucket changed since the
# lock), and CycloneDX 1.6 output validated with ajv against the official schema.
. "$(dirname "$0")/../lib.sh"
cd "$TOP" || exit 1
VALIDATE="node $TOP/tests/integration/cdx_validate.js"
jget() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
row() { jget "$1" "[c for c in d['components'] if c['key']=='$2'][0]['$3']"; }

mkdir -p "$WORK/sub"
cp /work/shared/examples/challenge-manifest-precache-kenyan.json "$WORK/sub/manifest.json" 2>/dev/null ||
	cp tests/fixtures/manifests/precache-kenyan.json "$WORK/sub/manifest.json"
cat >"$WORK/sub/serve.py" <<'PY'
import os
seqs = int(os.environ.get("MAX_NUM_SEQS", "4"))          # manifest says 1
os.environ["MAX_MODEL_LEN"] = "8192"                     # manifest says 4096
mml = os.getenv('MAX_MODEL_LEN', '4096')                 # agrees: no warning
gmu = float(os.environ.get("GPU_MEMORY_UTILIZATION", 0.9))  # 0.90 == 0.9: no warning
other = os.environ.get("NOT_IN_MANIFEST", "x")           # not set by the manifest
PY
M=$WORK/sub/manifest.json
check "audit a bare manifest offline (json)" sh -c "'$FGPACK' audit '$M' --json >'$WORK/m.json'"
check "three community buckets with their owners" test "$(jget "$WORK/m.json" "sorted((c['key'], c['owner']) for c in d['components'] if c['kind']=='bucket')")" = \
	"[('DRAFTER_BUCKET', 'gemma-challenge/gemma-kenyan-duma'), ('LM_HEAD_KEEPSET_BUCKET', 'gemma-challenge/gemma-dixie-flatline'), ('WEIGHTS_BUCKET', 'gemma-challenge/gemma-chiku-inu')]"
check "drafter pinned by DRAFTER_SHA256" test "$(row "$WORK/m.json" DRAFTER_BUCKET pin) $(row "$WORK/m.json" DRAFTER_BUCKET pin_sha256)" = \
	"manifest:DRAFTER_SHA256 ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e"
check "weights and keepset not pinned" test "$(row "$WORK/m.json" WEIGHTS_BUCKET pinned) $(row "$WORK/m.json" LM_HEAD_KEEPSET_BUCKET pinned)" = "False False"
check "base model owner" test "$(row "$WORK/m.json" model_id owner)" = "google/gemma-4-E4B-it"
check "unpinned warnings for the two mutable buckets" test "$(jget "$WORK/m.json" "sorted(w['key'] for w in d['warnings'] if w['code']=='unpinned' and 'BUCKET' in w['key'])")" = \
	"['LM_HEAD_KEEPSET_BUCKET', 'WEIGHTS_BUCKET']"
check "hard-coded defaults found (exactly the two that differ)" test "$(jget "$WORK/m.json" "sorted(w['key'] for w in d['warnings'] if w['code']=='hardcoded-default')")" = \
	"['MAX_MODEL_LEN', 'MAX_NUM_SEQS']"
check_grep "names file, line and both values" 'serve.py:2 hard-codes os.environ.get\(\\"MAX_NUM_SEQS\\", \\"4\\"\) but the manifest sets MAX_NUM_SEQS=1' "$WORK/m.json"
check "says what it cannot know offline" test "$(jget "$WORK/m.json" "len(d['unknown']) > 0 and d['online'] is False")" = True
check "human table" sh -c "'$FGPACK' audit '$M' >'$WORK/m.txt'"
check_grep "table: chiku-inu owner" "owner: +gemma-challenge/gemma-chiku-inu" "$WORK/m.txt"
check_grep "table: kenyan-duma owner" "owner: +gemma-challenge/gemma-kenyan-duma" "$WORK/m.txt"
check_grep "table: dixie-flatline owner" "owner: +gemma-challenge/gemma-dixie-flatline" "$WORK/m.txt"
check_grep "table: drafter pin" "pin: +sha256:ed159e334999fd6b5f2d0dbad026346d4efac89eb7c6f55c5cdb042eca5dd18e" "$WORK/m.txt"
check_grep "table: cannot know offline" "cannot know offline" "$WORK/m.txt"

# CycloneDX 1.6, validated against the official schema (and the check can fail)
check "cyclonedx from a manifest" sh -c "'$FGPACK' audit '$M' --cyclonedx >'$WORK/m.cdx.json'"
check "valid CycloneDX 1.6 (ajv, official schema)" $VALIDATE "$WORK/m.cdx.json"
check "suppliers are the bucket owners" test "$(jget "$WORK/m.cdx.json" "sorted(c['supplier']['name'] for c in d['components'] if 'supplier' in c)")" = \
	"['gemma-challenge/gemma-chiku-inu', 'gemma-challenge/gemma-dixie-flatline', 'gemma-challenge/gemma-kenyan-duma', 'google/gemma-4-E4B-it', 'local']"
check "drafter depends on the base model" test "$(jget "$WORK/m.cdx.json" "[x['dependsOn'] for x in d['dependencies'] if x['ref']=='component:DRAFTER_BUCKET']")" = "[['component:model_id']]"
check "same input, same BOM bytes" sh -c "'$FGPACK' audit '$M' --cyclonedx | cmp - '$WORK/m.cdx.json'"
sed 's/"specVersion": "1.6"/"specVersion": 1.6/' "$WORK/m.cdx.json" >"$WORK/bad.cdx.json"
check_fails "the validator rejects a broken BOM" $VALIDATE "$WORK/bad.cdx.json"

# against a lock whose drafter file does not match DRAFTER_SHA256
check "audit with --lock" sh -c "'$FGPACK' audit '$M' --lock tests/fixtures/lock/kenyan.lock --json >'$WORK/l.json'"
check "pin disagreeing with the lock is a warning" test "$(jget "$WORK/l.json" "[w['key'] for w in d['warnings'] if w['code']=='pin-mismatch']")" = "['DRAFTER_BUCKET']"
check "lock gives digests and sizes" test "$(row "$WORK/l.json" DRAFTER_BUCKET digest) $(row "$WORK/l.json" DRAFTER_BUCKET size)" = \
	"5219b3fcf309ce9fc112a7add3d86904618a95e0f1001836cad7f224c593495f 1234"
check "locked buckets are no longer 'unpinned'" test "$(jget "$WORK/l.json" "[w['key'] for w in d['warnings'] if w['code']=='unpinned']")" = "['model_id']"
check "audit a lock alone" sh -c "'$FGPACK' audit tests/fixtures/lock/kenyan.lock --cyclonedx >'$WORK/lock.cdx.json'"
check "lock BOM is valid CycloneDX 1.6" $VALIDATE "$WORK/lock.cdx.json"

# a bundle: bundle.json, manifest, patches, a provenance statement, a signature
B=$WORK/b
mkdir -p "$B/components/weights" "$B/components/drafter" "$B/patches"
head -c 4000 /dev/urandom >"$B/components/weights/model.safetensors"
head -c 3000 /dev/urandom >"$B/components/drafter/model.safetensors"
cp "$M" "$B/manifest.json"; cp "$WORK/sub/serve.py" "$B/patches/serve.py"
python3 - "$B" <<'PY'
import hashlib, json, os, sys
b = sys.argv[1]
h = lambda p: hashlib.sha256(open(os.path.join(b, p), "rb").read()).hexdigest()
w = "components/weights/model.safetensors"
st = {"_type": "https://in-toto.io/Statement/v1", "predicateType": "https://slsa.dev/provenance/v1",
      "subject": [{"name": "model.safetensors", "digest": {"sha256": h(w)}}],
      "predicate": {"buildDefinition": {"buildType": "https://fgpack.dev/bake/int4/v1",
                    "externalParameters": {"group_size": 128, "bits": 4},
                    "resolvedDependencies": [{"name": "google/gemma-4-E4B-it/model.safetensors",
                                              "uri": "hf://google/gemma-4-E4B-it",
                                              "digest": {"sha256": "ab" * 32}}]},
                    "runDetails": {"builder": {"id": "https://github.com/fgpack/fgpack/builder/local"}}}}
json.dump(st, open(os.path.join(b, "components/weights/provenance.intoto.json"), "w"))
files = []
for root, _, fs in os.walk(b):
    for f in fs:
        p = os.path.relpath(os.path.join(root, f), b)
        if p != "bundle.json":
            files.append({"path": p, "size": os.path.getsize(os.path.join(b, p)), "sha256": h(p), "mode": "0644"})
files.sort(key=lambda x: x["path"].encode())
m = json.load(open(os.path.join(b, "manifest.json")))
meta = {"schema": 1, "name": m["name"], "manifest": "manifest.json", "files": files, "components": [
    {"key": "WEIGHTS_BUCKET", "role": "weights", "path": "components/weights", "source": m["env"]["WEIGHTS_BUCKET"]},
    {"key": "DRAFTER_BUCKET", "role": "drafter", "path": "components/drafter", "source": m["env"]["DRAFTER_BUCKET"],
     "pin_sha256": m["env"]["DRAFTER_SHA256"]}]}
json.dump(meta, open(os.path.join(b, "bundle.json"), "w"), indent=2, sort_keys=True)
PY
(cd "$B" && tar -cf - bundle.json components manifest.json patches) | zstd -q >"$WORK/demo.fgb"
"$FGPACK" keygen -o "$WORK/k.pem" >"$WORK/fp.txt" 2>/dev/null
"$FGPACK" sign --key "$WORK/k.pem" "$WORK/demo.fgb" >/dev/null
check "audit a bundle" sh -c "'$FGPACK' audit '$WORK/demo.fgb' --json >'$WORK/b.json'"
check "bundle: weights owner from its source" test "$(row "$WORK/b.json" WEIGHTS_BUCKET owner)" = "gemma-challenge/gemma-chiku-inu"
check "bundle: signed by the key fingerprint" test "$(row "$WORK/b.json" bundle signed_by)" = "$(cat "$WORK/fp.txt")"
# a hint written in uppercase hex is the same key id: shown lowercase
cp "$WORK/demo.fgb.sig" "$WORK/demo.fgb.sig.lower"
python3 -c 'import json, sys
b = json.load(open(sys.argv[1])); k = b["verificationMaterial"]["publicKey"]
k["hint"] = k["hint"].upper(); json.dump(b, open(sys.argv[1], "w"))' "$WORK/demo.fgb.sig"
check "audit a bundle whose signature's hint is uppercase hex" sh -c "'$FGPACK' audit '$WORK/demo.fgb' --json >'$WORK/bu.json'"
check "  signed by the key fingerprint, lowercase" test "$(row "$WORK/bu.json" bundle signed_by)" = "$(cat "$WORK/fp.txt")"
mv "$WORK/demo.fgb.sig.lower" "$WORK/demo.fgb.sig"
check "bundle: derived from the provenance inputs and parameters" test "$(jget "$WORK/b.json" "[(c['derived_from']['inputs'][0]['name'], c['derived_from']['parameters']['group_size']) for c in d['components'] if c['key']=='WEIGHTS_BUCKET'][0]")" = \
	"('google/gemma-4-E4B-it/model.safetensors', 128)"
check "bundle: drafter pin not matching its bytes is a warning" test "$(jget "$WORK/b.json" "[w['key'] for w in d['warnings'] if w['code']=='pin-mismatch']")" = "['DRAFTER_BUCKET']"
check "bundle: patches scanned" test "$(jget "$WORK/b.json" "sorted(w['key'] for w in d['warnings'] if w['code']=='hardcoded-default')")" = "['MAX_MODEL_LEN', 'MAX_NUM_SEQS']"
check "bundle BOM" sh -c "'$FGPACK' audit '$WORK/demo.fgb' --cyclonedx >'$WORK/b.cdx.json'"
check "bundle BOM is valid CycloneDX 1.6" $VALIDATE "$WORK/b.cdx.json"
check "bundle BOM: pedigree ancestor from provenance" test "$(jget "$WORK/b.cdx.json" "[c['pedigree']['ancestors'][0]['name'] for c in d['components'] if c['name']=='WEIGHTS_BUCKET']")" = \
	"['google/gemma-4-E4B-it/model.safetensors']"

# statements that do not describe what they sit beside are said so, never shown
# as what a component was derived from: one in the drafter's folder naming a
# sha256 the drafter does not have, one under attestations/ naming nothing in
# the bundle, one with another predicate type, one that is no in-toto statement
python3 - "$B" <<'PY'
import hashlib, json, os, sys
b = sys.argv[1]
h = lambda p: hashlib.sha256(open(os.path.join(b, p), "rb").read()).hexdigest()
st = json.load(open(os.path.join(b, "components/weights/provenance.intoto.json")))
st["subject"] = [{"name": "model.safetensors", "digest": {"sha256": "cd" * 32}}]
json.dump(st, open(os.path.join(b, "components/drafter/provenance.intoto.json"), "w"))
os.makedirs(os.path.join(b, "attestations"), exist_ok=True)
st["subject"] = [{"name": "elsewhere.bin", "digest": {"sha256": "ef" * 32}}]
json.dump(st, open(os.path.join(b, "attestations/stray.intoto.json"), "w"))
st["subject"] = [{"name": "model.safetensors", "digest": {"sha256": h("components/weights/model.safetensors")}}]
st["predicateType"] = "https://example.com/eval/v1"
json.dump(st, open(os.path.join(b, "attestations/eval.intoto.json"), "w"))
json.dump({"hello": 1}, open(os.path.join(b, "attestations/odd.intoto.json"), "w"))
meta = json.load(open(os.path.join(b, "bundle.json")))
files = []
for root, _, fs in os.walk(b):
    for f in fs:
        p = os.path.relpath(os.path.join(root, f), b)
        if p != "bundle.json":
            files.append({"path": p, "size": os.path.getsize(os.path.join(b, p)), "sha256": h(p), "mode": "0644"})
meta["files"] = sorted(files, key=lambda x: x["path"].encode())
json.dump(meta, open(os.path.join(b, "bundle.json"), "w"), indent=2, sort_keys=True)
PY
(cd "$B" && tar -cf - bundle.json attestations components manifest.json patches) | zstd -q >"$WORK/stale.fgb"
check "audit a bundle with stale statements" sh -c "'$FGPACK' audit '$WORK/stale.fgb' --json >'$WORK/s.json'"
check "stale statements: a provenance-mismatch warning each" test "$(jget "$WORK/s.json" "sorted(str(w['key']) for w in d['warnings'] if w['code']=='provenance-mismatch')")" = \
	"['DRAFTER_BUCKET', 'None']"
check_grep "the warning names the subject and both digests" "components/drafter/provenance.intoto.json does not describe components/drafter \\(subject model.safetensors has sha256 cdcdcdcdcdcdcdcd… but the bundle holds" "$WORK/s.json"
check "stale statements: drafter and bundle not derived from them" test "$(jget "$WORK/s.json" "[str(c.get('derived_from')) for c in d['components'] if c['key'] in ('DRAFTER_BUCKET', 'bundle')]")" = "['None', 'None']"
check "stale statements: the weights keep their own" test "$(jget "$WORK/s.json" "[c['derived_from']['statement'] for c in d['components'] if c['key']=='WEIGHTS_BUCKET'][0]")" = \
	"components/weights/provenance.intoto.json"
check_grep "another predicate type is said not read" "attestations/eval.intoto.json: predicateType https://example.com/eval/v1 is not SLSA provenance v1, not read" "$WORK/s.json"
check_grep "no in-toto statement is said not read" "attestations/odd.intoto.json: not an in-toto statement, not read" "$WORK/s.json"

# online: a local hub serves the bucket; the lock matches, then the bucket changes
mkdir -p "$WORK/bk/w"
echo one >"$WORK/bk/w/a.txt"; echo two >"$WORK/bk/w/b.txt"
python3 tests/servers/hubtree.py "$WORK/site" --bucket ns1/bk="$WORK/bk" >/dev/null
PORT=$(free_port)
python3 tests/servers/faultd.py --port "$PORT" --root "$WORK/site" --log "$WORK/hub.log" >/dev/null 2>&1 &
HPID=$!
at_exit "kill $HPID 2>/dev/null"
wait_port "$PORT"
python3 - "$WORK" <<'PY'
import hashlib, json, os, sys
w = sys.argv[1]
m = {"name": "online", "env": {"WEIGHTS_BUCKET": "hf://buckets/ns1/bk/w"}}
text = json.dumps(m).encode()
open(os.path.join(w, "online.json"), "wb").write(text)
files, lines = [], b""
for f in ["a.txt", "b.txt"]:
    data = open(os.path.join(w, "bk/w", f), "rb").read()
    sha = hashlib.sha256(data).hexdigest()
    xet = hashlib.sha256(b"xet\0" + data).hexdigest()
    files.append({"path": f, "size": len(data), "sha256": sha, "remote": {"xet_hash": xet}})
    lines += b"%s %d %s\n" % (sha.encode(), len(data), f.encode())
lock = {"schema": 1, "manifests": {"online.json": {"sha256": hashlib.sha256(text).hexdigest(), "name": "online",
        "components": {"WEIGHTS_BUCKET": {"role": "weights", "kind": "bucket", "source": "hf://buckets/ns1/bk/w",
        "owner": "ns1/bk", "pins": {}, "files": files, "tree_digest": hashlib.sha256(lines).hexdigest()}}}}}
json.dump(lock, open(os.path.join(w, "buckets.lock"), "w"), indent=2, sort_keys=True)
PY
export HF_ENDPOINT=http://127.0.0.1:$PORT
check "online audit, bucket unchanged" sh -c "'$FGPACK' audit '$WORK/buckets.lock' --online --json >'$WORK/on1.json'"
check "no bucket-changed warning while it matches" test "$(jget "$WORK/on1.json" "[w['code'] for w in d['warnings']], d['online']")" = "([], True)"
echo 'two, edited' >"$WORK/bk/w/b.txt"
rm -rf "$WORK/site"; python3 tests/servers/hubtree.py "$WORK/site" --bucket ns1/bk="$WORK/bk" >/dev/null
check "online audit after the bucket changed" sh -c "'$FGPACK' audit '$WORK/buckets.lock' --online --json >'$WORK/on2.json'"
check "lock older than the bucket: warning names the file" test "$(jget "$WORK/on2.json" "[(w['code'], 'b.txt changed' in w['message']) for w in d['warnings']]")" = "[('bucket-changed', True)]"
check "offline audit of the lock makes no request" sh -c "n=\$(wc -l <'$WORK/hub.log'); '$FGPACK' audit '$WORK/buckets.lock' >/dev/null && test \$(wc -l <'$WORK/hub.log') -eq \$n"
finish
