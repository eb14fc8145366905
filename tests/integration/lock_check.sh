#!/bin/sh
# lock_check.sh - `fgpack lock MANIFEST --check`: the remote listed again and
# every difference from the lock reported (files added, removed, changed,
# a model repo's revision moved, a file:// file edited, a component new to
# the manifest or gone from it, a bucket gone from the remote), as lines and
# as --json; exit 0 when up to date, 3 when not; nothing fetched, the lock
# and the store untouched.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
hub=$WORK/hub
B=$hub/buckets/acme/models
c1=1111111111111111111111111111111111111111
c2=2222222222222222222222222222222222222222
mkdir -p "$B/w/v1/sub" "$hub/models/acme/tiny@$c1" "$WORK/local"
printf 'weights one\n' >"$B/w/v1/a.bin"
printf 'weights two\n' >"$B/w/v1/sub/b.bin"
printf 'stays\n' >"$B/w/v1/c.bin"
head -c 5000 /dev/urandom >"$hub/models/acme/tiny@$c1/model.safetensors"
printf '{"small": 1}\n' >"$hub/models/acme/tiny@$c1/config.json"
printf 'patch one\n' >"$WORK/local/p.diff"
start_hub() {
	ports=$(sh $S/serve-hub.sh start "$hub" "$WORK/st") || { not_ok "hub starts"; finish; exit 1; }
	HF_ENDPOINT="http://127.0.0.1:${ports%% *}"
	export HF_ENDPOINT
}
start_hub
at_exit "sh $S/serve-hub.sh stop $WORK/st 2>/dev/null"
export FGPACK_HOME="$WORK/store" FGPACK_NO_PROGRESS=1
unset HF_HUB_OFFLINE HF_TOKEN
cd "$WORK" || exit 1
printf '{"name": "t", "model_id": "acme/tiny", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/models/w/v1", "PATCH_BUCKET": "file://%s/local"}}\n' "$WORK" >m.json

check "lock online" "$FGPACK" lock m.json -o a.lock
cp a.lock a.before
# a lock written through a FIFO, a character device (or a link to one) or
# /dev/fd/3: no earlier lock is read from it (a FIFO's read would wait for a
# writer, /dev/null's is empty) and the lock goes through it whole, the same
# bytes as a.lock
special_outputs "lock -o" "'$FGPACK' lock m.json -o \"\$OUT\"" "$WORK/a.before"
special_outputs "pull --lock" "'$FGPACK' pull m.json --lock \"\$OUT\"" "$WORK/a.before"
check "  no store gc root names the FIFO or the device" sh -c "! grep -rq '$WORK/special/' '$WORK/store/roots'"
check "  store gc --dry-run still reads its roots" timeout 20 "$FGPACK" store gc --dry-run
check "  a.lock untouched by all that" cmp a.lock a.before
log=$WORK/st/nginx/access.log
check_exit "--check right after: up to date, exit 0" 0 "$FGPACK" lock m.json -o a.lock --check
check_grep "  says so" "^m.json: up to date with a.lock" "$WORK/.out"
: >"$log"
check_exit "--check --json: exit 0" 0 "$FGPACK" lock m.json -o a.lock --check --json
cp "$WORK/.out" c0.json
check "  every component the same, every file counted" python3 -c "
import json; d = json.load(open('c0.json'))
assert d['up_to_date'] is True and d['manifest_changed'] is False, d
s = {c['key']: (c['state'], c['same'], c['files']) for c in d['components']}
assert s == {'model_id': ('same', 2, []), 'WEIGHTS_BUCKET': ('same', 3, []), 'PATCH_BUCKET': ('same', 1, [])}, s"
if grep -q '^GET .*/resolve/' "$log"; then not_ok "  nothing fetched"; else ok "  nothing fetched"; fi

