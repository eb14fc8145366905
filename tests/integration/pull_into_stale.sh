#!/bin/sh
# pull_into_stale.sh - a second `pull --into DIR` of a manifest whose lock
# changed takes back what the first placed and the lock no longer names:
# removed while it still holds the bytes placed (the store's inode, or an
# identical copy), with the folders left empty; a file changed since is kept
# with a warning; files fgpack never placed, files placed for another manifest,
# and anything reached through a symlinked folder are left alone, and files in
# the target folders that the lock does not name are reported (the
# stale-directory trap). A pull --copy killed mid-copy leaves no
# "<file>.fgtmp.<pid>" behind (SIGTERM, SIGINT), or the next pull into the
# folder removes it (SIGKILL) once it is 60 s old. Sources are file://
# folders (no server).
. "$(dirname "$0")/../lib.sh"
export FGPACK_HOME="$WORK/store"
unset HF_HUB_OFFLINE
cd "$WORK" || exit 1
put() { mkdir -p "$(dirname "$1")" && printf '%s\n' "$2" >"$1"; }
put v1/a.bin "a version 1"
put v1/b.bin "b, only in version 1"
put v1/sub/deep/c.bin "c, only in version 1"
put v1/sub/copy.bin "copy, only in version 1"
put v1/lnk/f.bin "f, only in version 1"
put v2/a.bin "a version 2"
put v2/e.bin "e, new in version 2"
put d1/x.bin "drafter x"
put d1/y.bin "drafter y"
put o1/z.bin "other manifest z"
man() { # man FILE WEIGHTS [DRAFTER]
	if [ -n "${3:-}" ]; then
		printf '{"name": "s", "env": {"WEIGHTS_BUCKET": "file://%s/%s", "LOCAL_MODEL_DIR": "/m", "DRAFTER_BUCKET": "file://%s/%s", "LOCAL_DRAFTER_DIR": "/d"}}\n' \
			"$WORK" "$2" "$WORK" "$3" >"$1"
	else
		printf '{"name": "s", "env": {"WEIGHTS_BUCKET": "file://%s/%s", "LOCAL_MODEL_DIR": "/m"}}\n' "$WORK" "$2" >"$1"
	fi
}
man m.json v1 d1
printf '{"name": "o", "env": {"OTHER_BUCKET": "file://%s/o1", "LOCAL_OTHER_DIR": "/m/other"}}\n' "$WORK" >o.json
check "first pull --into out" "$FGPACK" pull m.json --into out
check "the other manifest placed into the same DIR" "$FGPACK" pull o.json --into out
check "  both there" sh -c "cmp v1/sub/deep/c.bin out/m/sub/deep/c.bin && cmp d1/x.bin out/d/x.bin && cmp o1/z.bin out/m/other/z.bin"

put out/m/notes.txt "the user's own file"
# copy.bin replaced by an identical copy (a new inode): still what was placed
cp out/m/sub/copy.bin out/copy.tmp && rm -f out/m/sub/copy.bin && mv out/copy.tmp out/m/sub/copy.bin
# y.bin rewritten by the user: no longer what was placed
rm -f out/d/y.bin && put out/d/y.bin "the user's edit of y"
# lnk/ moved away and replaced by a symlink to where it went
mv out/m/lnk out/elsewhere && ln -s ../elsewhere out/m/lnk

man m.json v2
"$FGPACK" pull m.json --into out --json >pull2.json 2>pull2.err
check_exit "second pull (version 2, no drafter) --into out" 0 sh -c "exit $?"
check "  version 2 placed" sh -c "cmp v2/a.bin out/m/a.bin && cmp v2/e.bin out/m/e.bin"
for f in m/b.bin m/sub/deep/c.bin m/sub/copy.bin d/x.bin; do
	if [ ! -e "out/$f" ]; then ok "  $f (placed, no longer in the lock) removed"; else not_ok "  $f removed"; fi
