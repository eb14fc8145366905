#!/bin/sh
# manifests_community.sh - challenge manifests other than the real example
# (tests/fixtures/manifests/community-*.json, see its README): no drafter, a
# drafter repo at refs/pr/3, every component in its own LOCAL_*_DIR, a drafter
# named only inside SPECULATIVE_CONFIG, odd env order and unknown keys. Each is
# read by `fgpack audit --json` (components, roles, targets, pins, no network),
# locked with `fgpack lock --json` against faultd.py serving every bucket and
# repo they name, and pulled --into its target paths. Then malformed variants
# of them: each refused with exit 1 and one line naming the field.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
F=$TOP/tests/fixtures/manifests
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
hub=$WORK/hub
c1=0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c
c2=5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a
python3 - "$hub" <<'PY'
import os, sys
hub = sys.argv[1]
def put(rel, data):
    p = os.path.join(hub, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())
gc = 'buckets/gemma-challenge/'
for b in ('gemma-plain-owl/weights/int4-g128', 'gemma-mist-fox/weights/w4a16', 'gemma-river-otter/weights/int4',
          'gemma-tide-crab/weights/int4-v2', 'gemma-odd-heron/w'):
    put(gc + b + '/config.json', '{"model_type": "gemma4"}\n')
    put(gc + b + '/model.safetensors', os.urandom(40000))
# the drafter whose sha256 community-multi-local.json pins (in capitals)
put(gc + 'gemma-river-otter/drafter/ep3/model.safetensors', bytes((i * 31 + 7) % 256 for i in range(150000)))
put(gc + 'gemma-river-otter/drafter/ep3/config.json', '{"model_type": "gemma4_assistant"}\n')
put(gc + 'gemma-river-otter/keepset/keep.json', '{"keep_ids": [1, 2, 3]}\n')
put(gc + 'gemma-river-otter/patches/v2/fa2_patch.py', 'PATCH = 1\n')
put(gc + 'gemma-river-otter/patches/v2/serve_patch.py', 'PATCH = 2\n')
put(gc + 'gemma-river-otter/other/not-asked.bin', 'x')
put(gc + 'gemma-odd-heron/keepset-12k/keepset.json', '{"keep_ids": [4]}\n')
# a folder with nothing in it: its listing is [] (as a bucket answers for a
# path that is only a mistyped prefix)
os.makedirs(os.path.join(hub, gc + 'gemma-plain-owl/weights/int4-g128-v2'))
# siblings whose names begin with a component's folder name: the Hub's tree
# prefix matches as a string (hubtree.py --lexical), so they come back in
# the listing of the component's folder and must be left out
put(gc + 'gemma-plain-owl/weights/int4-g128-old/model.safetensors', os.urandom(1000))
put(gc + 'gemma-plain-owl/weights/int4-g128.bak', 'old\n')
put(gc + 'gemma-river-otter/drafter/ep30/model.safetensors', os.urandom(1000))
put('models/google/gemma-4-E4B-it/config.json', '{"model_type": "gemma4"}\n')
put('models/google/gemma-4-E4B-it/model.safetensors', os.urandom(30000))
put('models/gemma-challenge/mtp-drafter-k5/config.json', '{"model_type": "gemma4_assistant"}\n')
put('models/gemma-challenge/mtp-drafter-k5/model.safetensors', os.urandom(20000))
PY
args=""
for b in gemma-plain-owl gemma-mist-fox gemma-river-otter gemma-tide-crab gemma-odd-heron; do
	args="$args --bucket gemma-challenge/$b=$hub/buckets/gemma-challenge/$b"
done
python3 $S/hubtree.py "$WORK/site" $args --model google/gemma-4-E4B-it@$c1="$hub/models/google/gemma-4-E4B-it" \
	--model gemma-challenge/mtp-drafter-k5@$c2="$hub/models/gemma-challenge/mtp-drafter-k5" --rev refs/pr/3 --rev dev/int4 \
	--page-size 2 --mtime 2026-01-01T00:00:00.000Z --lexical
check "the listing of weights/int4-g128 holds its siblings int4-g128-old/ and int4-g128.bak (as the Hub's)" \
	sh -c "cat '$WORK/site/api/buckets/gemma-challenge/gemma-plain-owl/tree/weights/int4-g128/'_tree*.json | grep -q 'int4-g128-old/model' &&
	       cat '$WORK/site/api/buckets/gemma-challenge/gemma-plain-owl/tree/weights/int4-g128/'_tree*.json | grep -q 'int4-g128.bak'"
