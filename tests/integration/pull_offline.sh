#!/bin/sh
# pull_offline.sh - `fgpack pull --locked --offline`: the lock is the authority,
# no socket is opened (strace, and a hub that is stopped), the components are
# materialized from the store, a missing blob is named, the output says the
# remote was not re-checked, and a manifest that grew a component since the
# lock fails in one line naming it; a manifest changed elsewhere keeps the
# files its components were locked with.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
hub=$WORK/hub
B=$hub/buckets/acme/models
mkdir -p "$B/w/v1/sub" "$B/d/v2"
printf 'weights one\n' >"$B/w/v1/a.bin"
printf 'weights two\n' >"$B/w/v1/sub/b.bin"
printf 'drafter\n' >"$B/d/v2/d.bin"
ports=$(sh $S/serve-hub.sh start "$hub" "$WORK/st") || { not_ok "hub starts"; finish; exit 1; }
at_exit "sh $S/serve-hub.sh stop $WORK/st 2>/dev/null"
HF_ENDPOINT="http://127.0.0.1:${ports%% *}"
export HF_ENDPOINT FGPACK_HOME="$WORK/store" FGPACK_NO_PROGRESS=1
unset HF_HUB_OFFLINE HF_TOKEN
log=$WORK/st/nginx/access.log
cd "$WORK" || exit 1
printf '{"name": "t", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/models/w/v1", "LOCAL_MODEL_DIR": "/srv/model"}}\n' >m.json

check "lock online" "$FGPACK" lock m.json -o a.lock
cp a.lock a.before
# from here on nothing may reach the hub: stop it, and point HF_ENDPOINT at a closed port
sh $S/serve-hub.sh stop "$WORK/st"
lines=$(wc -l <"$log")
HF_ENDPOINT=http://127.0.0.1:$(free_port)
export HF_ENDPOINT

"$FGPACK" pull m.json --lock a.lock --locked --offline --into out >pl.out 2>pl.err
rc=$?
[ "$rc" -eq 0 ] && ok "--locked --offline succeeds from the lock and the store" ||
	{ not_ok "--locked --offline succeeds (exit $rc)"; sed 's/^/#   /' pl.err; }
check "materialized file intact" cmp "$B/w/v1/a.bin" out/srv/model/a.bin
check "materialized nested file intact" cmp "$B/w/v1/sub/b.bin" out/srv/model/sub/b.bin
check_grep "stderr says the remote was not re-checked" 'offline: the remote was not re-checked against the lock' pl.err
check "the lock is not rewritten" cmp a.lock a.before
"$FGPACK" pull m.json --lock a.lock --locked --offline --json >plj.json 2>plj.err
check "--json says remote_checked false, locked, offline" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["remote_checked"] is False and d["locked"] is True and d["offline"] is True, d
assert d["resolved"] is False and "not re-checked" in d["note"], d
assert d["files"] == 2 and d["fetch"]["files_present"] == 2 and d["fetch"]["bytes_net"] == 0, d' plj.json
check "HF_HUB_OFFLINE=1 works like --offline" env HF_HUB_OFFLINE=1 "$FGPACK" pull m.json --lock a.lock --locked --into out2
check "materialized again under HF_HUB_OFFLINE=1" cmp "$B/w/v1/sub/b.bin" out2/srv/model/sub/b.bin
[ "$(wc -l <"$log")" -eq "$lines" ] && ok "no request reached the hub" || not_ok "no request reached the hub"
if command -v strace >/dev/null 2>&1 && strace -f -qq -e trace=none true 2>/dev/null; then
	traced -f -qq -e trace=socket,connect -o st.out "$FGPACK" pull m.json --lock a.lock --locked --offline \
		--into out3 >/dev/null 2>&1
	s=$?
	if [ "$s" -eq 0 ] && ! grep -E 'AF_INET|AF_INET6|connect\(' st.out >/dev/null; then
		ok "strace: --locked --offline opens no socket and connects nowhere"
	else
		not_ok "strace: --locked --offline opens no socket (exit $s)"; head -5 st.out | sed 's/^/#   /'
	fi
else
	ok "strace: --locked --offline opens no socket # SKIP strace unavailable"
fi

