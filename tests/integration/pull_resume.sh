#!/bin/sh
# pull_resume.sh - large and interrupted pulls against nginx: a 1 GiB file
# (sparse, deterministic pattern) pulled and verified; a pull killed with
# SIGKILL half way, then pulled again, fetching less than half the file (from
# the journal in partial/); two concurrent pulls of one manifest into one
# store (with and without a lock) both succeed with one intact blob, each
# byte served once (the second waits on the blob lock and reuses the blob).
. "$(dirname "$0")/../lib.sh"
S=$TOP/tests/servers
[ -x /usr/bin/python3 ] && PATH=/usr/bin:$PATH && export PATH
hub=$WORK/hub
B=$hub/buckets/acme/big
mkdir -p "$B/huge" "$B/mid" "$B/pair"
# 1 GiB, sparse: zeros with a marker every 64 MiB (fast to make, deterministic)
truncate -s 1073741824 "$B/huge/model.safetensors"
i=0
while [ $i -lt 16 ]; do
	printf 'fgpack block %02d' $i | dd of="$B/huge/model.safetensors" bs=1 seek=$((i * 67108864 + 4096 + i)) conv=notrunc 2>/dev/null
	i=$((i + 1))
done
python3 - "$B" <<'PY'
import os, random, sys
b = sys.argv[1]
r = random.Random(7)
with open(os.path.join(b, 'mid/model.safetensors'), 'wb') as f:   # 192 MiB, incompressible
    blk = bytes(r.getrandbits(8) for _ in range(1 << 20))
    for i in range(192):
        f.write(blk[i:] + blk[:i])
for i in range(20):
    with open(os.path.join(b, 'pair/f%02d.bin' % i), 'wb') as f:
        f.write(bytes((i + j) % 256 for j in range(5000 + i)))
with open(os.path.join(b, 'pair/model.safetensors'), 'wb') as f:
    f.write(blk * 48)  # 48 MiB
PY
ports=$(sh $S/serve-hub.sh start "$hub" "$WORK/st") || { not_ok "hub starts"; finish; exit 1; }
at_exit "sh $S/serve-hub.sh stop $WORK/st"
port=${ports%% *}
log=$WORK/st/nginx/access.log
unset HF_HUB_OFFLINE HF_TOKEN
# a store in memory when there is one: 1 GiB of fsync on a shared disk is slow
mem=$WORK
[ -d /dev/shm ] && [ -w /dev/shm ] && mem=$(mktemp -d /dev/shm/fgtest.XXXXXX) && at_exit "rm -rf $mem"
export HF_ENDPOINT="http://127.0.0.1:$port"
man() { printf '{"name": "%s", "env": {"WEIGHTS_BUCKET": "hf://buckets/acme/big/%s", "LOCAL_MODEL_DIR": "/m"}}\n' "$1" "$1" >"$WORK/$1.json"; }
man huge; man mid; man pair

# 1 GiB happy path
want=$(sha256sum "$B/huge/model.safetensors" | cut -d' ' -f1)
check "pull a 1 GiB file" env FGPACK_HOME="$mem/s1" "$FGPACK" pull "$WORK/huge.json" --lock "$WORK/huge.lock" -j 4
check_grep "lock holds its sha256" "$want" "$WORK/huge.lock"
blob=$(env FGPACK_HOME="$mem/s1" "$FGPACK" store path "$want" 2>/dev/null)
if [ -n "$blob" ] && [ "$(sha256sum "$blob" | cut -d' ' -f1)" = "$want" ]; then ok "1 GiB blob intact"; else not_ok "1 GiB blob intact"; fi
rm -rf "$mem/s1"

