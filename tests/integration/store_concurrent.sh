#!/bin/sh
# store_concurrent.sh - two fgpack processes, or a killed one, meeting one
# store: `fgpack store gc` run while a pull is in flight (stopped with
# SIGSTOP between committing one file and writing its lock) refuses with one
# line and removes nothing, and the pull then ends with every blob its lock
# names in the store. A .part left read-only (a kill between a commit's
# chmod 0444 and its rename) is resumed by the next pull, also one that file
# modes bind (no CAP_DAC_OVERRIDE). gc run while a pack or a bake int4
# reads the store's blobs refuses the same way. A pull, pack or bake that
# finds a gc holding the store says once that it waits for it.
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
mkdir -p "$WORK/b/w" "$WORK/o/w"
python3 - "$WORK" <<'PY'
import os, sys
w = sys.argv[1]
with open(os.path.join(w, 'b/w/a.json'), 'w') as f:
    f.write('{"a": 1}\n')
with open(os.path.join(w, 'b/w/big.bin'), 'wb') as f:   # 3 ranges of 1 MiB (FGPACK_CHUNK)
    f.write(os.urandom(3 * 1024 * 1024 + 7))
with open(os.path.join(w, 'o/w/other.json'), 'w') as f:
    f.write('{"other": 1}\n')
PY
a_sha=$(sha256sum "$WORK/b/w/a.json" | cut -d' ' -f1)
big_sha=$(sha256sum "$WORK/b/w/big.bin" | cut -d' ' -f1)
python3 $S/hubtree.py "$WORK/site" --bucket acme/b="$WORK/b" --bucket acme/o="$WORK/o" --mtime 2026-01-01T00:00:00.000Z
faultd_start
printf '{"name": "m", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/b/w", "LOCAL_MODEL_DIR": "/m"}}\n' >"$WORK/m.json"
printf '{"name": "o", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/o/w", "LOCAL_MODEL_DIR": "/o"}}\n' >"$WORK/o.json"
export HF_ENDPOINT="http://127.0.0.1:$port" FGPACK_RETRY_BASE_MS=20 FGPACK_CHUNK=1048576
unset HF_HUB_OFFLINE HF_TOKEN
st=$WORK/store
export FGPACK_HOME=$st
# another manifest's lock: gc's root, which does not name this pull's blobs
check "pull another manifest first (gc's root)" "$FGPACK" pull "$WORK/o.json" --lock "$WORK/o.lock"