done
if [ ! -e out/m/sub ]; then ok "  the folders left empty (sub/deep, sub) removed"; else not_ok "  sub/ removed"; ls -R out/m/sub | sed 's/^/#   /'; fi
check "  the user's edit of d/y.bin kept (so d/ stays)" grep -q "the user's edit" out/d/y.bin
check_grep "  a warning names the one changed file kept" "warning: 1 file placed under out earlier and no longer in the lock changed since; kept" pull2.err
check "  the user's own notes.txt kept" grep -q "own file" out/m/notes.txt
check "  the other manifest's file kept" cmp o1/z.bin out/m/other/z.bin
check "  nothing removed through the symlinked folder" cmp v1/lnk/f.bin out/elsewhere/f.bin
check "  --json counts: removed 4, kept_changed 1" python3 -c "
import json; d = json.load(open('pull2.json'))
assert d['removed'] == 4 and d['kept_changed'] == 1, d"
check "  files the lock does not name are reported, not touched: notes.txt and the symlink, not the other manifest's" python3 -c "
import json; d = json.load(open('pull2.json'))
assert d['unknown_files'] == 2 and d['unknown_examples'] == ['m/lnk', 'm/notes.txt'] and not d['unknown_files_more'], d"
check_grep "  and warned about on stderr" "warning: 2 files in the target folders under out that the lock does not name \\(m/lnk, m/notes.txt\\)" pull2.err
"$FGPACK" pull m.json --into out --json >pull3.json 2>/dev/null
check "a third pull, nothing changed: removes nothing" python3 -c "
import json; d = json.load(open('pull3.json'))
assert d['removed'] == 0 and d['kept_changed'] == 0, d"
check "  and leaves version 2 in place" sh -c "cmp v2/a.bin out/m/a.bin && cmp v2/e.bin out/m/e.bin"

# another DIR is another record: pulling version 1 elsewhere takes nothing from out
man m.json v1 d1
check "version 1 into a second DIR" "$FGPACK" pull m.json --into out2
check "  out untouched (version 2 still there)" sh -c "cmp v2/a.bin out/m/a.bin && cmp v2/e.bin out/m/e.bin"
# --copy: independent copies, not links into the store; a serve script that
# writes into one (root ignores the 0444 of a link) leaves the store intact;
# an untouched copy is not written again; copies are taken back like links
man m.json v1 d1
"$FGPACK" pull m.json --into cp --copy --json >cp1.json 2>cp1.err
check_exit "pull --into --copy" 0 sh -c "exit $?"
blob=$(find "$FGPACK_HOME/blobs" -type f -name "$(sha256sum v1/a.bin | cut -d' ' -f1)")
if [ "$(stat -c %i cp/m/a.bin)" != "$(stat -c %i "$blob")" ] && [ "$(stat -c %h cp/m/a.bin)" = 1 ] &&
   [ "$(stat -c %a cp/m/a.bin)" = 644 ] && cmp -s v1/a.bin cp/m/a.bin; then
	ok "  a.bin is a copy of its own (one link, 0644), same bytes"; else not_ok "  a.bin is a copy of its own"; fi
check "  --json counts 7 copied, 0 linked" python3 -c "
import json; d = json.load(open('cp1.json'))
assert d['copied'] == 7 and d['linked'] == 0, d"
ino=$(stat -c %i cp/m/sub/copy.bin)
printf 'scribbled by a serve script\n' >>cp/m/a.bin
check "  writing into a copy leaves the store intact" "$FGPACK" store verify
check "  pull --copy again" "$FGPACK" pull m.json --into cp --copy
check "  the scribbled file restored to the lock's bytes" cmp v1/a.bin cp/m/a.bin
check "  an untouched copy left as it was (same inode)" test "$(stat -c %i cp/m/sub/copy.bin)" = "$ino"
man m.json v2
check "  version 2 with --copy" "$FGPACK" pull m.json --into cp --copy
if [ ! -e cp/m/b.bin ] && [ ! -e cp/d/x.bin ] && cmp -s v2/a.bin cp/m/a.bin; then
	ok "  version 1's copies taken back"; else not_ok "  version 1's copies taken back"; fi
check_exit "--copy without --into: usage error" 2 "$FGPACK" pull m.json --copy