port=$(free_port)
python3 $S/faultd.py --port "$port" --root "$WORK/site" --log "$WORK/f.log" 2>"$WORK/faultd.err" &
at_exit "kill $!"
wait_port "$port" || { not_ok "faultd starts"; finish; exit 1; }
export HF_ENDPOINT="http://127.0.0.1:$port" FGPACK_HOME="$WORK/store"
unset HF_HUB_OFFLINE HF_TOKEN

# expect NAME FILE PYTHON: runs PYTHON with d = the JSON document in FILE
expect() {
	check "$1" python3 -c "import json, sys
d = json.load(open(sys.argv[1]))
comps = {c['key']: c for c in d['components']}
$3" "$2"
}
# audit NAME: fgpack audit --json of fixture community-NAME.json into $WORK/NAME.audit
audit() {
	"$FGPACK" audit "$F/community-$1.json" --json >"$WORK/$1.audit" 2>"$WORK/$1.audit.err"
}
# lock NAME: fgpack lock --json (stdout) into $WORK/NAME.json, lock file $WORK/NAME.lock;
# then lock --check against the same remote must find it up to date
lock() {
	"$FGPACK" lock "$F/community-$1.json" -o "$WORK/$1.lock" --json >"$WORK/$1.json" 2>"$WORK/$1.err" &&
		"$FGPACK" lock "$F/community-$1.json" -o "$WORK/$1.lock" --check --json >"$WORK/$1.check" 2>>"$WORK/$1.err" &&
		python3 -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if d['up_to_date'] else 1)" "$WORK/$1.check"
}

check "no-drafter: audit" audit no-drafter
expect "no-drafter: the model and the weights, no drafter (SPECULATIVE_CONFIG and DRAFTER_BUCKET empty)" "$WORK/no-drafter.audit" "
assert sorted(comps) == ['WEIGHTS_BUCKET', 'model_id'], sorted(comps)
assert comps['WEIGHTS_BUCKET']['role'] == 'weights' and comps['WEIGHTS_BUCKET']['target'] == '/tmp/int4-g128'
assert comps['model_id']['role'] == 'model' and comps['model_id']['kind'] == 'model'"
check "no-drafter: lock" lock no-drafter
expect "no-drafter: lock --json: two components, the model at its commit" "$WORK/no-drafter.json" "
assert d['schema'] == 1 and sorted(comps) == ['WEIGHTS_BUCKET', 'model_id'], sorted(comps)
assert comps['model_id']['revision'] == '$c1' and comps['model_id']['files'] == 2
assert comps['WEIGHTS_BUCKET']['files'] == 2 and comps['WEIGHTS_BUCKET']['role'] == 'weights'"

check "drafter-repo-rev: audit" audit drafter-repo-rev
expect "drafter-repo-rev: DRAFTER_MODEL is the drafter at refs/pr/3, placed at SPECULATIVE_CONFIG.model" "$WORK/drafter-repo-rev.audit" "
c = comps['DRAFTER_MODEL']
assert c['role'] == 'drafter' and c['kind'] == 'model' and c['source'] == 'hf://gemma-challenge/mtp-drafter-k5@refs/pr/3', c
assert c['target'] == '/tmp/mtp-k5', c
assert sorted(comps) == ['DRAFTER_MODEL', 'WEIGHTS_BUCKET', 'model_id'], sorted(comps)"
check "drafter-repo-rev: lock" lock drafter-repo-rev
expect "drafter-repo-rev: lock --json pins the drafter to the commit behind refs/pr/3" "$WORK/drafter-repo-rev.json" "
assert comps['DRAFTER_MODEL']['revision'] == '$c2' and comps['DRAFTER_MODEL']['files'] == 2, comps['DRAFTER_MODEL']"
check_grep "refs/pr/3 listed as one encoded segment" '"/api/models/gemma-challenge/mtp-drafter-k5/tree/refs%2Fpr%2F3\?' "$WORK/f.log"
check_grep "refs/pr/3 resolved as one encoded segment" '"/gemma-challenge/mtp-drafter-k5/resolve/refs%2Fpr%2F3/' "$WORK/f.log"
check "drafter-repo-rev: pull --into" "$FGPACK" pull "$F/community-drafter-repo-rev.json" --lock "$WORK/drafter-repo-rev.lock" --into "$WORK/o2"
check "drafter-repo-rev: the drafter at /tmp/mtp-k5" cmp "$hub/models/gemma-challenge/mtp-drafter-k5/model.safetensors" "$WORK/o2/tmp/mtp-k5/model.safetensors"