# the bucket changes (one file edited, one added, one removed), the repo's
# main moves to a commit with the same files, the local patch is edited
sh $S/serve-hub.sh stop "$WORK/st"
printf 'weights TWO, longer\n' >"$B/w/v1/sub/b.bin"
printf 'new\n' >"$B/w/v1/new.bin"
rm "$B/w/v1/a.bin"
mv "$hub/models/acme/tiny@$c1" "$hub/models/acme/tiny@$c2"
printf 'patch ONE\n' >"$WORK/local/p.diff"
start_hub
nblobs=$(find "$WORK/store/blobs" -type f | wc -l)
: >"$log"
check_exit "--check after the changes: exit 3" 3 "$FGPACK" lock m.json -o a.lock --check
cp "$WORK/.out" c1.out
check_grep "  a summary line" "^m.json: 3 of 3 components differ from a.lock" c1.out
check_grep "  the edited file, how it shows" "changed  sub/b.bin \\(size; 12 -> 20 bytes\\)" c1.out
check_grep "  the added file" "added    new.bin \\(4 bytes\\)" c1.out
check_grep "  the removed file" "removed  a.bin" c1.out
check_grep "  the bucket's counts" "WEIGHTS_BUCKET \\(hf://buckets/acme/models/w/v1\\): differs: 1 changed, 1 added, 1 removed, 1 the same" c1.out
check_grep "  the repo's revision moved, its files the same" "model_id \\(acme/tiny\\): differs; revision moved 111111111111 -> 222222222222: 0 changed, 0 added, 0 removed, 2 the same" c1.out
check_grep "  the local file edited, same size: by its sha256" "changed  p.diff \\(sha256; 10 -> 10 bytes\\)" c1.out
if grep -q '^GET .*/resolve/' "$log"; then not_ok "  nothing fetched"; else ok "  nothing fetched"; fi
check "  the lock untouched" cmp a.lock a.before
check "  the store untouched" test "$(find "$WORK/store/blobs" -type f | wc -l)" -eq "$nblobs"
check_exit "--check --json: exit 3" 3 "$FGPACK" lock m.json -o a.lock --check --json
cp "$WORK/.out" c1.json
check "  the same differences as JSON" python3 -c "
import json; d = json.load(open('c1.json'))
assert d['up_to_date'] is False, d
c = {x['key']: x for x in d['components']}
w = c['WEIGHTS_BUCKET']
assert w['state'] == 'differs' and w['same'] == 1, w
f = {x['path']: x for x in w['files']}
assert f['sub/b.bin'] == {'path': 'sub/b.bin', 'change': 'changed', 'why': 'size', 'size_locked': 12, 'size_now': 20}, f
assert f['new.bin']['change'] == 'added' and f['a.bin']['change'] == 'removed', f
m = c['model_id']
assert m['state'] == 'differs' and m['revision_locked'] == '$c1' and m['revision_now'] == '$c2' and m['files'] == [], m
assert c['PATCH_BUCKET']['files'][0]['why'] == 'sha256', c"

check_exit "pull --locked stops at the first difference: exit 3" 3 "$FGPACK" pull m.json --lock a.lock --locked
check_grep "  and points to --check for the rest" "^fgpack pull: --locked: .* \\('fgpack lock --check' lists every difference\\)$" "$WORK/.out"

# a component new to the manifest, one gone from it, a bucket gone from the remote
printf '{"name": "t", "model_id": "acme/tiny", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/gone/w", "KEEP_BUCKET": "hf://buckets/acme/models/w/v1", "NEW_BUCKET": "hf://buckets/acme/nothere/x"}}\n' >m2.json
cp a.lock b.lock
python3 - b.lock <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = d['manifests']['m.json']
d['manifests']['m2.json'] = json.loads(json.dumps(e))
d['manifests']['m2.json']['components']['WEIGHTS_BUCKET']['source'] = 'hf://buckets/acme/gone/w'
json.dump(d, open(sys.argv[1], 'w'), indent=2, sort_keys=True)
PY
check_exit "--check: a bucket gone, components new, one gone: exit 3" 3 "$FGPACK" lock m2.json -o b.lock --check
cp "$WORK/.out" c2.out
check_grep "  the locked bucket gone from the remote" "WEIGHTS_BUCKET \\(hf://buckets/acme/gone/w\\): not found \\(.*HTTP 404" c2.out
check_grep "  a new component whose bucket does not exist" "NEW_BUCKET \\(hf://buckets/acme/nothere/x\\): not found" c2.out
check_grep "  the new component" "KEEP_BUCKET \\(hf://buckets/acme/models/w/v1\\): not in the lock \\(3 files listed\\)" c2.out
check_grep "  the component the manifest dropped" "PATCH_BUCKET \\(file://.*\\): in the lock, no longer in the manifest" c2.out
check_grep "  and the manifest's bytes" "the manifest's bytes changed too" c2.out

# what --check cannot do: one line each
check_exit "--check without a lock file: exit 1" 1 "$FGPACK" lock m.json -o none.lock --check
check_grep "  saying so" "none.lock: no lock file to check" "$WORK/.out"
printf '{"name": "o"}\n' >o.json
check_exit "--check of a manifest the lock has no entry for: exit 1" 1 "$FGPACK" lock o.json -o a.lock --check
check_grep "  saying so" "the lock has no entry for o.json" "$WORK/.out"
check_exit "--check --offline: exit 1" 1 "$FGPACK" lock m.json -o a.lock --check --offline
check_grep "  saying why" "--check lists the remote, which offline cannot" "$WORK/.out"
check_exit "pull --check is no option: usage (exit 2)" 2 "$FGPACK" pull m.json --check
finish
