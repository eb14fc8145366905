#!/bin/sh
# bundle_signal.sh - what an extraction leaves behind when it is stopped
# (fg_tarball_extract, through fgpack exec --dir DEST). It writes in
# ".DEST.fgpack-tmp.<pid>" beside DEST: SIGTERM, SIGINT and SIGHUP mid-
# extraction remove that folder (exit 143, 130, 129; no DEST), in lanes (a
# bundle pack wrote) and in one stream (a plain zstd tar); a SIGKILL's stays,
# and the next extraction to DEST removes it and any other dead pid's
# unchanged for 60 s, and older versions' "DEST.partial.XXXXXX" (no pid)
# unchanged for 60 s; never a live pid's, a younger one, another DEST's or a
# link. Without --dir: SIGTERM and SIGHUP leave nothing of exec's
# "$TMPDIR/fgpack-bundle-<pid>" (mid-extraction, while it is checked or its
# command runs); a SIGKILL's is removed by a later run once unchanged for
# 60 s, never a live pid's, a younger one, an older version's
# "fgpack-bundle.XXXXXX" or a link; a --dir DEST that checked out is kept.
# The bundle holds 512 MiB of zeros (2 MB packed), so that the extraction
# is caught (SIGSTOP) while its folder exists.
. "$(dirname "$0")/../lib.sh"
cd "$WORK" || exit 1

mkdir -p m
printf '{"architectures": ["Gemma4ForCausalLM"]}\n' >m/config.json
head -c 536870912 </dev/zero >m/big.bin
check "pack a bundle with 512 MiB of zeros" sh -c "'$FGPACK' pack --model m --no-golden -o b.fgb >b.id 2>pack.err"
check "a plain zstd tar of the same (one stream, no lanes)" sh -c "tar cf - -C m . | zstd -q -1 -o plain.tar.zst"
rm -rf m