# a second folder target of the weights (MODEL_PATH beside LOCAL_MODEL_DIR):
# both hold the files, and both are taken back
printf '{"name": "two", "env": {"WEIGHTS_BUCKET": "file://%s/v1", "LOCAL_MODEL_DIR": "/m", "MODEL_PATH": "/mp"}}\n' "$WORK" >two.json
check "two folder targets of one component: pull --into" "$FGPACK" pull two.json --into both
check "  LOCAL_MODEL_DIR and MODEL_PATH both hold the files" sh -c "cmp v1/sub/deep/c.bin both/m/sub/deep/c.bin && cmp v1/sub/deep/c.bin both/mp/sub/deep/c.bin"
printf '{"name": "two", "env": {"WEIGHTS_BUCKET": "file://%s/v2", "LOCAL_MODEL_DIR": "/m", "MODEL_PATH": "/mp"}}\n' "$WORK" >two.json
check "  version 2" "$FGPACK" pull two.json --into both
if [ ! -e both/m/b.bin ] && [ ! -e both/mp/b.bin ] && cmp -s v2/e.bin both/mp/e.bin; then
	ok "  both updated, version 1's files taken back from both"; else not_ok "  both updated, version 1's files taken back from both"; fi

# the stale-directory trap on a first pull: a folder that already holds
# another version's shards (not placed by fgpack, so never removed)
put fresh/m/model-00002-of-00002.safetensors "a shard of some other download"
put fresh/m/.cache/huggingface/download/a.bin.metadata "hf download --local-dir's metadata, not reported"
"$FGPACK" pull m.json --into fresh 2>fresh.err
check_exit "a first pull into a folder holding someone else's shard" 0 sh -c "exit $?"
check_grep "  warns, naming the shard" "warning: 1 file in the target folders under fresh that the lock does not name \\(m/model-00002-of-00002.safetensors\\): a serve script reading the folder may load it" fresh.err
check "  and leaves it there" test -f fresh/m/model-00002-of-00002.safetensors
# a name there holding an ESC (0x1b) and a lone 0x9b (a CSI to 8-bit
# terminals) is shown with '?' for each, as error messages show it: neither
# byte reaches the terminal raw
mkdir -p esc/m
printf 'x\n' >"esc/m/$(printf 'a\033[31mb\233c')"
check "a folder holding a file named with ESC and a lone 0x9b" sh -c "ls esc/m | od -An -tx1 -v | grep -qw 1b && ls esc/m | od -An -tx1 -v | grep -qw 9b"
"$FGPACK" pull m.json --into esc 2>esc.err
check_exit "  a first pull into it" 0 sh -c "exit $?"
check_grep "  warns, naming it with '?' for each byte" "warning: 1 file in the target folders under esc that the lock does not name \\(m/a\\?\\[31mb\\?c\\)" esc.err
check "  no ESC and no 0x9b byte on stderr" sh -c "! od -An -tx1 -v esc.err | grep -qw -e 1b -e 9b"
check "  (grep -P agrees)" sh -c "! LC_ALL=C grep -qP '[\\x1b\\x9b]' esc.err"