# gc while a pull is in flight: the big file stalls, a.json is committed
# meanwhile; the pull is stopped there (SIGSTOP: a real barrier) before it
# can write its lock, gc runs, the pull goes on (its stall detector retries
# the big file, which is served whole then)
echo '[{"match": "/buckets/acme/b/resolve/w/big.bin", "fault": "stall", "at": 1000, "rate": 100000, "hang": 60}]' >"$WORK/faults.json"
FGPACK_STALL_SECS=2 "$FGPACK" pull "$WORK/m.json" --lock "$WORK/m.lock" --into "$WORK/into" >"$WORK/p.out" 2>&1 &
pid=$!
blob=$st/blobs/sha256/$(echo "$a_sha" | cut -c1-2)/$a_sha
i=0
while [ ! -f "$blob" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
	sleep 0.05; i=$((i + 1))
done
kill -STOP $pid 2>/dev/null
if [ -f "$blob" ] && [ ! -e "$WORK/m.lock" ]; then ok "pull stopped with a.json in the store, no lock yet"
else not_ok "pull stopped with a.json in the store, no lock yet"; cat "$WORK/p.out"; fi
echo '[]' >"$WORK/faults.json"
"$FGPACK" store gc >"$WORK/gc.out" 2>&1
grc=$?
if [ $grc -ne 0 ] && [ "$(wc -l <"$WORK/gc.out")" -eq 1 ] && grep -q "in use by another fgpack process" "$WORK/gc.out"; then
	ok "gc during a pull refuses with one line: $(cat "$WORK/gc.out")"
else
	not_ok "gc during a pull refuses with one line (exit $grc)"; sed 's/^/#   /' "$WORK/gc.out"
fi
if [ -f "$blob" ]; then ok "gc left the pull's fresh blob alone"; else not_ok "gc left the pull's fresh blob alone"; fi
kill -CONT $pid 2>/dev/null
wait $pid
prc=$?
if [ $prc -eq 0 ]; then ok "the pull ends well after the gc"; else not_ok "the pull ends well after the gc (exit $prc)"; sed 's/^/#   /' "$WORK/p.out"; fi
check_grep "its lock names a.json's blob" "$a_sha" "$WORK/m.lock"
check_grep "its lock names big.bin's blob" "$big_sha" "$WORK/m.lock"
check "every blob its lock names is in the store" "$FGPACK" store verify --lock "$WORK/m.lock"
check "its files are in place" cmp "$WORK/b/w/big.bin" "$WORK/into/m/big.bin"
# with no pull running, gc runs (and keeps what the two locks name)
check "gc after the pull" "$FGPACK" store gc
check "the locked blobs are still there after gc" "$FGPACK" store verify --lock "$WORK/m.lock" --lock "$WORK/o.lock"
# a pull killed between fg_store_commit's chmod 0444 of a .part and its
# rename leaves a read-only .part: the next pull (a writer without root's
# CAP_DAC_OVERRIDE, for whom the mode counts) must still reuse it. A pull is
# killed while big.bin stalls, its .part made 0444 as that commit would.
st2=$WORK/store2
echo '[{"match": "/buckets/acme/b/resolve/w/big.bin", "fault": "stall", "at": 1000, "rate": 100000, "hang": 60}]' >"$WORK/faults.json"
FGPACK_HOME=$st2 "$FGPACK" pull "$WORK/m.json" --lock "$WORK/ro.lock" >"$WORK/ro1.out" 2>&1 &
pid=$!
i=0
while [ -z "$(ls "$st2/partial" 2>/dev/null | grep '\.part$')" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
	sleep 0.05; i=$((i + 1))
done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
echo '[]' >"$WORK/faults.json"
n=0
for f in "$st2"/partial/*.part; do [ -f "$f" ] && chmod 0444 "$f" && n=$((n + 1)); done
if [ $n -gt 0 ]; then ok "a killed pull left $n .part file(s), made read-only"; else not_ok "a killed pull left a .part file"; cat "$WORK/ro1.out"; fi
# as root, drop the capabilities that ignore file modes (an ordinary user has none)
nodac=
if [ "$(id -u)" -eq 0 ] && setpriv --bounding-set=-dac_override,-dac_read_search true 2>/dev/null; then
	nodac="setpriv --bounding-set=-dac_override,-dac_read_search"
fi
FGPACK_HOME=$st2 $nodac "$FGPACK" pull "$WORK/m.json" --lock "$WORK/ro.lock" --into "$WORK/ro-into" >"$WORK/ro2.out" 2>&1
prc=$?
if [ $prc -eq 0 ]; then ok "the next pull copes with the read-only .part"
else not_ok "the next pull copes with the read-only .part (exit $prc)"; sed 's/^/#   /' "$WORK/ro2.out"; fi
check "  and places big.bin whole" cmp "$WORK/b/w/big.bin" "$WORK/ro-into/m/big.bin"
check "  its blob verifies" env FGPACK_HOME=$st2 "$FGPACK" store verify --lock "$WORK/ro.lock"
# pack and bake read blobs of the store: gc refuses while they run. Each is
# held by strace for 3 s right after its first flock (the store lock it
# takes); a gc meanwhile must refuse, and the blobs stay. The pull's lock is
# moved away first, so that no root names its blobs and a gc would remove
# them.
# gc_during NAME CMD...: runs CMD so, and gc while it holds the store lock
gc_during() {
	name=$1; shift
	traced -f -o /dev/null -e trace=flock -e inject=flock:delay_exit=3000000:when=1 "$@" >"$WORK/gd.out" 2>&1 &
	gpid=$!
	ino=$(stat -c %i "$st/locks/store.lock")
	i=0
	while ! grep -q ":$ino " /proc/locks && [ $i -lt 200 ] && kill -0 $gpid 2>/dev/null; do
		sleep 0.05; i=$((i + 1))
	done
	"$FGPACK" store gc >"$WORK/gd.gc" 2>&1
	grc=$?
	if [ $grc -ne 0 ] && grep -q "in use by another fgpack process" "$WORK/gd.gc"; then
		ok "gc during $name refuses: $(cat "$WORK/gd.gc")"
	else
		not_ok "gc during $name refuses (exit $grc)"; sed 's/^/#   /' "$WORK/gd.gc"
	fi
	wait $gpid
	prc=$?
	if [ $prc -eq 0 ]; then ok "  $name ends well"; else not_ok "  $name ends well (exit $prc)"; sed 's/^/#   /' "$WORK/gd.out"; fi
}
mv "$WORK/m.lock" "$WORK/pk.lock"
gc_during "pack" "$FGPACK" pack "$WORK/m.json" --lock "$WORK/pk.lock" --no-golden -o "$WORK/pk.fgb"
check "  the blobs pack read are still in the store" "$FGPACK" store verify --lock "$WORK/pk.lock"
check "  the bundle verifies" "$FGPACK" verify "$WORK/pk.fgb"
# bake int4 of a checkpoint pulled into a folder (hard links to blobs)
V=$TOP/tests/fixtures/oracle/variants/attn-bias
printf '{"name": "v", "env": {"WEIGHTS_BUCKET": "file://%s", "LOCAL_MODEL_DIR": "/v"}}\n' "$V" >"$WORK/v.json"
check "pull a checkpoint for bake" "$FGPACK" pull "$WORK/v.json" --lock "$WORK/v.lock" --into "$WORK/vin"
mv "$WORK/v.lock" "$WORK/vk.lock"
gc_during "bake int4" "$FGPACK" bake int4 "$WORK/vin/v" "$WORK/vout" --group 32 --ignore-misfits
check "  the blobs bake read are still in the store" "$FGPACK" store verify --lock "$WORK/vk.lock"
# the other way round: a pull, pack or bake started while a gc holds
# locks/store.lock exclusive (here a shell holding it with flock(1), as
# gc does) says so in one line on stderr, once, waits, and ends well once
# the lock is let go. Without a gc it says nothing.
# held_ex NAME CMD...: runs CMD so
held_ex() {
	name=$1; shift
	rm -f "$WORK/held" "$WORK/release"
	( flock -x 9 && : >"$WORK/held" && while [ ! -e "$WORK/release" ]; do sleep 0.05; done ) 9<"$st/locks/store.lock" &
	hpid=$!
	i=0
	while [ ! -e "$WORK/held" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	"$@" >"$WORK/hx.out" 2>"$WORK/hx.err" &
	cpid=$!
	i=0
	while ! grep -q "waiting for the store lock" "$WORK/hx.err" && [ $i -lt 200 ] && kill -0 $cpid 2>/dev/null; do
		sleep 0.05; i=$((i + 1))
	done
	sleep 0.5
	if grep -q "^fgpack [a-z]*: waiting for the store lock of $st (a store gc is running) ...\$" "$WORK/hx.err" &&
	   kill -0 $cpid 2>/dev/null; then
		ok "$name during a gc says it waits, and waits: $(grep waiting "$WORK/hx.err")"
	else
		not_ok "$name during a gc says it waits, and waits"; sed 's/^/#   /' "$WORK/hx.err"
	fi
	: >"$WORK/release"
	wait $hpid
	wait $cpid
	prc=$?
	if [ $prc -eq 0 ] && [ "$(grep -c "waiting for the store lock" "$WORK/hx.err")" -eq 1 ]; then
		ok "  $name ends well once the gc is done, the line said once"
	else
		not_ok "  $name ends well once the gc is done, the line said once (exit $prc)"; sed 's/^/#   /' "$WORK/hx.err"
	fi
}
if command -v flock >/dev/null; then
	held_ex "pull" "$FGPACK" pull "$WORK/m.json" --lock "$WORK/pk.lock" --into "$WORK/hx-into"
	check "  its files are in place" cmp "$WORK/b/w/big.bin" "$WORK/hx-into/m/big.bin"
	held_ex "pack" "$FGPACK" pack "$WORK/m.json" --lock "$WORK/pk.lock" --no-golden -o "$WORK/hx.fgb"
	check "  the bundle verifies" "$FGPACK" verify "$WORK/hx.fgb"
	held_ex "bake int4" "$FGPACK" bake int4 "$WORK/vin/v" "$WORK/hx-vout" --group 32 --ignore-misfits
	"$FGPACK" pull "$WORK/m.json" --lock "$WORK/pk.lock" --into "$WORK/hx-into" 2>"$WORK/hx.err" >/dev/null
	prc=$?
	if [ $prc -eq 0 ] && ! grep -q "waiting" "$WORK/hx.err"; then ok "a pull with no gc running says nothing of waiting"
	else not_ok "a pull with no gc running says nothing of waiting (exit $prc)"; sed 's/^/#   /' "$WORK/hx.err"; fi
else
	ok "# SKIP no flock(1) to hold the store lock"
fi
finish
