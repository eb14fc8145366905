#!/bin/sh
# store.sh - `fgpack store path|verify|gc` on a store seeded by hand with
# sha256sum (independent of fgpack's own hashing): verify finds and
# quarantines a corrupted blob (exit 3), gc keeps what a lock references
# and removes the temporary files SIGKILLed atomic writers left.
. "$(dirname "$0")/../lib.sh"
export FGPACK_HOME="$WORK/store"

seed() { # CONTENT -> prints the blob's sha256 after placing it in blobs/
	h=$(printf '%s' "$1" | sha256sum | cut -d' ' -f1)
	d="$FGPACK_HOME/blobs/sha256/$(echo "$h" | cut -c1-2)"
	mkdir -p "$d"
	printf '%s' "$1" > "$d/$h"
	chmod 0444 "$d/$h"
	echo "$h"
}

check "store path prints the root" sh -c '"$FGPACK" store path | grep -qx "$FGPACK_HOME"'
check "store --help" "$FGPACK" store --help
check_exit "store without subcommand is a usage error" 2 "$FGPACK" store
check_exit "store bad option is a usage error" 2 "$FGPACK" store verify --frobnicate
a=$(seed "alpha")
b=$(seed "bravo")
c=$(seed "charlie")
check "store path SHA prints the blob" sh -c "\"$FGPACK\" store path $a | grep -q 'blobs/sha256/$(echo $a | cut -c1-2)/$a\$'"
check_exit "store path of a missing blob fails" 1 "$FGPACK" store path 0000000000000000000000000000000000000000000000000000000000000000
"$FGPACK" store verify >"$WORK/v1" 2>&1
check_grep "verify: 3 good blobs" "verified 3 blobs, .* 0 bad" "$WORK/v1"

chmod u+w "$FGPACK_HOME/blobs/sha256/$(echo "$b" | cut -c1-2)/$b"
printf 'BRAVO' > "$FGPACK_HOME/blobs/sha256/$(echo "$b" | cut -c1-2)/$b"
check_exit "verify: corrupted blob gives exit 3" 3 "$FGPACK" store verify -j 2
check_grep "verify: names the bad blob" "bad blob $b" "$WORK/.out"
check "verify: bad blob quarantined" sh -c "ls '$FGPACK_HOME/quarantine' | grep -q '^$b\.'"
"$FGPACK" store verify --json >"$WORK/v2.json"
check_grep "verify --json: clean now" '"bad": 0' "$WORK/v2.json"
check_grep "verify --json: 2 blobs" '"blobs": 2' "$WORK/v2.json"