check "multi-local: audit" audit multi-local
expect "multi-local: five components, each at its own LOCAL_*_DIR; the pin in capitals read" "$WORK/multi-local.audit" "
want = {'model_id': ('model', None), 'WEIGHTS_BUCKET': ('weights', '/tmp/otter/int4'),
        'DRAFTER_BUCKET': ('drafter', '/tmp/otter/drafter'), 'KEEPSET_BUCKET': ('keepset', '/tmp/otter/keepset'),
        'PATCH_BUCKET': ('patches', '/tmp/otter/patches')}
assert {k: (c['role'], c['target']) for k, c in comps.items()} == want, comps
assert comps['DRAFTER_BUCKET']['pin_sha256'] == '044818450f0e62a26b08a573a1b759ddb3928dab94d38106bdb87f126f2f30c2'
assert comps['DRAFTER_BUCKET']['pin'] == 'manifest:DRAFTER_SHA256'"
check "multi-local: lock (the pin holds)" lock multi-local
expect "multi-local: lock --json file counts" "$WORK/multi-local.json" "
assert {k: c['files'] for k, c in comps.items()} == {'model_id': 2, 'WEIGHTS_BUCKET': 2, 'DRAFTER_BUCKET': 2, 'KEEPSET_BUCKET': 1, 'PATCH_BUCKET': 2}, comps"
check "multi-local: pull --into" "$FGPACK" pull "$F/community-multi-local.json" --lock "$WORK/multi-local.lock" --into "$WORK/o3"
o=$WORK/o3/tmp/otter
check "multi-local: drafter at LOCAL_DRAFTER_DIR" cmp "$hub/buckets/gemma-challenge/gemma-river-otter/drafter/ep3/model.safetensors" "$o/drafter/model.safetensors"
check "multi-local: keepset at LOCAL_KEEPSET_DIR (PCK04_KEEPSET lies inside it)" cmp "$hub/buckets/gemma-challenge/gemma-river-otter/keepset/keep.json" "$o/keepset/keep.json"
check "multi-local: patches at LOCAL_PATCH_DIR" cmp "$hub/buckets/gemma-challenge/gemma-river-otter/patches/v2/fa2_patch.py" "$o/patches/fa2_patch.py"
check "multi-local: weights at LOCAL_MODEL_DIR" cmp "$hub/buckets/gemma-challenge/gemma-river-otter/weights/int4/model.safetensors" "$o/int4/model.safetensors"
if [ ! -e "$o/other" ] && [ ! -e "$o/int4/other" ]; then ok "multi-local: bucket files outside the components left out"; else not_ok "multi-local: bucket files outside the components left out"; fi

check "spec-repo: audit (port written as a string)" audit spec-repo
expect "spec-repo: the drafter named only in SPECULATIVE_CONFIG is a component" "$WORK/spec-repo.audit" "
c = comps['SPECULATIVE_CONFIG.model']
assert c['role'] == 'drafter' and c['kind'] == 'model' and c['source'] == 'gemma-challenge/mtp-drafter-k5', c
assert sorted(comps) == ['SPECULATIVE_CONFIG.model', 'WEIGHTS_BUCKET', 'model_id'], sorted(comps)
kinds = [x['kind'] for x in d['dependencies']]
assert kinds == ['pin', 'url', 'unpinned', 'unpinned'], kinds"
check "spec-repo: lock" lock spec-repo
expect "spec-repo: lock --json pins that drafter to its commit" "$WORK/spec-repo.json" "
assert comps['SPECULATIVE_CONFIG.model']['revision'] == '$c2' and comps['SPECULATIVE_CONFIG.model']['role'] == 'drafter'"