# catch ARCHIVE DEST SIG: starts exec of ARCHIVE into DEST, stops it once its
# temporary folder exists, sends SIG; prints its exit status, or "missed"
# when it ended first (SIGINT not ignored, as a background job's is)
catch() {
	(exec env --default-signal=INT "$FGPACK" exec "$1" --dir "$2" -- true) >"$2.log" 2>&1 &
	pid=$!
	echo $pid >"$2.pid"
	signal_when $pid ".$2.fgpack-tmp.$pid" "$3"
}
# caught ARCHIVE DEST SIG: catch, tried again (a busy machine may not run
# this shell for the whole extraction) up to three times; r gets the status
caught() {
	for try in 1 2 3; do
		r=$(catch $1 $2 $3)
		[ "$r" != missed ] && return 0
		rm -rf $2
	done
	not_ok "$2: SIG$3 mid-extraction: three extractions ended before they were caught"
	return 1
}
for run in b.fgb:TERM b.fgb:INT b.fgb:HUP plain.tar.zst:TERM; do
	a=${run%:*} sig=${run#*:}
	d=d$sig; [ $a = plain.tar.zst ] && d=p$sig
	caught $a $d $sig || continue
	want=143; [ $sig = INT ] && want=130; [ $sig = HUP ] && want=129
	if [ "$r" = $want ]; then ok "$a: SIG$sig mid-extraction exits $r"
	else not_ok "$a: SIG$sig mid-extraction exits $r (wanted $want)"; sed 's/^/#   /' $d.log; fi
	left=$(ls -A | grep -e fgpack-tmp -e partial || true)
	if [ -z "$left" ]; then ok "  no temporary folder left beside DEST"
	else not_ok "  no temporary folder left beside DEST ($left)"; fi
	check "  no DEST" test ! -e $d
done

# SIGKILL: the folder stays (no handler runs); made to look a minute old
d=dKILL
if caught b.fgb $d KILL; then
	kpid=$(cat $d.pid)
	check "SIGKILL mid-extraction leaves .$d.fgpack-tmp.$kpid" test -d ".$d.fgpack-tmp.$kpid"
	# a pid above pid_max is no process; $$ (this shell) is alive
	big=$(($(cat /proc/sys/kernel/pid_max) + 1))
	for f in ".$d.fgpack-tmp.$big" ".$d.fgpack-tmp.$big.2" ".$d.fgpack-tmp.$$" ".other.fgpack-tmp.$big" \
		"$d.partial.Ab3xYz" "$d.partial.Qw9Er1" "$d.partial.Ab3xY" "other.partial.Ab3xYz" old-target; do
		mkdir -p "$f/sub" && : >"$f/big.bin" && : >"$f/sub/f"
	done
	ln -s old-target "$d.partial.Lnk123"
	# all a minute old or more but .<big>.2 and one old-style name
	find ".$d.fgpack-tmp.$kpid" ".$d.fgpack-tmp.$big" ".$d.fgpack-tmp.$$" ".other.fgpack-tmp.$big" \
		"$d.partial.Ab3xYz" "$d.partial.Ab3xY" "other.partial.Ab3xYz" old-target -exec touch -d '-5 minutes' {} +
	touch -h -d '-5 minutes' "$d.partial.Lnk123"
	check "the next extraction to that DEST" sh -c "'$FGPACK' exec b.fgb --dir $d -- true >$d.log2 2>&1"
	check "  DEST is there, whole" test "$(stat -c %s $d/components/model/big.bin)" = 536870912
	check "  the killed extraction's folder and another dead pid's old one are removed" \
		test ! -e ".$d.fgpack-tmp.$kpid" -a ! -e ".$d.fgpack-tmp.$big"
	check "  an older version's $d.partial.XXXXXX a minute old is removed" test ! -e "$d.partial.Ab3xYz"
	check "  a dead pid's younger than 60 s and a live pid's stay" \
		test -f ".$d.fgpack-tmp.$big.2/sub/f" -a -f ".$d.fgpack-tmp.$$/sub/f"
	check "  an old-style one younger than 60 s, a near name and another DEST's stay" \
		test -f "$d.partial.Qw9Er1/sub/f" -a -f "$d.partial.Ab3xY/sub/f" -a -f "other.partial.Ab3xYz/sub/f" \
		-a -f ".other.fgpack-tmp.$big/sub/f"
	check "  a link of that name stays, and what it points to" \
		test -L "$d.partial.Lnk123" -a -f old-target/sub/f
	rm -rf "$d"
fi

# Without --dir exec extracts into "$TMPDIR/fgpack-bundle-<pid>", tracked
# until exec ends: SIGTERM or SIGHUP while it is checked or its command
# runs, or during the extraction (".fgpack-bundle-<pid>.fgpack-tmp.<pid>"
# beside it), leaves nothing in TMPDIR.
# catch_tmp TMP SIG WHEN: exec b.fgb -- sleep 30 with TMPDIR=TMP (made
# fresh), stopped once its folder exists (WHEN dir) or its extraction's
# (WHEN tmp), sent SIG; prints the exit status or "missed"
catch_tmp() {
	rm -rf "$1" && mkdir "$1"
	(TMPDIR=$1 exec env --default-signal=INT "$FGPACK" exec b.fgb -- sleep 30) >"$1.log" 2>&1 &
	pid=$!
	# its bundle.json: the name itself is made and removed once before
	w="$1/fgpack-bundle-$pid/bundle.json"; [ "$3" = tmp ] && w="$1/.fgpack-bundle-$pid.fgpack-tmp.$pid"
	signal_when $pid "$w" "$2"
}
for run in TERM:dir HUP:dir TERM:tmp HUP:tmp; do
	sig=${run%:*} when=${run#*:}
	t=$WORK/tmp$sig$when
	for try in 1 2 3; do
		r=$(catch_tmp $t $sig $when)
		[ "$r" != missed ] && break
	done
	if [ "$r" = missed ]; then not_ok "exec, no --dir: SIG$sig ($when): three runs ended first"; continue; fi
	want=143; [ $sig = HUP ] && want=129
	what="once \$TMPDIR/fgpack-bundle-<pid> exists"
	[ $when = tmp ] && what="mid-extraction"
	if [ "$r" = $want ]; then ok "exec, no --dir: SIG$sig $what exits $r"
	else not_ok "exec, no --dir: SIG$sig $what exits $r (wanted $want)"; sed 's/^/#   /' $t.log; fi
	left=$(ls -A $t | grep fgpack-bundle || true)
	if [ -z "$left" ]; then ok "  nothing named fgpack-bundle* or .fgpack-bundle* left in TMPDIR"
	else not_ok "  nothing named fgpack-bundle* or .fgpack-bundle* left in TMPDIR ($left)"; fi
done

# SIGKILL of exec while its command runs: the folder stays (the command,
# orphaned, is killed too); a later run with that TMPDIR removes it once
# unchanged for 60 s, and dead pids' extraction folders, never a live
# pid's, a younger one, an older version's fgpack-bundle.XXXXXX or a link.
t=$WORK/tmpKILL
rm -rf $t && mkdir $t
(TMPDIR=$t exec "$FGPACK" exec b.fgb -- sh -c 'echo $$ >"$TMPDIR.cmd"; exec sleep 30') >$t.log 2>&1 &
kpid=$!
n=0
while [ ! -s $t.cmd ] && kill -0 $kpid 2>/dev/null && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done
kill -KILL $kpid 2>/dev/null
wait $kpid 2>/dev/null
[ -s $t.cmd ] && kill "$(cat $t.cmd)" 2>/dev/null
if check "SIGKILL of exec leaves \$TMPDIR/fgpack-bundle-<pid>" test -f "$t/fgpack-bundle-$kpid/bundle.json"; then
	big=$(($(cat /proc/sys/kernel/pid_max) + 1))
	mkdir -p $WORK/old-target2
	for f in "fgpack-bundle-$big" "fgpack-bundle-$((big + 1)).3" "fgpack-bundle-$$" "fgpack-bundle.Ab3xYz" \
		".fgpack-bundle-$((big + 2)).fgpack-tmp.$((big + 2))" ".fgpack-bundle.Qw9Er1.fgpack-tmp.$((big + 3))" \
		".fgpack-bundle-$$.fgpack-tmp.$$" "other-$big"; do
		mkdir -p "$t/$f/sub" && : >"$t/$f/big.bin" && : >"$t/$f/sub/f"
	done
	: >$WORK/old-target2/f
	ln -s $WORK/old-target2 "$t/fgpack-bundle-$((big + 4))"
	# all five minutes old but fgpack-bundle-<big>
	for f in "fgpack-bundle-$kpid" "fgpack-bundle-$((big + 1)).3" "fgpack-bundle-$$" "fgpack-bundle.Ab3xYz" \
		".fgpack-bundle-$((big + 2)).fgpack-tmp.$((big + 2))" ".fgpack-bundle.Qw9Er1.fgpack-tmp.$((big + 3))" \
		".fgpack-bundle-$$.fgpack-tmp.$$" "other-$big" "fgpack-bundle-$((big + 4))"; do
		find "$t/$f" -exec touch -h -d '-5 minutes' {} +
	done
	check "the next exec with that TMPDIR" sh -c "TMPDIR=$t '$FGPACK' exec b.fgb -- true >$t.log2 2>&1"
	check "  the killed one's folder and another dead pid's old one are removed" \
		test ! -e "$t/fgpack-bundle-$kpid" -a ! -e "$t/fgpack-bundle-$((big + 1)).3"
	check "  dead pids' old extraction folders (.fgpack-bundle-<pid>.fgpack-tmp.<pid>, old-style too) are removed" \
		test ! -e "$t/.fgpack-bundle-$((big + 2)).fgpack-tmp.$((big + 2))" \
		-a ! -e "$t/.fgpack-bundle.Qw9Er1.fgpack-tmp.$((big + 3))"
	check "  a live pid's, a dead pid's younger than 60 s and a live pid's extraction folder stay" \
		test -f "$t/fgpack-bundle-$$/sub/f" -a -f "$t/fgpack-bundle-$big/sub/f" \
		-a -f "$t/.fgpack-bundle-$$.fgpack-tmp.$$/sub/f"
	check "  an older version's fgpack-bundle.XXXXXX (no pid) and another name stay" \
		test -f "$t/fgpack-bundle.Ab3xYz/sub/f" -a -f "$t/other-$big/sub/f"
	check "  a link named fgpack-bundle-<dead pid> stays, and what it points to" \
		test -L "$t/fgpack-bundle-$((big + 4))" -a -f $WORK/old-target2/f
	left=$(ls -A $t | grep -c fgpack-bundle || true)
	check "  that exec's own folder is gone (5 names left)" test "$left" = 5
fi

# exec --dir DEST keeps DEST: once it checked out it is no longer tracked,
# so neither exec's end nor a signal while the command runs removes it
check "exec --dir DEST exits 0" sh -c "'$FGPACK' exec b.fgb --dir kept -- true >kept.log 2>&1"
check "  DEST is kept, whole" test "$(stat -c %s kept/components/model/big.bin 2>/dev/null)" = 536870912
rm -f kept2.cmd
("$FGPACK" exec b.fgb --dir kept2 -- sh -c 'echo $$ >kept2.cmd; exec sleep 30') >kept2.log 2>&1 &
kpid=$!
n=0
while [ ! -s kept2.cmd ] && kill -0 $kpid 2>/dev/null && [ $n -lt 600 ]; do sleep 0.05; n=$((n + 1)); done
kill -TERM $kpid
wait $kpid
r=$?
if [ "$r" = 143 ]; then ok "exec --dir DEST: SIGTERM while the command runs exits 143"
else not_ok "exec --dir DEST: SIGTERM while the command runs exits $r (wanted 143)"; sed 's/^/#   /' kept2.log; fi
check "  DEST is kept, whole" test "$(stat -c %s kept2/components/model/big.bin 2>/dev/null)" = 536870912
rm -rf kept kept2
finish