# a lock referencing only blob a (tree digest computed with sha256sum)
td=$(printf '%s 5 a.txt\n' "$a" | sha256sum | cut -d' ' -f1)
cat >"$WORK/buckets.lock" <<EOL
{
  "manifests": {
    "m.json": {
      "components": {
        "WEIGHTS_BUCKET": {
          "files": [{"path": "a.txt", "sha256": "$a", "size": 5, "remote": {}}],
          "kind": "bucket", "owner": "ns/b", "pins": {}, "role": "weights",
          "source": "hf://buckets/ns/b/w", "tree_digest": "$td"
        }
      },
      "sha256": "$a"
    }
  },
  "schema": 1
}
EOL
check "verify --lock: the blob the lock names is good" "$FGPACK" store verify --lock "$WORK/buckets.lock"
check_grep "verify --lock: only that one hashed" "verified 1 blobs" "$WORK/.out"
sed "s/\"sha256\": \"$a\", \"size\": 5/\"sha256\": \"$b\", \"size\": 5/" "$WORK/buckets.lock" >"$WORK/miss.lock.tmp"
td2=$(printf '%s 5 a.txt\n' "$b" | sha256sum | cut -d' ' -f1)
sed "s/$td/$td2/" "$WORK/miss.lock.tmp" >"$WORK/miss.lock"
check_exit "verify --lock: a missing blob fails" 1 "$FGPACK" store verify --lock "$WORK/miss.lock"
check_grep "verify --lock: names the missing blob" "missing blob $b" "$WORK/.out"
check_exit "gc without any lock refuses" 1 "$FGPACK" store gc
"$FGPACK" store gc --lock "$WORK/buckets.lock" --dry-run >"$WORK/gc1" 2>&1
check_grep "gc --dry-run lists charlie" "would remove $c" "$WORK/gc1"
check "gc --dry-run removed nothing" "$FGPACK" store path "$c"
"$FGPACK" store gc --lock "$WORK/buckets.lock" --json >"$WORK/gc2.json" 2>&1
check_grep "gc --json: one removed" '"removed": 1' "$WORK/gc2.json"
check_exit "gc removed the unreferenced blob" 1 "$FGPACK" store path "$c"
check "gc kept the referenced blob" "$FGPACK" store path "$a"
sed 's/"size": 5/"size": 6/' "$WORK/buckets.lock" >"$WORK/bad.lock"
printf 'delta' >"$WORK/d.txt"
dh=$(sha256sum "$WORK/d.txt" | cut -d' ' -f1)
check "import prints the digest sha256sum gives" sh -c "\"$FGPACK\" store import '$WORK/d.txt' | grep -qx '$dh  $WORK/d.txt'"
check "import: blob present" "$FGPACK" store path "$dh"
check_exit "import --sha256 mismatch fails" 1 "$FGPACK" store import "$WORK/buckets.lock" --sha256 "$dh"
check_grep "import mismatch names both digests" "expected $dh, got" "$WORK/.out"
check "import leaves no temp file" sh -c "[ -z \"\$(ls '$FGPACK_HOME/tmp')\" ]"
# several files at once: one line each, in the order given, the digest
# sha256sum gives; a missing one in the middle fails the import, naming it,
# after the lines of those before it
mkdir -p "$WORK/imp"
for i in 1 2 3 4 5 6; do head -c $((i * 50000)) /dev/urandom >"$WORK/imp/f$i"; done
(cd "$WORK/imp" && sha256sum f1 f2 f3 f4 f5 f6) | sed "s|  |  $WORK/imp/|" >"$WORK/imp.want"
check "import of six files: one line each, in order" sh -c "(cd '$WORK' && '$FGPACK' store import imp/f1 imp/f2 imp/f3 imp/f4 imp/f5 imp/f6) | sed 's|  |  $WORK/|' | cmp - '$WORK/imp.want'"
check_exit "import with a missing file in the middle fails" 1 sh -c "'$FGPACK' store import '$WORK/imp/f1' '$WORK/imp/nope' '$WORK/imp/f2' >'$WORK/imp.out' 2>'$WORK/imp.err'"
check_grep "  naming it" "nope" "$WORK/imp.err"
check "  after the line of the file before it" sh -c "head -n 1 '$WORK/imp.out' | grep -q '  $WORK/imp/f1\$' && [ \$(wc -l <'$WORK/imp.out') -eq 1 ]"
check_exit "gc refuses a hand-broken lock" 1 "$FGPACK" store gc --lock "$WORK/bad.lock"
check_grep "gc names the broken field" "tree_digest: does not match" "$WORK/.out"

# what fg_file_write_atomic leaves behind a SIGKILL ("<path>.tmp.<pid>[.<n>]")
# in placed/, roots/ and beside a root's lock file: gc removes a dead
# writer's (a process SIGKILLed here) once older than 60 s, never a live
# pid's (this script's sleep) nor a younger one
sleep 600 &
dead=$!
kill -KILL $dead
wait $dead 2>/dev/null
sleep 600 &
live=$!
at_exit "kill $live"
lk=$WORK/buckets.lock
mkdir -p "$FGPACK_HOME/placed" "$FGPACK_HOME/roots"
rh=$(printf '%s' "$lk" | sha256sum | cut -d' ' -f1)
printf '%s\n' "$lk" >"$FGPACK_HOME/roots/$rh"
ph=$(printf 'x' | sha256sum | cut -d' ' -f1)
for f in "placed/$ph.json.tmp.$dead" "placed/$ph.json.tmp.$dead.2" "placed/$ph.json.tmp.$live" \
	"roots/$rh.tmp.$dead" "roots/$rh.tmp.$live"; do
	: >"$FGPACK_HOME/$f"; touch -d '-5 minutes' "$FGPACK_HOME/$f"
done
for f in "buckets.lock.tmp.$dead" "buckets.lock.tmp.$dead.4" "buckets.lock.tmp.$live" "other.lock.tmp.$dead"; do
	: >"$WORK/$f"; touch -d '-5 minutes' "$WORK/$f"