check "odd-env: audit" audit odd-env
expect "odd-env: a trailing '/' dropped, a local DRAFTER_REPO and an unrelated *_SHA256 are no components" "$WORK/odd-env.audit" "
assert sorted(comps) == ['LM_HEAD_KEEPSET_BUCKET', 'WEIGHTS_BUCKET'], sorted(comps)
assert comps['LM_HEAD_KEEPSET_BUCKET']['role'] == 'keepset' and comps['LM_HEAD_KEEPSET_BUCKET']['target'] == '/tmp/heron-12k'
assert comps['WEIGHTS_BUCKET']['source'] == 'hf://buckets/gemma-challenge/gemma-odd-heron/w/'
assert not any(c['pin'] for c in comps.values())"
check "odd-env: lock" lock odd-env
expect "odd-env: lock --json" "$WORK/odd-env.json" "
assert {k: c['files'] for k, c in comps.items()} == {'WEIGHTS_BUCKET': 2, 'LM_HEAD_KEEPSET_BUCKET': 1}, comps"
check "path-keys: audit" audit path-keys
expect "path-keys: MODEL_PATH, DRAFTER_MODEL (a path) and KEEPSET_DEST are the targets; no search list, no cache folder" "$WORK/path-keys.audit" "
want = {'model_id': ('model', None), 'WEIGHTS_BUCKET': ('weights', '/tmp/crab/w'),
        'DRAFTER_REPO': ('drafter', '/tmp/crab/drafter'), 'KEEPSET_BUCKET': ('keepset', '/tmp/crab/keep')}
assert {k: (c['role'], c.get('target')) for k, c in comps.items()} == want, comps"
check "path-keys: lock" lock path-keys
check "path-keys: pull --into" "$FGPACK" pull "$F/community-path-keys.json" --lock "$WORK/path-keys.lock" --into "$WORK/o20"
o=$WORK/o20/tmp
check "path-keys: weights at MODEL_PATH" cmp "$hub/buckets/gemma-challenge/gemma-tide-crab/weights/int4-v2/model.safetensors" "$o/crab/w/model.safetensors"
check "path-keys: the drafter repo at DRAFTER_MODEL" cmp "$hub/models/gemma-challenge/mtp-drafter-k5/model.safetensors" "$o/crab/drafter/model.safetensors"
check "path-keys: LM_HEAD_KEEPSET_FILE is the file KEEPSET_DEST holds" cmp "$hub/buckets/gemma-challenge/gemma-odd-heron/keepset-12k/keepset.json" "$o/crab/keep/keepset.json"
if [ ! -e "$o/crab-triton" ] && [ ! -e "$WORK/o20/usr" ] && [ ! -e "$o/crab/keep/keepset.json/keepset.json" ]; then
	ok "path-keys: nothing placed at TRITON_CACHE_DIR or LD_LIBRARY_PATH, nor inside the keepset file"
else
	not_ok "path-keys: nothing placed at TRITON_CACHE_DIR or LD_LIBRARY_PATH, nor inside the keepset file"; find "$WORK/o20" | sed 's/^/#   /'
fi

# a keepset shared as one file (keepset.json) and PCK04_KEEPSET naming where
# the serve script reads it, outside every folder target: pull puts that
# file there (it used to go to _components/LM_HEAD_KEEPSET_BUCKET only)
check "keepset-file: audit" audit keepset-file
expect "keepset-file: the keepset's target is the folder of PCK04_KEEPSET" "$WORK/keepset-file.audit" "
assert comps['LM_HEAD_KEEPSET_BUCKET']['role'] == 'keepset' and comps['LM_HEAD_KEEPSET_BUCKET']['target'] == '/tmp/owl-keep', comps
assert comps['WEIGHTS_BUCKET']['target'] == '/tmp/owl-int4', comps"
check "keepset-file: lock" lock keepset-file
check "keepset-file: pull --into" "$FGPACK" pull "$F/community-keepset-file.json" --lock "$WORK/keepset-file.lock" --into "$WORK/o13"
check "  the keepset at PCK04_KEEPSET" cmp "$hub/buckets/gemma-challenge/gemma-odd-heron/keepset-12k/keepset.json" "$WORK/o13/tmp/owl-keep/keepset.json"
if [ ! -e "$WORK/o13/_components/LM_HEAD_KEEPSET_BUCKET" ] && [ ! -e "$WORK/o13/tmp/owl-keep/keepset.json/keepset.json" ]; then
	ok "  no copy under _components/LM_HEAD_KEEPSET_BUCKET, nothing inside the keepset file"
else
	not_ok "  no copy under _components/LM_HEAD_KEEPSET_BUCKET, nothing inside the keepset file"; find "$WORK/o13" | sed 's/^/#   /'
fi