# store gc drops the record of a folder that no longer exists, keeps the others
nrec() { ls "$FGPACK_HOME/placed" | grep -c '\.json$'; }
before=$(nrec)
check "records of what --into placed are kept by gc while their folders exist" sh -c "'$FGPACK' store gc >/dev/null && [ \$(ls '$FGPACK_HOME/placed' | grep -c '\\.json\$') -eq $before ]"
bothreal=$(cd both && pwd -P)
check "  (one of them names the folder both)" sh -c "grep -q '\"into\": \"$bothreal\"' '$FGPACK_HOME'/placed/*.json"
rm -rf both
check "gc drops the record of a folder that is gone" sh -c "'$FGPACK' store gc >/dev/null && [ \$(ls '$FGPACK_HOME/placed' | grep -c '\\.json\$') -eq $((before - 1)) ]"
check "  and none names it any more" sh -c "! grep -l '\"into\": \"$bothreal\"' '$FGPACK_HOME'/placed/*.json"
# pull --copy killed mid-copy: SIGTERM and SIGINT remove the temporary
# "<file>.fgtmp.<pid>"; after SIGKILL the next pull into that folder removes
# it (its pid is dead), and leaves one whose pid is alive. The pull is
# stopped (SIGSTOP) while its temporary copy of a 256 MiB file exists, so
# the signal lands mid-copy, before the rename.
mkdir -p big
head -c 268435456 /dev/zero | tr '\0' 'x' >big/big.bin
printf '{"name": "big", "env": {"WEIGHTS_BUCKET": "file://%s/big", "LOCAL_MODEL_DIR": "/m"}}\n' "$WORK" >big.json
check "pull the 256 MiB file into the store" "$FGPACK" pull big.json --lock big.lock
# catch_copy DIR SIG: starts pull --copy into DIR, stops it while its
# temporary copy exists, sends SIG; prints the pull's exit status, or
# "missed" when the copy ended before it could be caught
catch_copy() {
	env --default-signal=INT "$FGPACK" pull big.json --lock big.lock --locked --into "$1" --copy >"$1.out" 2>&1 &
	signal_when $! "$1/m/big.bin.fgtmp.$!" "$2"
}
for sig in TERM INT; do
	r=$(catch_copy "k$sig" $sig)
	if [ "$r" = missed ]; then
		ok "SIG$sig mid-copy # SKIP the copy ended before it was caught (a reflink?)"
		continue
	fi
	want=143; [ $sig = INT ] && want=130
	if [ "$r" -eq $want ]; then ok "pull --copy killed by SIG$sig mid-copy (exit $r)"; else not_ok "pull --copy killed by SIG$sig mid-copy (exit $r, wanted $want)"; fi
	left=$(ls "k$sig/m" | grep '\.fgtmp\.' || true)
	if [ -z "$left" ]; then ok "  SIG$sig: no temporary file left in the target folder"
	else not_ok "  SIG$sig: no temporary file left in the target folder ($left)"; fi
done
r=$(catch_copy kKILL KILL)
if [ "$r" = missed ]; then
	ok "SIGKILL mid-copy # SKIP the copy ended before it was caught (a reflink?)"
else
	left=$(ls kKILL/m | grep '\.fgtmp\.' || true)
	if [ -n "$left" ]; then ok "SIGKILL mid-copy leaves $left"; else not_ok "SIGKILL mid-copy leaves a temporary file"; fi
	# a temporary file of a live process (this shell) in the same folder; the
	# killed pull's made to look a few minutes old (a younger one stays)
	printf 'live\n' >"kKILL/m/big.bin.fgtmp.$$"
	touch -d '-5 minutes' "kKILL/m/$left" "kKILL/m/big.bin.fgtmp.$$"
	"$FGPACK" pull big.json --lock big.lock --locked --into kKILL --copy >kKILL.out2 2>&1
	check_exit "the next pull --copy into that folder" 0 sh -c "exit $?"
	if ! ls kKILL/m | grep -v "^big.bin.fgtmp.$$\$" | grep -q '\.fgtmp\.'; then ok "  removed the killed pull's temporary file"
	else not_ok "  removed the killed pull's temporary file ($(ls kKILL/m | tr '\n' ' '))"; fi
	check_grep "  and says so" "1 temporary file of a killed pull removed" kKILL.out2
	check "  kept the one of a live pid" test -f "kKILL/m/big.bin.fgtmp.$$"
	check "  and placed the file" cmp big/big.bin kKILL/m/big.bin
	rm -f "kKILL/m/big.bin.fgtmp.$$"
fi
# the sweep's grace, as every other sweep's: a dead pid's temporary file
# changed in the last 60 s stays (it may be a pull's of another pid
# namespace sharing the folder), an older one goes
dead=$(($(cat /proc/sys/kernel/pid_max) + 1))
mkdir -p sw/m
printf 'old\n' >"sw/m/big.bin.fgtmp.$dead"
printf 'young\n' >"sw/m/other.bin.fgtmp.$dead"
touch -d '-5 minutes' "sw/m/big.bin.fgtmp.$dead"
check "a pull into a folder with a dead pid's old and young temporary files" \
	"$FGPACK" pull big.json --lock big.lock --locked --into sw
cp "$WORK/.out" sw.out
check "  the old one removed" test ! -e "sw/m/big.bin.fgtmp.$dead"
check "  the one changed in the last 60 s kept" test -f "sw/m/other.bin.fgtmp.$dead"
check_grep "  and says 1 removed" "1 temporary file of a killed pull removed" sw.out
check "  and placed the file" cmp big/big.bin sw/m/big.bin
finish
