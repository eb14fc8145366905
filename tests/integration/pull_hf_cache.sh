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
finish
