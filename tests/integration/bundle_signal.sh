#!/bin/sh
# bundle_signal.sh - what an extraction leaves behind when it is stopped
# (fg_tarball_extract, through fgpack exec --dir DEST). It writes in
# ".DEST.fgpack-tmp.<pid>" beside DEST: SIGTERM, SIGINT and SIGHUP mid-
# extraction remove that folder (exit 143, 130, 129; no DEST), in lanes (a
# bundle pack wrote) and in one stream (a plain zstd tar); a SIGKILL's stays,
# and the next extraction to DEST removes it and any other dead pid's
# unchanged for 60 s, and older versions' "DEST.partial.XXXXXX" (no pid)
# unchanged for 60 s; never a live pid's, a younger one, another DEST's or a
# link. The bundle holds 512 MiB of zeros (2 MB packed), so that the
# extraction is caught (SIGSTOP) while its folder exists.
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
finish