# the same keepset file read from KEEPSET_PATH: the last word of
# LM_HEAD_KEEPSET_BUCKET's stem, not its first (rule 5); pull puts the file
# there, and nothing at TRITON_CACHE_DIR
check "keepset-path: audit" audit keepset-path
expect "keepset-path: the keepset's target is the folder of KEEPSET_PATH" "$WORK/keepset-path.audit" "
assert comps['LM_HEAD_KEEPSET_BUCKET']['target'] == '/tmp/owl-keepset', comps
assert comps['WEIGHTS_BUCKET']['target'] == '/tmp/owl-int4', comps"
check "keepset-path: lock" lock keepset-path
check "keepset-path: pull --into" "$FGPACK" pull "$F/community-keepset-path.json" --lock "$WORK/keepset-path.lock" --into "$WORK/o14"
check "  the keepset at KEEPSET_PATH" cmp "$hub/buckets/gemma-challenge/gemma-odd-heron/keepset-12k/keepset.json" "$WORK/o14/tmp/owl-keepset/keepset.json"
if [ ! -e "$WORK/o14/_components/LM_HEAD_KEEPSET_BUCKET" ] && [ ! -e "$WORK/o14/tmp/owl-triton" ]; then
	ok "  no copy under _components/LM_HEAD_KEEPSET_BUCKET, nothing at TRITON_CACHE_DIR"
else
	not_ok "  no copy under _components/LM_HEAD_KEEPSET_BUCKET, nothing at TRITON_CACHE_DIR"; find "$WORK/o14" | sed 's/^/#   /'
fi

check "the five manifests' entries share one lock file" sh -c "for m in no-drafter drafter-repo-rev multi-local spec-repo odd-env; do
	'$FGPACK' lock '$F/community-'\$m.json -o '$WORK/all.lock' 2>/dev/null || exit 1; done
	python3 -c \"import json, sys; d = json.load(open(sys.argv[1])); assert len(d['manifests']) == 5, list(d['manifests'])\" '$WORK/all.lock'"

# target paths written as a shell or Python reads them: a trailing '/', a
# doubled '/', "./" name the same folder; ".." is refused before anything is
# placed, and nothing lands outside --into
variant() { # variant OUT PYTHON-EDIT: community-no-drafter.json edited (dict m)
	python3 -c "import json, sys
m = json.load(open(sys.argv[1]))
$2
json.dump(m, open(sys.argv[2], 'w'))" "$F/community-no-drafter.json" "$1"
}
# a one-file source whose target by stem (rule 2) names that file: the
# file lands at the path, not in a folder of the file's name
variant "$WORK/t0.json" "m['env']['ROUTER_BUCKET'] = 'hf://buckets/gemma-challenge/gemma-odd-heron/keepset-12k/keepset.json'
m['env']['ROUTER_PATH'] = '/tmp/router/keepset.json'"
check "a file by stem (ROUTER_PATH naming the bucket's file): pull --into" "$FGPACK" pull "$WORK/t0.json" --lock "$WORK/t0.lock" --into "$WORK/o15"
check "  the file at ROUTER_PATH" cmp "$hub/buckets/gemma-challenge/gemma-odd-heron/keepset-12k/keepset.json" "$WORK/o15/tmp/router/keepset.json"
variant "$WORK/t1.json" "m['env']['LOCAL_MODEL_DIR'] = '/tmp//int4-g128/'"
check "a target with a trailing and a doubled '/': pull --into" "$FGPACK" pull "$WORK/t1.json" --lock "$WORK/t.lock" --into "$WORK/o6"
check "  the weights at DIR/tmp/int4-g128" cmp "$hub/buckets/gemma-challenge/gemma-plain-owl/weights/int4-g128/model.safetensors" "$WORK/o6/tmp/int4-g128/model.safetensors"
variant "$WORK/t2.json" "m['env']['LOCAL_MODEL_DIR'] = './w/./int4'"
check "a relative target with './': pull --into" "$FGPACK" pull "$WORK/t2.json" --lock "$WORK/t.lock" --into "$WORK/o7"
check "  the weights at DIR/w/int4" cmp "$hub/buckets/gemma-challenge/gemma-plain-owl/weights/int4-g128/config.json" "$WORK/o7/w/int4/config.json"
variant "$WORK/t3.json" "m['env']['LOCAL_MODEL_DIR'] = '/tmp/../../escaped'"
mkdir -p "$WORK/o8/in"
"$FGPACK" pull "$WORK/t3.json" --lock "$WORK/t.lock" --into "$WORK/o8/in" 2>&1 | grep -v ': warning: dependency' >"$WORK/t3.out"
"$FGPACK" pull "$WORK/t3.json" --lock "$WORK/t.lock" --into "$WORK/o8/in" >/dev/null 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$WORK/t3.out")" -eq 1 ] && grep -q "LOCAL_MODEL_DIR\|WEIGHTS_BUCKET" "$WORK/t3.out" &&
   grep -q "'\.\.'" "$WORK/t3.out" && [ ! -e "$WORK/o8/escaped" ] && [ ! -e "$WORK/escaped" ]; then
	ok "a target with '..': exit 1, one line, nothing outside DIR: $(cat "$WORK/t3.out")"