# a blob is missing from the store: named, nothing materialized, no socket
blob=$(find "$FGPACK_HOME/blobs" -type f -name "$(sha256sum "$B/w/v1/sub/b.bin" | cut -d' ' -f1)")
rm -f "$blob"
check_exit "--locked --offline with a missing blob fails" 1 "$FGPACK" pull m.json --lock a.lock --locked --offline --into out4
check_grep "the missing blob is named with its sha256" "offline: WEIGHTS_BUCKET/sub/b.bin \(sha256 $(sha256sum "$B/w/v1/sub/b.bin" | cut -d' ' -f1)\) is not in the store" "$WORK/.out"
[ ! -e out4/srv/model/sub/b.bin ] && ok "nothing half-materialized" || not_ok "nothing half-materialized"

# the manifest gained a component since the lock: one line naming it
printf '{"name": "t", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/models/w/v1", "LOCAL_MODEL_DIR": "/srv/model", "DRAFTER_BUCKET": "hf://buckets/acme/models/d/v2"}}\n' >m.json
check_exit "--locked --offline with a component added to the manifest fails" 1 "$FGPACK" pull m.json --lock a.lock --locked --offline
check_grep "the error names the added component" "^fgpack pull: offline: m.json: component DRAFTER_BUCKET \(hf://buckets/acme/models/d/v2\) is in the manifest but not in the lock" "$WORK/.out"
[ "$(wc -l <"$WORK/.out")" -eq 1 ] && ok "the error is one line" || { not_ok "the error is one line"; sed 's/^/#   /' "$WORK/.out"; }
check_exit "plain --offline names it too" 1 "$FGPACK" pull m.json --lock a.lock --offline
check_grep "plain --offline: the added component named" "component DRAFTER_BUCKET .* not in the lock" "$WORK/.out"
check_exit "--locked online names it (exit 3)" 3 "$FGPACK" pull m.json --lock a.lock --locked
check_grep "--locked: the added component named" "^fgpack pull: --locked: m.json: component DRAFTER_BUCKET" "$WORK/.out"
# ... and one removed since the lock
printf '{"name": "t", "env": {"LOCAL_MODEL_DIR": "/srv/model", "DRAFTER_BUCKET": "hf://buckets/acme/models/d/v2"}}\n' >m2.json
check_exit "--offline without an entry for the manifest fails" 1 "$FGPACK" pull m2.json --lock a.lock --offline
check_grep "says the lock has no entry" "offline: the lock has no entry for m2.json" "$WORK/.out"
# the manifest lost its component: offline, the entry follows the manifest
# (nothing to fetch), as it does online
printf '{"name": "t", "env": {"OTHER": "x"}}\n' >m.json
cp a.lock a3.lock
check "a component removed from the manifest: offline, the entry follows it" "$FGPACK" pull m.json --lock a3.lock --offline
check "  the entry names no component now" python3 -c "
import json; d = json.load(open('a3.lock'))
assert not d['manifests']['m.json'].get('components'), d"
# same components, other bytes (the manifest changed elsewhere): offline,
# the component keeps the files the lock records; a missing blob is named
printf '{"name": "t2", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/models/w/v1", "LOCAL_MODEL_DIR": "/srv/model"}}\n' >m.json
check_exit "a changed manifest, a locked blob not in the store: fails offline" 1 "$FGPACK" pull m.json --lock a.lock --offline
check_grep "  naming the blob" "offline: WEIGHTS_BUCKET/sub/b.bin \(sha256 $(sha256sum "$B/w/v1/sub/b.bin" | cut -d' ' -f1)\) is not in the store" "$WORK/.out"
check "  the lock unchanged" cmp a.lock a.before
check "  the blob imported again" "$FGPACK" store import "$B/w/v1/sub/b.bin"
check "a changed manifest, offline: succeeds, the component's files kept" "$FGPACK" pull m.json --lock a.lock --offline --into out5
check "  placed" cmp "$B/w/v1/sub/b.bin" out5/srv/model/sub/b.bin
check "  the component's record as locked online, the manifest's digest new" python3 -c "
import json, hashlib
a = json.load(open('a.before'))['manifests']['m.json']; b = json.load(open('a.lock'))['manifests']['m.json']
assert a['components'] == b['components'], (a, b)
assert b['sha256'] == hashlib.sha256(open('m.json', 'rb').read()).hexdigest() != a['sha256']"
finish
