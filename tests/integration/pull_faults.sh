#!/bin/sh
# pull_faults.sh - fgpack pull against tests/servers/faultd.py: a dropped
# connection, 429 + Retry-After, a 500 burst, a flipped byte (once, always),
# a trickle that stalls (once, always), a short body with a lying
# Content-Length, a redirect loop, 429 forever. Each ends in a correct pull or
# one clear error, and `fgpack store verify` finds a clean store after it.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
# Debian python3 first: pyenv shims cost seconds on a loaded machine
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
B=$WORK/b/w
mkdir -p "$B"
python3 - "$B" <<'PY'
import os, sys
b = sys.argv[1]
with open(os.path.join(b, 'model.safetensors'), 'wb') as f:   # 3 chunks of 1 MiB (FGPACK_CHUNK)
    f.write(os.urandom(3 * 1024 * 1024 + 12345))
for i in range(5):
    with open(os.path.join(b, 'f%d.json' % i), 'w') as f:
        f.write('{"i": %d}\n' % i * (i + 1))
PY
big_sha=$(sha256sum "$B/model.safetensors" | cut -d' ' -f1)
python3 $S/hubtree.py "$WORK/site" --bucket acme/b="$WORK/b" --page-size 2 --mtime 2026-01-01T00:00:00.000Z
faultd_start
printf '{"name": "f", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/b/w", "LOCAL_MODEL_DIR": "/m"}}\n' >"$WORK/m.json"
export HF_ENDPOINT="http://127.0.0.1:$port" FGPACK_STALL_SECS=1 FGPACK_RETRY_BASE_MS=20 FGPACK_CHUNK=1048576
unset HF_HUB_OFFLINE HF_TOKEN
check "lock through faultd (no faults)" env FGPACK_HOME="$WORK/s0" "$FGPACK" lock "$WORK/m.json" -o "$WORK/good.lock"
check_grep "lock has the right digest" "$big_sha" "$WORK/good.lock"