else
	not_ok "a target with '..': exit 1, one line, nothing outside DIR (exit $rc)"; sed 's/^/#   /' "$WORK/t3.out"
fi

variant "$WORK/t4.json" "m['env']['WEIGHTS_BUCKET'] += '-v2'"
"$FGPACK" pull "$WORK/t4.json" --lock "$WORK/t4.lock" --into "$WORK/o9" 2>&1 | grep -v ': warning: dependency' >"$WORK/t4.out"
"$FGPACK" pull "$WORK/t4.json" --lock "$WORK/t4.lock" --into "$WORK/o9" >/dev/null 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$WORK/t4.out")" -eq 1 ] && grep -q "WEIGHTS_BUCKET: .*int4-g128-v2 holds no files" "$WORK/t4.out" &&
   [ ! -e "$WORK/t4.lock" ] && [ ! -e "$WORK/o9" ]; then
	ok "a bucket folder listed as empty: exit 1, one line, no lock, nothing placed: $(cat "$WORK/t4.out")"
else
	not_ok "a bucket folder listed as empty: exit 1, one line, no lock, nothing placed (exit $rc)"; sed 's/^/#   /' "$WORK/t4.out"
fi
# with --locked, a folder emptied since the lock is a change (exit 3)
variant "$WORK/t4b.json" "m['env']['WEIGHTS_BUCKET'] += '-v2'"
python3 - "$WORK/t.lock" "$WORK/t4b.lock" "$WORK/t1.json" "$WORK/t4b.json" <<'PY'
import hashlib, json, sys
d = json.load(open(sys.argv[1]))
e = next(v for k, v in d['manifests'].items() if k.endswith('t1.json'))
e['sha256'] = hashlib.sha256(open(sys.argv[4], 'rb').read()).hexdigest()
e['components']['WEIGHTS_BUCKET']['source'] = json.load(open(sys.argv[4]))['env']['WEIGHTS_BUCKET']
json.dump({'manifests': {'t4b.json': e}, 'schema': d['schema']}, open(sys.argv[2], 'w'), indent=2, sort_keys=True)
PY
check_exit "--locked, the folder emptied since the lock: exit 3" 3 "$FGPACK" pull "$WORK/t4b.json" --lock "$WORK/t4b.lock" --locked
check_grep "  named as a change: N file(s) in the lock, 0 on the remote" "WEIGHTS_BUCKET: 2 file\(s\) in the lock, 0 on the remote" "$WORK/.out"

# two components whose targets are one folder: the same bytes at one path
# are fine, different bytes are refused before anything is placed (else the
# component placed last would silently win)
variant "$WORK/t5.json" "m['env']['KEEPSET_BUCKET'] = 'hf://buckets/gemma-challenge/gemma-odd-heron/w'; m['env']['LOCAL_KEEPSET_DIR'] = '/tmp/int4-g128/'"
"$FGPACK" pull "$WORK/t5.json" --lock "$WORK/t5.lock" --into "$WORK/o10" 2>&1 | grep -v ': warning: dependency' >"$WORK/t5.out"
"$FGPACK" pull "$WORK/t5.json" --lock "$WORK/t5.lock" --into "$WORK/o10" >/dev/null 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$WORK/t5.out")" -eq 1 ] &&
   grep -q "KEEPSET_BUCKET and WEIGHTS_BUCKET both place .*/tmp/int4-g128/model.safetensors, with different content" "$WORK/t5.out" &&
   [ -z "$(find "$WORK/o10" -type f 2>/dev/null)" ]; then
	ok "two components placing different bytes at one path: exit 1, one line, nothing placed: $(cat "$WORK/t5.out")"
