#!/bin/sh
# pull_hf_cache.sh - a model file already in huggingface_hub's cache
# (models--<ns>--<repo>/blobs/<sha256>, what `hf download` and transformers
# leave) is copied into the store, hashed on the way, instead of downloaded:
# online (no GET of it reaches the hub or the CDN) and offline (a locked pull
# with an empty store); a cache blob that does not hash to its name is left
# out (downloaded online, named as missing offline); FGPACK_NO_HF_CACHE=1
# turns it off. The cache is found as huggingface_hub finds it. Files already
# where --into places them (an earlier `hf download --local-dir`) are taken
# the same way.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
hub=$WORK/hub
c=0123456789abcdef0123456789abcdef01234567
M=$hub/models/acme/tiny@$c
mkdir -p "$M"
head -c 200000 /dev/urandom >"$M/model.safetensors"
# a config over the test hub's LFS threshold (1 KiB), so both files are LFS
python3 -c "import json; print(json.dumps({'model_type': 'gemma4', 'pad': 'x' * 2000}))" >"$M/config.json"
sha=$(sha256sum "$M/model.safetensors" | cut -d' ' -f1)
csha=$(sha256sum "$M/config.json" | cut -d' ' -f1)
ports=$(sh $S/serve-hub.sh start "$hub" "$WORK/st" --cdn '*.safetensors') || { not_ok "hub starts"; finish; exit 1; }
at_exit "sh $S/serve-hub.sh stop $WORK/st 2>/dev/null"
HF_ENDPOINT="http://127.0.0.1:${ports%% *}"
export HF_ENDPOINT FGPACK_NO_PROGRESS=1
unset HF_HUB_OFFLINE HF_TOKEN HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HOME FGPACK_NO_HF_CACHE
log=$WORK/st/nginx/access.log
cd "$WORK" || exit 1
printf '{"name": "t", "model_id": "acme/tiny", "env": {"LOCAL_MODEL_DIR": "/srv/m"}}\n' >m.json
# huggingface_hub's layout: the blob by its etag, a snapshot symlink to it
cache() { # cache DIR [CONTENT-FILE]: DIR/models--acme--tiny as hf download leaves it
	mkdir -p "$1/models--acme--tiny/blobs" "$1/models--acme--tiny/snapshots/$c" "$1/models--acme--tiny/refs"
	cp "${2:-$M/model.safetensors}" "$1/models--acme--tiny/blobs/$sha"
	cp "$M/config.json" "$1/models--acme--tiny/blobs/$csha"
	ln -sf "../../blobs/$sha" "$1/models--acme--tiny/snapshots/$c/model.safetensors"
	ln -sf "../../blobs/$csha" "$1/models--acme--tiny/snapshots/$c/config.json"
	printf '%s' "$c" >"$1/models--acme--tiny/refs/main"
}
cache "$WORK/xdg/huggingface/hub"

: >"$log"
FGPACK_HOME=$WORK/s1 XDG_CACHE_HOME=$WORK/xdg "$FGPACK" pull m.json --lock a.lock --into o1 --json >p1.json 2>p1.err
check_exit "first pull, the model file in \$XDG_CACHE_HOME/huggingface/hub" 0 sh -c "exit $?"
check "  placed intact" cmp "$M/model.safetensors" o1/srv/m/model.safetensors
check "  the JSON says both files came from the cache" python3 -c "
import json, os; f = json.load(open('p1.json'))['fetch']
assert f['files_hf_cache'] == 2 and f['bytes_hf_cache'] == 200000 + os.path.getsize('$M/config.json'), f"
if grep -q '^GET .*/resolve/' "$log"; then not_ok "  no GET of either file"; grep '/resolve/' "$log" | sed 's/^/#   /'; else ok "  no GET of either file"; fi
FGPACK_HOME=$WORK/s1b XDG_CACHE_HOME=$WORK/xdg "$FGPACK" pull m.json --lock a.lock 2>p1b.err
check_grep "  stderr says so" "2 files \\([0-9.]+ KiB\\) from the huggingface_hub cache" p1b.err