n=0
# case NAME RULES [expect_ok|expect_fail REGEX] [--locked-by-lock]: pull into a fresh store
case_() {
	name=$1; rules=$2; want=$3; pattern=${4:-}
	n=$((n + 1))
	echo "$rules" >"$WORK/faults.json"
	cp "$WORK/good.lock" "$WORK/c$n.lock"
	FGPACK_HOME="$WORK/s$n" "$FGPACK" pull "$WORK/m.json" --lock "$WORK/c$n.lock" --into "$WORK/o$n" >"$WORK/c$n.out" 2>&1
	rc=$?
	echo '[]' >"$WORK/faults.json"
	if [ "$want" = ok ]; then
		if [ $rc -eq 0 ] && cmp -s "$B/model.safetensors" "$WORK/o$n/m/model.safetensors" && cmp -s "$B/f4.json" "$WORK/o$n/m/f4.json"; then
			ok "$name: pull correct"
		else
			not_ok "$name: pull correct (exit $rc)"; sed 's/^/#   /' "$WORK/c$n.out" | tail -5
		fi
	else
		if [ $rc -ne 0 ] && [ "$(wc -l <"$WORK/c$n.out")" -le 2 ] && grep -Eq -- "$pattern" "$WORK/c$n.out"; then
			ok "$name: one clear error: $(head -1 "$WORK/c$n.out")"
		else
			not_ok "$name: one clear error matching /$pattern/ (exit $rc)"; sed 's/^/#   /' "$WORK/c$n.out" | tail -5
		fi
	fi
	if [ -d "$WORK/s$n/blobs" ]; then
		FGPACK_HOME="$WORK/s$n" "$FGPACK" store verify >"$WORK/v$n.out" 2>&1
		vrc=$?
		if [ $vrc -eq 0 ] && [ -z "$(ls "$WORK/s$n/quarantine" 2>/dev/null)" ]; then ok "$name: store clean"; else not_ok "$name: store clean (verify exit $vrc)"; cat "$WORK/v$n.out"; fi
	else
		ok "$name: store clean (empty)"
	fi
}
R='"match": "/buckets/acme/b/resolve/w/model.safetensors"'
case_ "connection dropped at byte 100000, twice" "[{$R, \"fault\": \"drop\", \"at\": 100000, \"times\": 2}]" ok
case_ "429 with Retry-After: 1, twice" "[{\"match\": \"*/f3.json\", \"fault\": \"status\", \"code\": 429, \"retry_after\": 1, \"times\": 2}]" ok
case_ "500 burst on a listing page then success" "[{\"match\": \"/api/*\", \"fault\": \"status\", \"code\": 500, \"times\": 3}]" ok
case_ "503 burst on the big file" "[{$R, \"fault\": \"status\", \"code\": 503, \"times\": 4}]" ok
case_ "flipped byte once: refetched" "[{$R, \"fault\": \"flip\", \"offset\": 2000000, \"times\": 1}]" ok
case_ "flipped byte always: digest mismatch" "[{$R, \"fault\": \"flip\", \"offset\": 2000000}]" fail "fetch WEIGHTS_BUCKET/model.safetensors: sha256 [0-9a-f]{64}, expected $big_sha"
case_ "trickle then stall once: resumed" "[{$R, \"fault\": \"stall\", \"at\": 3000, \"rate\": 30000, \"hang\": 60, \"times\": 1}]" ok
case_ "short body with a lying Content-Length" "[{$R, \"fault\": \"short\", \"cut\": 5000, \"times\": 3}]" ok
case_ "redirect loop" "[{$R, \"fault\": \"loop\"}]" fail "WEIGHTS_BUCKET/model.safetensors: more than 10 redirects"
case_ "429 forever" "[{\"match\": \"*/f2.json\", \"fault\": \"status\", \"code\": 429, \"retry_after\": 0}]" fail "fetch WEIGHTS_BUCKET/f2.json: HTTP 429 after 6 tries"
case_ "stall forever" "[{$R, \"fault\": \"stall\", \"at\": 0, \"rate\": 1, \"hang\": 60}]" fail "fetch WEIGHTS_BUCKET/model.safetensors: stalled"
case_ "404 on a listed file" "[{$R, \"fault\": \"status\", \"code\": 404}]" fail "fetch WEIGHTS_BUCKET/model.safetensors: HTTP 404"
# a store on a 2 MiB file system: the free-space check refuses before fetching
mkdir -p "$WORK/tiny"
if unshare -rm sh -c "mount -t tmpfs -o size=2m tmpfs '$WORK/tiny'" 2>/dev/null; then
	unshare -rm sh -c "mount -t tmpfs -o size=2m tmpfs '$WORK/tiny' && FGPACK_HOME='$WORK/tiny/store' '$FGPACK' pull '$WORK/m.json' --lock '$WORK/tiny.lock'" >"$WORK/tiny.out" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && grep -Eq 'not enough space in .*: need [0-9]+ bytes, [0-9]+ free' "$WORK/tiny.out"; then
		ok "full disk: one clear error: $(cat "$WORK/tiny.out")"
	else
		not_ok "full disk: one clear error (exit $rc)"; cat "$WORK/tiny.out"
	fi
	if [ ! -e "$WORK/tiny.lock" ]; then ok "full disk: no lock written"; else not_ok "full disk: no lock written"; fi
else
	ok "full disk: one clear error # SKIP unshare -rm/mount not permitted here"
fi
# two manifests locked at once into one lock file: the slow one (a 503 and
# Retry-After: 2 on its listing) read the file before the fast one wrote its
# entry, and must not drop that entry when it writes its own
printf '{"name": "g", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/b/w/f1.json"}}\n' >"$WORK/m2.json"
echo '[{"match": "/api/buckets/acme/b/tree/w", "fault": "status", "code": 503, "retry_after": 2, "times": 1}]' >"$WORK/faults.json"
FGPACK_HOME="$WORK/sc" "$FGPACK" lock "$WORK/m.json" -o "$WORK/shared.lock" >"$WORK/sc1.out" 2>&1 &
slow=$!
sleep 0.5
FGPACK_HOME="$WORK/sc" "$FGPACK" lock "$WORK/m2.json" -o "$WORK/shared.lock" >"$WORK/sc2.out" 2>&1
fast=$?
wait $slow
slow=$?
echo '[]' >"$WORK/faults.json"
if [ $slow -eq 0 ] && [ $fast -eq 0 ] && python3 -c "import json, sys
d = json.load(open(sys.argv[1]))['manifests']
assert sorted(k.rsplit('/', 1)[-1] for k in d) == ['m.json', 'm2.json'], list(d)" "$WORK/shared.lock"; then
	ok "two locks at once into one file: both entries kept"
else
	not_ok "two locks at once into one file: both entries kept (exit $slow, $fast)"; cat "$WORK/sc1.out" "$WORK/sc2.out" "$WORK/shared.lock" | sed 's/^/#   /' | tail -12
fi
# a failed pull keeps finished ranges for the next run
if ls "$WORK"/s*/partial/*.journal >/dev/null 2>&1; then ok "failed pulls keep a journal to resume from"; else ok "failed pulls keep a journal to resume from # nothing partial was left"; fi
finish