else
	not_ok "two components placing different bytes at one path: exit 1, one line, nothing placed (exit $rc)"; sed 's/^/#   /' "$WORK/t5.out"
	find "$WORK/o10" -type f | sed 's/^/#   /'
fi
variant "$WORK/t6.json" "m['env']['KEEPSET_BUCKET'] = 'hf://buckets/gemma-challenge/gemma-plain-owl/weights/int4-g128/config.json'; m['env']['LOCAL_KEEPSET_DIR'] = '/tmp/int4-g128'"
check "two components placing the same bytes at one path: pull --into" "$FGPACK" pull "$WORK/t6.json" --lock "$WORK/t6.lock" --into "$WORK/o11"
check "  the file is there once" cmp "$hub/buckets/gemma-challenge/gemma-plain-owl/weights/int4-g128/config.json" "$WORK/o11/tmp/int4-g128/config.json"

# a revision written percent-encoded, as huggingface_hub's HfFileSystem
# writes one holding '/' and reads it back (unquote): a branch dev/int4 as
# @dev%2Fint4 (one segment, so the path after it is unambiguous), refs/pr/3
# as @refs%2Fpr%2F3
check "encoded-rev: audit" audit encoded-rev
expect "encoded-rev: DRAFTER_MODEL at the branch dev/int4 (written @dev%2Fint4), placed at SPECULATIVE_CONFIG.model" "$WORK/encoded-rev.audit" "
c = comps['DRAFTER_MODEL']
assert c['role'] == 'drafter' and c['kind'] == 'model' and c['source'] == 'hf://gemma-challenge/mtp-drafter-k5@dev%2Fint4', c
assert c['target'] == '/tmp/mtp-k5-dev', c"
check "encoded-rev: lock" lock encoded-rev
expect "encoded-rev: lock --json pins the drafter to the commit behind dev/int4" "$WORK/encoded-rev.json" "
assert comps['DRAFTER_MODEL']['revision'] == '$c2' and comps['DRAFTER_MODEL']['files'] == 2, comps['DRAFTER_MODEL']"
check_grep "  dev/int4 listed as one encoded segment" '"/api/models/gemma-challenge/mtp-drafter-k5/tree/dev%2Fint4\?' "$WORK/f.log"
check "encoded-rev: pull --into" "$FGPACK" pull "$F/community-encoded-rev.json" --lock "$WORK/encoded-rev.lock" --into "$WORK/o12"
check "  the drafter at /tmp/mtp-k5-dev" cmp "$hub/models/gemma-challenge/mtp-drafter-k5/model.safetensors" "$WORK/o12/tmp/mtp-k5-dev/model.safetensors"
variant "$WORK/r2.json" "m['env']['DRAFTER_MODEL'] = 'hf://gemma-challenge/mtp-drafter-k5@refs%2Fpr%2F3'"
check "a revision written encoded (@refs%2Fpr%2F3): lock, the commit behind refs/pr/3" sh -c "'$FGPACK' lock '$WORK/r2.json' -o '$WORK/r2.lock' &&
	grep -q '\"revision\": \"$c2\"' '$WORK/r2.lock'"

# malformed variants: bad NAME BASE PYTHON-EDIT REGEX: community-BASE.json edited
# by PYTHON-EDIT (on the dict m) must fail with exit 1 and one line matching REGEX
bad() {
	python3 -c "import json, sys
m = json.load(open(sys.argv[1]))
$3
json.dump(m, open(sys.argv[2], 'w'))" "$F/community-$2.json" "$WORK/bad.json"
	"$FGPACK" audit "$WORK/bad.json" >"$WORK/bad.out" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && [ "$(wc -l <"$WORK/bad.out")" -eq 1 ] && grep -Eq -- "^fgpack audit: .*bad.json: $4" "$WORK/bad.out"; then
		ok "$1: $(cat "$WORK/bad.out")"
	else
		not_ok "$1: exit 1 and one line matching /$4/ (exit $rc)"; sed 's/^/#   /' "$WORK/bad.out" | tail -3
	fi
}
bad "a number in env" no-drafter "m['env']['MAX_NUM_SEQS'] = 1" "env\.MAX_NUM_SEQS: expected a string, got number"
bad "SPECULATIVE_CONFIG as an object" multi-local "m['env']['SPECULATIVE_CONFIG'] = {'method': 'mtp'}" \
	"env\.SPECULATIVE_CONFIG: expected a string holding JSON"