done
: >"$FGPACK_HOME/placed/$ph.json.tmp.$dead.3"
: >"$WORK/buckets.lock.tmp.$dead.5"
"$FGPACK" store gc --json >"$WORK/gc3.json" 2>&1
check_grep "gc of leftover temporaries: 5 removed" '"removed_tmps": 5' "$WORK/gc3.json"
check "  a SIGKILLed writer's in placed/, roots/ and beside the root lock are gone" sh -c "
	for f in '$FGPACK_HOME/placed/$ph.json.tmp.$dead' '$FGPACK_HOME/placed/$ph.json.tmp.$dead.2' \
		'$FGPACK_HOME/roots/$rh.tmp.$dead' '$WORK/buckets.lock.tmp.$dead' '$WORK/buckets.lock.tmp.$dead.4'; do
		[ ! -e \"\$f\" ] || exit 1
	done"
check "  a live pid's stay" sh -c "[ -e '$FGPACK_HOME/placed/$ph.json.tmp.$live' ] && [ -e '$FGPACK_HOME/roots/$rh.tmp.$live' ] && [ -e '$WORK/buckets.lock.tmp.$live' ]"
check "  a dead pid's younger than 60 s stay" sh -c "[ -e '$FGPACK_HOME/placed/$ph.json.tmp.$dead.3' ] && [ -e '$WORK/buckets.lock.tmp.$dead.5' ]"
check "  beside the root lock, another file's stays" test -e "$WORK/other.lock.tmp.$dead"
check "  the root's lock is still read (its blob kept)" "$FGPACK" store path "$a"

# tmp/: an import copies into "<n>-<time>.fgtmp.<pid>" there. SIGTERM
# mid-import removes it (exit 143); one a SIGKILL left (a dead pid, 60 s old)
# is removed by the next import, as by gc, which also removes a dead git
# fetch's scratch folder; a live pid's (this script's sleep) and a younger
# one stay
head -c 134217728 /dev/zero | tr '\0' y >"$WORK/bigimp"
in_tmp() { for f in "$FGPACK_HOME"/tmp/*.fgtmp.$1; do [ -e "$f" ] && return 0; done; return 1; }
"$FGPACK" store import "$WORK/bigimp" >"$WORK/bigimp.out" 2>&1 &
ipid=$!
while kill -0 $ipid 2>/dev/null && ! in_tmp $ipid; do :; done
kill -STOP $ipid 2>/dev/null
if in_tmp $ipid; then
	kill -TERM $ipid
	kill -CONT $ipid
	wait $ipid
	r=$?
	if [ $r -eq 143 ]; then ok "import stopped by SIGTERM mid-copy (exit 143)"
	else not_ok "import stopped by SIGTERM mid-copy (exit $r, wanted 143)"; fi
	check "  leaves nothing in tmp/" sh -c "[ -z \"\$(ls '$FGPACK_HOME/tmp')\" ]"
else
	kill -CONT $ipid 2>/dev/null
	wait $ipid
	not_ok "import stopped by SIGTERM mid-copy: it ended before it was caught"
fi
for f in "1-ab.fgtmp.$dead" "2-ab.fgtmp.$live" "3-ab.fgtmp.$dead" "4-ab.fgtmp.$dead"; do
	: >"$FGPACK_HOME/tmp/$f"
done
mkdir -p "$FGPACK_HOME/tmp/5-ab.fgtmp.$dead/repo.git" "$FGPACK_HOME/tmp/6-ab.fgtmp.$live/repo.git"
touch -d '-5 minutes' "$FGPACK_HOME/tmp/1-ab.fgtmp.$dead" "$FGPACK_HOME/tmp/2-ab.fgtmp.$live" \
	"$FGPACK_HOME/tmp/4-ab.fgtmp.$dead" "$FGPACK_HOME/tmp/5-ab.fgtmp.$dead/repo.git" \
	"$FGPACK_HOME/tmp/5-ab.fgtmp.$dead" "$FGPACK_HOME/tmp/6-ab.fgtmp.$live"
check "the next import" "$FGPACK" store import "$WORK/d.txt"
check "  removed the dead pid's old file in tmp/" sh -c "[ ! -e '$FGPACK_HOME/tmp/1-ab.fgtmp.$dead' ] && [ ! -e '$FGPACK_HOME/tmp/4-ab.fgtmp.$dead' ]"
check "  kept a live pid's, a younger one and the folder" sh -c "[ -e '$FGPACK_HOME/tmp/2-ab.fgtmp.$live' ] && [ -e '$FGPACK_HOME/tmp/3-ab.fgtmp.$dead' ] && [ -d '$FGPACK_HOME/tmp/5-ab.fgtmp.$dead' ]"
"$FGPACK" store gc --lock "$WORK/buckets.lock" --json >"$WORK/gc4.json" 2>&1
check_grep "gc: the dead git fetch's scratch folder counted" '"removed_tmps": 1' "$WORK/gc4.json"
check "  and gone; a live pid's folder stays" sh -c "[ ! -e '$FGPACK_HOME/tmp/5-ab.fgtmp.$dead' ] && [ -d '$FGPACK_HOME/tmp/6-ab.fgtmp.$live/repo.git' ]"
rm -rf "$FGPACK_HOME"/tmp/*

# Paired hashing: with -j 1 verify hashes two blobs of like size at once
# (their blocks interleaved on SHA-NI); a bad blob must be caught whichever
# stream it is in, and also in the tail one stream hashes alone.
# Blobs of 1 MiB and more are read with O_DIRECT (the AIO path).
export FGPACK_HOME="$WORK/store2"
seedf() { # BYTES SEED -> the blob's sha256, placed in the store
	head -c "$1" /dev/zero | tr '\0' "$2" >"$WORK/blob.tmp"
	printf '%s' "$2" >>"$WORK/blob.tmp"
	h=$(sha256sum "$WORK/blob.tmp" | cut -d' ' -f1)
	d="$FGPACK_HOME/blobs/sha256/$(echo "$h" | cut -c1-2)"
	mkdir -p "$d"
	mv "$WORK/blob.tmp" "$d/$h"
	chmod 0444 "$d/$h"
	echo "$h"
}
corrupt() { # SHA OFFSET: flips the byte there (the blob stays its size)
	f="$FGPACK_HOME/blobs/sha256/$(echo "$1" | cut -c1-2)/$1"
	chmod u+w "$f"
	printf 'Z' | dd of="$f" bs=1 seek="$2" conv=notrunc 2>/dev/null
	chmod 0444 "$f"
}
"$FGPACK" store path >/dev/null
# like sizes pair up: (p1, p2) and (p3, p4); p3 ends 2 MiB before p4
p1=$(seedf 1048583 a)
p2=$(seedf 1048583 b)
p3=$(seedf 2097157 c)
p4=$(seedf 4194310 d)
check "pairs: 4 good blobs" "$FGPACK" store verify -j 1
check_grep "pairs: all good" "verified 4 blobs, .* 0 bad" "$WORK/.out"
first=$(printf '%s\n%s\n' "$p1" "$p2" | sort | head -1)
second=$(printf '%s\n%s\n' "$p1" "$p2" | sort | tail -1)
corrupt "$first" 1048000
check_exit "pairs: bad blob in the first stream gives exit 3" 3 "$FGPACK" store verify -j 1
check_grep "pairs: names the first stream's blob" "bad blob $first" "$WORK/.out"
check "pairs: first stream's blob quarantined" sh -c "ls '$FGPACK_HOME/quarantine' | grep -q '^$first\.'"
# a fresh partner for the one left of the first pair: the larger digest of
# the two is the second stream (a pair is hashed in blob order); p4 is hashed
# alone after p3 ends, and a byte is flipped there
p5=$(seedf 1048583 g)
second=$(printf '%s\n%s\n' "$second" "$p5" | sort | tail -1)
corrupt "$second" 5
corrupt "$p4" 4194000
FG_SHA256_X2=1 "$FGPACK" store verify -j 1 --json >"$WORK/p.json"
check_grep "pairs: two bad found" '"bad": 2' "$WORK/p.json"
check_grep "pairs: the second stream's blob named" "$second" "$WORK/p.json"
check_grep "pairs: the blob hashed alone at its end named" "$p4" "$WORK/p.json"
check "pairs: both quarantined" sh -c "ls '$FGPACK_HOME/quarantine' | grep -q '^$second\.' && ls '$FGPACK_HOME/quarantine' | grep -q '^$p4\.'"
check "pairs: the good one stays" "$FGPACK" store verify -j 1
check_grep "pairs: two good left" "verified 2 blobs, .* 0 bad" "$WORK/.out"
# the same without SHA-NI (one blob per item, as before pairs)
seedf 1048583 e >/dev/null
q2=$(seedf 1048583 f)
corrupt "$q2" 7
check_exit "FG_SHA256_X2=0: bad blob gives exit 3" 3 env FG_SHA256_X2=0 "$FGPACK" store verify -j 1
check_grep "FG_SHA256_X2=0: names it" "bad blob $q2" "$WORK/.out"
check "FG_SHA256_X2=0: the rest good" env FG_SHA256_X2=0 "$FGPACK" store verify -j 2
check_grep "FG_SHA256_X2=0: the three good" "verified 3 blobs, .* 0 bad" "$WORK/.out"
finish