# offline, a fresh store, the cache named by HF_HUB_CACHE
cache "$WORK/hubcache"
FGPACK_HOME=$WORK/s2 FGPACK_NO_HF_CACHE=1 HF_HUB_CACHE=$WORK/hubcache "$FGPACK" pull m.json --lock a.lock --locked --offline --into o2 >p2.out 2>p2.err
check_exit "offline with FGPACK_NO_HF_CACHE=1 and an empty store: fails" 1 sh -c "exit $?"
check_grep "  naming a missing file" "is not in the store" p2.err
FGPACK_HOME=$WORK/s2 HF_HUB_CACHE=$WORK/hubcache "$FGPACK" pull m.json --lock a.lock --locked --offline --into o2 >p3.out 2>p3.err
check_exit "offline, an empty store, the files in HF_HUB_CACHE: succeeds" 0 sh -c "exit $?"
check "  placed intact" sh -c "cmp '$M/model.safetensors' o2/srv/m/model.safetensors && cmp '$M/config.json' o2/srv/m/config.json"

# a cache blob that does not hash to its name: left out, downloaded
head -c 200000 /dev/urandom >bad.bin
cache "$WORK/badcache" bad.bin
: >"$log"
FGPACK_HOME=$WORK/s3 HF_HUB_CACHE=$WORK/badcache "$FGPACK" pull m.json --lock a.lock --into o3 --json >p4.json 2>p4.err
check_exit "a cache blob that lies about its content: the pull still succeeds" 0 sh -c "exit $?"
check "  the true bytes placed" cmp "$M/model.safetensors" o3/srv/m/model.safetensors
check_grep "  fetched from the hub instead" '^GET .*model.safetensors' "$log"
check "  only the true config.json taken from the cache" python3 -c "
import json; f = json.load(open('p4.json'))['fetch']
assert f['files_hf_cache'] == 1 and f['bytes_hf_cache'] != 200000, f"
if [ -z "$(find "$WORK/s3/blobs" -type f -exec sha256sum {} + | awk '{split($2, a, "/"); if ($1 != a[length(a)]) print}')" ]; then
	ok "  every blob in the store hashes to its name"; else not_ok "  every blob in the store hashes to its name"; fi