bad "SPECULATIVE_CONFIG not JSON" multi-local "m['env']['SPECULATIVE_CONFIG'] = '{method: mtp}'" "env\.SPECULATIVE_CONFIG: "
bad "num_speculative_tokens a word" drafter-repo-rev "m['env']['SPECULATIVE_CONFIG'] = '{\"num_speculative_tokens\": \"five\"}'" \
	"env\.SPECULATIVE_CONFIG\.num_speculative_tokens: expected an integer"
bad "a pin of 63 hex digits" multi-local "m['env']['DRAFTER_SHA256'] = m['env']['DRAFTER_SHA256'][:63]" \
	"env\.DRAFTER_SHA256: expected 64 hex digits"
bad "a bucket written as a repo id" no-drafter "m['env']['WEIGHTS_BUCKET'] = 'gemma-challenge/gemma-plain-owl'" \
	"env\.WEIGHTS_BUCKET: \"gemma-challenge/gemma-plain-owl\": write hf://buckets/gemma-challenge/gemma-plain-owl for a bucket"
bad "a bucket without its name" no-drafter "m['env']['WEIGHTS_BUCKET'] = 'hf://buckets/gemma-challenge'" \
	"env\.WEIGHTS_BUCKET: hf://buckets/gemma-challenge: missing bucket name"
bad "an s3:// bucket" no-drafter "m['env']['WEIGHTS_BUCKET'] = 's3://gemma/w'" "env\.WEIGHTS_BUCKET: s3://gemma/w: unknown scheme"
bad "a bare repo id with @revision" drafter-repo-rev "m['env']['DRAFTER_MODEL'] = 'gemma-challenge/mtp-drafter-k5@v2'" \
	"env\.DRAFTER_MODEL: gemma-challenge/mtp-drafter-k5@v2: a bare repo id takes no revision \(write hf://gemma-challenge/mtp-drafter-k5@v2"
bad "a pip option among the dependencies" spec-repo "m['dependencies'].insert(0, '--extra-index-url https://download.pytorch.org/whl/cu129')" \
	"dependencies\[0\]: \"--extra-index-url https://download.pytorch.org/whl/cu129\": a pip option, not a requirement"
bad "dependencies as one string" spec-repo "m['dependencies'] = 'transformers==5.9.0'" "dependencies: expected an array of strings, got string"
bad "a port that is no number" spec-repo "m['port'] = '80a'" "port: expected an integer 0\.\.65535"
bad "a port out of range" no-drafter "m['port'] = 70000" "port: expected an integer 0\.\.65535"
bad "model_id a number" no-drafter "m['model_id'] = 4" "model_id: expected a string, got number"
bad "env an array" odd-env "m['env'] = [m['env']]" "env: expected an object of strings, got array"
bad "the top a list" odd-env "m = [m]" "expected a JSON object at the top, got array"
# a manifest saved as Latin-1 (the "é" of its description one byte 0xe9):
# JSON must be UTF-8 and Python's json.load(open(...)) refuses it, so lock
# refuses it too, in one line, the lock file there before left as it was
# (it used to be locked, the byte copied into buckets.lock as it was)
python3 -c "import json, sys
m = json.load(open(sys.argv[1]))
m['description'] = 'caf\u00e9'
open(sys.argv[2], 'wb').write(json.dumps(m, ensure_ascii=False, indent=2).encode('latin-1'))" "$F/community-no-drafter.json" "$WORK/latin1.json"
cp "$WORK/no-drafter.lock" "$WORK/latin1.lock"
"$FGPACK" lock "$WORK/latin1.json" -o "$WORK/latin1.lock" >"$WORK/latin1.out" 2>&1
rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$WORK/latin1.out")" -eq 1 ] && grep -q "latin1.json: not UTF-8 text (line [0-9]*, byte [0-9]*: 0xe9)" "$WORK/latin1.out" &&
   cmp -s "$WORK/no-drafter.lock" "$WORK/latin1.lock"; then
	ok "a manifest in Latin-1: exit 1, one line, the lock untouched: $(cat "$WORK/latin1.out")"
else
	not_ok "a manifest in Latin-1: exit 1, one line, the lock untouched (exit $rc)"; sed 's/^/#   /' "$WORK/latin1.out" | tail -3
fi
finish