# kill -9 half way, then pull again: only the unfinished ranges are fetched
size=201326592
export FGPACK_CHUNK=4194304
HF_ENDPOINT="http://127.0.0.1:$port/slow/12000000" FGPACK_HOME="$WORK/s2" "$FGPACK" pull "$WORK/mid.json" --lock "$WORK/mid.lock" -j 4 >"$WORK/k.out" 2>&1 &
kill_when_journaled $! "$WORK/s2" 30
n=$journaled
if [ "$n" -ge 30 ] && [ "$n" -lt 49 ]; then ok "killed with $((n - 1)) of 48 ranges journaled"; else not_ok "killed half way (journal has $n lines)"; cat "$WORK/k.out"; fi
if [ -z "$(find "$WORK/s2/blobs" -type f 2>/dev/null)" ]; then ok "no blob from the killed pull"; else not_ok "no blob from the killed pull"; fi
before=$(wc -l <"$log")
FGPACK_HOME="$WORK/s2" "$FGPACK" pull "$WORK/mid.json" --lock "$WORK/mid.lock" -j 4 --json >"$WORK/r.json" 2>"$WORK/r.err"
check "re-pull after kill -9 succeeds" test $? -eq 0
net=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['fetch']['bytes_net'])" "$WORK/r.json" 2>/dev/null || echo 999999999999)
served=$(tail -n +$((before + 1)) "$log" | awk '$3 == 206 || $3 == 200 {s += $4} END {print s + 0}')
if [ "$net" -lt $((size / 2)) ]; then ok "re-pull fetched $net bytes of $size (< half)"; else not_ok "re-pull fetched $net bytes of $size (< half)"; fi
if [ "$served" -lt $((size / 2)) ]; then ok "nginx served $served bytes for the re-pull (< half)"; else not_ok "nginx served $served bytes for the re-pull (< half)"; fi
want=$(sha256sum "$B/mid/model.safetensors" | cut -d' ' -f1)
check_grep "resumed file has the right sha256" "$want" "$WORK/mid.lock"
check "store verify after the resume" env FGPACK_HOME="$WORK/s2" "$FGPACK" store verify
if [ -z "$(ls "$WORK/s2/partial" 2>/dev/null)" ]; then ok "partial/ empty after the resume"; else not_ok "partial/ empty after the resume"; ls "$WORK/s2/partial"; fi
unset FGPACK_CHUNK

# two concurrent pulls of one manifest into one store: first without a lock, then with one
for mode in unlocked locked; do
	st=$WORK/s3$mode
	[ $mode = locked ] && cp "$WORK/pair.lock.a" "$WORK/pair.lock.b" 2>/dev/null
	[ $mode = locked ] && cp "$WORK/pair.lock.a" "$WORK/pair.lock.c" 2>/dev/null
	before=$(wc -l <"$log")
	HF_ENDPOINT="http://127.0.0.1:$port/slow/20000000" FGPACK_HOME=$st "$FGPACK" pull "$WORK/pair.json" --lock "$WORK/pair.lock.b" --into "$WORK/p1$mode" >"$WORK/p1.out" 2>&1 &
	a=$!
	HF_ENDPOINT="http://127.0.0.1:$port/slow/20000000" FGPACK_HOME=$st "$FGPACK" pull "$WORK/pair.json" --lock "$WORK/pair.lock.c" --into "$WORK/p2$mode" >"$WORK/p2.out" 2>&1 &
	b=$!
	wait $a; ra=$?
	wait $b; rb=$?
	if [ $ra -eq 0 ] && [ $rb -eq 0 ]; then ok "$mode: both concurrent pulls succeed"; else not_ok "$mode: both concurrent pulls succeed ($ra, $rb)"; cat "$WORK/p1.out" "$WORK/p2.out"; fi
	check "$mode: store verify finds one intact copy of each blob" env FGPACK_HOME=$st "$FGPACK" store verify
	check "$mode: first pull's files intact" diff -r "$B/pair" "$WORK/p1$mode/m"
	check "$mode: second pull's files intact" diff -r "$B/pair" "$WORK/p2$mode/m"
	check "$mode: both wrote the same lock" cmp "$WORK/pair.lock.b" "$WORK/pair.lock.c"
	# the second waits on each blob's lock and reuses what the first committed
	served=$(tail -n +$((before + 1)) "$log" | awk '$2 ~ /\/resolve\// && ($3 == 206 || $3 == 200) {s += $4} END {print s + 0}')
	total=$(cat "$B"/pair/* | wc -c)
	if [ "$served" -eq "$total" ]; then ok "$mode: each byte served once for two pulls ($served of $total)"
	else not_ok "$mode: each byte served once for two pulls (served $served, files hold $total)"; fi
	cp "$WORK/pair.lock.b" "$WORK/pair.lock.a"
	n=$(find "$st/blobs" -type f | wc -l)
	if [ "$n" -eq 21 ]; then ok "$mode: 21 blobs for 21 files"; else not_ok "$mode: 21 blobs for 21 files (got $n)"; fi
done
finish