# what an earlier `hf download --local-dir` left at the target: taken into
# the store, hashed, instead of fetched (offline too)
mkdir -p o5/srv/m
cp "$M/model.safetensors" "$M/config.json" o5/srv/m/
FGPACK_HOME=$WORK/s5 FGPACK_NO_HF_CACHE=1 "$FGPACK" pull m.json --lock a.lock --locked --offline --into o5 --json >p5.json 2>p5.err
check_exit "files already at the target, an empty store, offline: succeeds" 0 sh -c "exit $?"
check "  both counted as in place" python3 -c "
import json; f = json.load(open('p5.json'))['fetch']
assert f['files_in_place'] == 2 and f['files_hf_cache'] == 0, f"
check "  and now links to the store's blobs" sh -c "[ \$(stat -c %i o5/srv/m/model.safetensors) = \$(stat -c %i '$WORK/s5/blobs/sha256/$(echo "$sha" | cut -c1-2)/$sha') ]"
# a target file of the right size and other bytes: not taken
mkdir -p o6/srv/m
head -c 200000 /dev/urandom >o6/srv/m/model.safetensors
cp "$M/config.json" o6/srv/m/
FGPACK_HOME=$WORK/s6 FGPACK_NO_HF_CACHE=1 "$FGPACK" pull m.json --lock a.lock --locked --offline --into o6 >p6.out 2>p6.err
check_exit "a target file with other bytes, offline: fails" 1 sh -c "exit $?"
check_grep "  naming it as not in the store" "model.safetensors .*is not in the store" p6.err
: >"$log"
FGPACK_HOME=$WORK/s6 FGPACK_NO_HF_CACHE=1 "$FGPACK" pull m.json --lock a.lock --locked --into o6 >p7.out 2>p7.err
check_exit "  online: succeeds" 0 sh -c "exit $?"
check_grep "  fetching it" '^GET .*model.safetensors' "$log"
check "  and the true bytes replace the other ones" cmp "$M/model.safetensors" o6/srv/m/model.safetensors
# a small git file (not LFS: its cache blob is named by its git blob id,
# the oid the lock keeps) taken from the cache too, offline
printf '{"model_type": "gemma4", "small": true}\n' >"$M/small.json"
restart_ok=1
sh $S/serve-hub.sh stop "$WORK/st" 2>/dev/null
ports=$(sh $S/serve-hub.sh start "$hub" "$WORK/st" --cdn '*.safetensors') || restart_ok=0
HF_ENDPOINT="http://127.0.0.1:${ports%% *}"
[ $restart_ok = 1 ] && ok "hub restarted with small.json" || not_ok "hub restarted with small.json"
FGPACK_HOME=$WORK/s8 "$FGPACK" lock m.json -o b.lock >/dev/null 2>&1
oid=$(python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
c = next(iter(d['manifests'].values()))['components']['model_id']
print(next(f['remote']['oid'] for f in c['files'] if f['path'] == 'small.json'))" b.lock)
check "  the lock keeps small.json's git oid" test -n "$oid"
cache "$WORK/gitcache"
cp "$M/small.json" "$WORK/gitcache/models--acme--tiny/blobs/$oid"
FGPACK_HOME=$WORK/s9 HF_HUB_CACHE=$WORK/gitcache "$FGPACK" pull m.json --lock b.lock --locked --offline --into o9 --json >p9.json 2>p9.err
check_exit "offline, an empty store, all three files in the cache (one by its git oid): succeeds" 0 sh -c "exit $?"
check "  small.json placed intact" cmp "$M/small.json" o9/srv/m/small.json
check "  3 files from the cache" python3 -c "
import json; f = json.load(open('p9.json'))['fetch']
assert f['files_hf_cache'] == 3, f"

# ---- the first lock, offline, from the cache (as huggingface_hub resolves
# offline: refs/main names the commit, snapshots/<commit>/ the files)
cache "$WORK/fullcache"
cp "$M/small.json" "$WORK/fullcache/models--acme--tiny/blobs/$oid"
ln -sf "../../blobs/$oid" "$WORK/fullcache/models--acme--tiny/snapshots/$c/small.json"
: >"$log"
FGPACK_HOME=$WORK/s10 HF_HUB_CACHE=$WORK/fullcache HF_ENDPOINT=http://127.0.0.1:1 \
	"$FGPACK" lock m.json -o c.lock --offline --json >p10.json 2>p10.err
check_exit "fgpack lock --offline, no lock yet: locks the model from the cache's snapshot" 0 sh -c "exit $?"
check "  no request reached the hub" test ! -s "$log"
check_grep "  stderr says where the files came from" "1 model component resolved from huggingface_hub's cache" p10.err
check "  --json: 3 files, all from the cache, the remote not checked, a note" python3 -c "
import json; d = json.load(open('p10.json'))
assert d['files'] == 3 and d['fetch']['files_hf_cache'] == 3 and d['components_from_hf_cache'] == 1, d
assert d['resolved'] is False and d['remote_checked'] is False and 'cache' in d['note'], d"
check "  the same files, digests, commit and tree digest as the online lock" python3 -c "
import json, sys
def comp(p):
    d = json.load(open(p)); return next(iter(d['manifests'].values()))['components']['model_id']
a, b = comp('c.lock'), comp('b.lock')
assert a['revision'] == b['revision'] == '$c' and a['tree_digest'] == b['tree_digest'], (a, b)
assert [(f['path'], f['size'], f['sha256']) for f in a['files']] == [(f['path'], f['size'], f['sha256']) for f in b['files']]
fa = {f['path']: f['remote'] for f in a['files']}
assert fa['small.json'] == {'commit': '$c', 'oid': '$oid'}, fa
assert fa['model.safetensors'] == {'commit': '$c'}, fa  # an LFS file's git oid is not in the cache"
: >"$log"
FGPACK_HOME=$WORK/s10 "$FGPACK" pull m.json --lock c.lock --locked --into o10 >p11.out 2>p11.err
check_exit "  pull --locked online against that lock: the listing agrees (LFS files by sha256)" 0 sh -c "exit $?"
check "  placed intact" sh -c "cmp '$M/model.safetensors' o10/srv/m/model.safetensors && cmp '$M/small.json' o10/srv/m/small.json"
check_grep "  the hub was listed" 'GET /api/models/acme/tiny/tree' "$log"
cp c.lock c2.lock
FGPACK_HOME=$WORK/s10 "$FGPACK" lock m.json -o c2.lock >/dev/null 2>&1
check "  an online lock afterwards adds the LFS files' oids: b.lock's bytes" cmp c2.lock b.lock

# a pinned commit and one file of the repo, through pull --offline
printf '{"name": "p", "env": {"DRAFTER_REPO": "hf://acme/tiny@%s/config.json"}}\n' "$c" >pin.json
FGPACK_HOME=$WORK/s11 HF_HUB_CACHE=$WORK/fullcache "$FGPACK" pull pin.json --lock d.lock --offline --into o11 >p12.out 2>p12.err
check_exit "pull --offline, a revision that is a commit id, one file: succeeds" 0 sh -c "exit $?"
check "  placed intact" cmp "$M/config.json" o11/_components/DRAFTER_REPO/config.json
check_grep "  the lock records the commit" "\"revision\": \"$c\"" d.lock

# a snapshot link whose blob never arrived: left out with a warning
cache "$WORK/partcache"
ln -sf "../../blobs/$oid" "$WORK/partcache/models--acme--tiny/snapshots/$c/small.json"
FGPACK_HOME=$WORK/s12 HF_HUB_CACHE=$WORK/partcache "$FGPACK" lock m.json -o e.lock --offline >p13.out 2>p13.err
check_exit "a snapshot link without its blob: the rest is locked" 0 sh -c "exit $?"
check_grep "  a warning names the count" "1 file of the cache's snapshot left out" p13.err
check "  two files in the lock" python3 -c "
import json; d = json.load(open('e.lock'))
assert [f['path'] for f in next(iter(d['manifests'].values()))['components']['model_id']['files']] == ['config.json', 'model.safetensors']"

# a cache blob that does not hash to its name: nothing kept, no lock
cache "$WORK/liecache" bad.bin
FGPACK_HOME=$WORK/s13 HF_HUB_CACHE=$WORK/liecache "$FGPACK" lock m.json -o f.lock --offline >p14.out 2>p14.err
check_exit "a cache blob that lies, offline: fails" 1 sh -c "exit $?"
check_grep "  naming the blob" "does not hash to its name" p14.err
check "  in one line" test "$(wc -l <p14.err)" -eq 1
check "  no lock written" test ! -e f.lock
if [ -z "$(find "$WORK/s13/blobs" -type f -exec sha256sum {} + 2>/dev/null | awk '{split($2, a, "/"); if ($1 != a[length(a)]) print}')" ]; then
	ok "  every blob in the store hashes to its name"; else not_ok "  every blob in the store hashes to its name"; fi

# not in the cache, a revision the cache has no ref of, a bucket: one line each
FGPACK_HOME=$WORK/s14 HF_HUB_CACHE=$WORK/nocache "$FGPACK" lock m.json -o g.lock --offline >p15.out 2>p15.err
check_exit "offline, the repo not in the cache: fails" 1 sh -c "exit $?"
check_grep "  saying so" "model_id \\(acme/tiny\\) is not in the lock nor in huggingface_hub's cache" p15.err
printf '{"name": "r", "env": {"DRAFTER_REPO": "hf://acme/tiny@v2"}}\n' >rev.json
FGPACK_HOME=$WORK/s14 HF_HUB_CACHE=$WORK/fullcache "$FGPACK" pull rev.json --lock g.lock --offline >p16.out 2>p16.err
check_exit "offline, a revision the cache has no ref for: fails" 1 sh -c "exit $?"
check_grep "  naming the revision" "has no commit for revision v2 of acme/tiny" p16.err
printf '{"name": "b", "model_id": "acme/tiny", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/w"}}\n' >bk.json
FGPACK_HOME=$WORK/s14 HF_HUB_CACHE=$WORK/fullcache "$FGPACK" pull bk.json --lock g.lock --offline >p17.out 2>p17.err
check_exit "offline, a bucket the lock does not hold: fails" 1 sh -c "exit $?"
check_grep "  naming it" "the lock has no entry for bk.json, and WEIGHTS_BUCKET \\(hf://buckets/acme/w\\) is a bucket, which cannot be listed offline" p17.err
check "  no lock written" test ! -e g.lock

# the manifest changed elsewhere: offline, the component keeps the old
# entry's files (the git oids the listing gave included)
printf '{"name": "t", "model_id": "acme/tiny", "env": {"LOCAL_MODEL_DIR": "/srv/m", "MAX_MODEL_LEN": "4096"}}\n' >m.json
FGPACK_HOME=$WORK/s8 FGPACK_NO_HF_CACHE=1 "$FGPACK" pull m.json --lock b.lock --offline >p18.out 2>p18.err
check_exit "offline, the manifest edited, the store holding its blobs: succeeds" 0 sh -c "exit $?"
check "  the component's record unchanged, the manifest's digest updated" python3 -c "
import json, hashlib
d = json.load(open('b.lock')); e = next(iter(d['manifests'].values()))
assert e['sha256'] == hashlib.sha256(open('m.json', 'rb').read()).hexdigest(), e['sha256']
assert all('oid' in f['remote'] for f in e['components']['model_id']['files']), e"
finish
