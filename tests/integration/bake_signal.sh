#!/bin/sh
# bake_signal.sh - what a bake leaves behind when it is stopped. It writes in
# ".<out>.fgpack-tmp.<pid>" beside OUT: SIGTERM, SIGINT and SIGHUP mid-bake
# remove that folder (exit 143, 130, 129; no OUT, no statement); a SIGKILL's
# stays, and the next bake of OUT removes it and any other old one of a dead
# pid, never one whose pid is alive, one younger than 60 s or another
# output's; and older versions' ".OUT.fgpack-tmp-XXXXXX" and "OUT.partial"
# (no pid) 60 s old or more. bake int4 on tests/int4/int4ref.py's tiny
# checkpoint (bake_int4.sh's), bake prune-head on prune_head.sh's rope-linear; each with 64 MiB more to
# copy, so that the bake is caught (SIGSTOP) while its folder exists.
. "$(dirname "$0")/../lib.sh"
PY=/usr/bin/python3 # Debian's, with python3-numpy (int4ref.py needs it)
[ -x "$PY" ] || PY=python3
REF="$TOP/tests/int4/int4ref.py"
cd "$WORK" || exit 1

check "make a tiny sharded Gemma 4 checkpoint" $PY "$REF" make src --special --shards 2 --seed 7
check "  with 64 MiB more to copy" sh -c "head -c 67108864 /dev/zero | tr '\\0' x >src/extra.bin"
mkdir -p tied && cp "$TOP/tests/fixtures/oracle/variants/rope-linear/config.json" \
	"$TOP/tests/fixtures/oracle/variants/rope-linear/model.safetensors" tied/ &&
	printf '{"placeholder": true}\n' >tied/tokenizer.json && cp src/extra.bin tied/
python3 -c 'import json; json.dump({"keep_ids": [0, 1, 2, 5, 9, 33, 63, 255], "pruned_vocab_K": 8, "full_vocab": 256}, open("k.json", "w"))'

# catch OUT SIG: starts a bake into OUT (bake int4, or prune-head with PRUNE=1), stops it once its temporary folder
# exists, sends SIG; prints its exit status, or "missed" when it ended first
# (SIGINT not ignored, as a background job's is)
catch() {
	(exec env --default-signal=INT "$FGPACK" $(if [ -n "${PRUNE:-}" ]; then
		echo bake prune-head tied --keepset k.json "$1"; else echo bake int4 src "$1" -j 1; fi)) >"$1.log" 2>&1 &
	pid=$!
	echo $pid >"$1.pid"
	signal_when $pid ".$1.fgpack-tmp.$pid" "$2"
}
# caught OUT SIG: catch, tried again (a busy machine may not run this shell
# for the whole bake) up to three times; r gets the exit status
caught() {
	for try in 1 2 3; do
		r=$(catch $1 $2)
		[ "$r" != missed ] && return 0
		rm -rf $1 $1.intoto.json
	done
	not_ok "$verb: SIG$2 mid-bake: three bakes ended before they were caught"
	return 1
}
for verb in int4 prune; do
	PRUNE=; [ $verb = prune ] && PRUNE=1
	for sig in TERM INT HUP; do
		o=o$verb$sig
		caught $o $sig || continue
		want=143; [ $sig = INT ] && want=130; [ $sig = HUP ] && want=129
		if [ "$r" = $want ]; then ok "$verb: SIG$sig mid-bake exits $r"
		else not_ok "$verb: SIG$sig mid-bake exits $r (wanted $want)"; sed 's/^/#   /' $o.log; fi
		left=$(ls -a | grep 'fgpack-tmp' || true)
		if [ -z "$left" ]; then ok "  no temporary folder left"
		else not_ok "  no temporary folder left ($left)"; fi
		check "  no output and no statement" test ! -e $o -a ! -e $o.intoto.json
	done

	# SIGKILL: the folder stays (no handler runs); made to look a minute old
	o=o${verb}KILL
	caught $o KILL || continue
	kpid=$(cat $o.pid)
	check "$verb: SIGKILL mid-bake leaves .$o.fgpack-tmp.$kpid" test -d ".$o.fgpack-tmp.$kpid"
	# a pid above pid_max is no process; $$ (this shell) is alive
	big=$(($(cat /proc/sys/kernel/pid_max) + 1))
	for f in ".$o.fgpack-tmp.$kpid.3" ".$o.fgpack-tmp.$big" ".$o.fgpack-tmp.$$" ".$o.fgpack-tmp.$$.2" \
		".$o.fgpack-tmp.$kpid.4" ".other.fgpack-tmp.$kpid" ".$o.fgpack-tmp.${kpid}x"; do
		mkdir -p "$f/sub" && : >"$f/model.safetensors" && : >"$f/sub/f"
	done
	find ".$o.fgpack-tmp.$kpid" ".$o.fgpack-tmp.$kpid.3" ".$o.fgpack-tmp.$big" ".$o.fgpack-tmp.$$" \
		".$o.fgpack-tmp.$$.2" ".other.fgpack-tmp.$kpid" ".$o.fgpack-tmp.${kpid}x" -exec touch -d '-5 minutes' {} +
	# .4: its folder old, a file right in it written a moment ago
	touch -d '-5 minutes' ".$o.fgpack-tmp.$kpid.4" ".$o.fgpack-tmp.$kpid.4/sub"
	# older versions' names, with no pid: int4's mkdtemp ".OUT.fgpack-tmp-XXXXXX"
	# and prune-head's "OUT.partial"; those a minute old or more go, a young
	# one, a near name and a link (to an old folder) stay
	for f in ".$o.fgpack-tmp-Ab3xYz" "$o.partial" ".$o.fgpack-tmp-Qw9Er1" ".$o.fgpack-tmp-Ab3xY" old-target; do
		mkdir -p "$f" && : >"$f/model.safetensors"
	done
	mkdir -p ".$o.fgpack-tmp-Ab3xYz/sub" && : >".$o.fgpack-tmp-Ab3xYz/sub/f"
	ln -s old-target ".$o.fgpack-tmp-Lnk123"
	find ".$o.fgpack-tmp-Ab3xYz" "$o.partial" ".$o.fgpack-tmp-Ab3xY" old-target -exec touch -d '-5 minutes' {} +
	touch -h -d '-5 minutes' ".$o.fgpack-tmp-Lnk123"
	check "$verb: the next bake of that output" sh -c "$(if [ -n "$PRUNE" ]; then
		echo "'$FGPACK' bake prune-head tied --keepset k.json $o"; else
		echo "'$FGPACK' bake int4 src $o -j 2"; fi) >$o.log2 2>&1"
	check "  its output is there" test -d $o -a -f $o.intoto.json
	check "  the killed bake's folder and other dead pids' old ones are removed" sh -c \
		"[ ! -e '.$o.fgpack-tmp.$kpid' ] && [ ! -e '.$o.fgpack-tmp.$kpid.3' ] && [ ! -e '.$o.fgpack-tmp.$big' ]"
	check "  a live pid's stay" test -d ".$o.fgpack-tmp.$$/sub" -a -d ".$o.fgpack-tmp.$$.2/sub"
	check "  a dead pid's with a file written less than 60 s ago stays" test -f ".$o.fgpack-tmp.$kpid.4/model.safetensors"
	check "  another output's and a name not quite ours stay" \
		test -d ".other.fgpack-tmp.$kpid/sub" -a -d ".$o.fgpack-tmp.${kpid}x/sub"
	check "  an older version's .$o.fgpack-tmp-XXXXXX and $o.partial, a minute old, are removed" \
		test ! -e ".$o.fgpack-tmp-Ab3xYz" -a ! -e "$o.partial"
	check "  a younger one, a name not quite theirs and a link to an old folder stay" \
		test -f ".$o.fgpack-tmp-Qw9Er1/model.safetensors" -a -f ".$o.fgpack-tmp-Ab3xY/model.safetensors" \
		-a -L ".$o.fgpack-tmp-Lnk123" -a -f old-target/model.safetensors
	rm -rf ".$o.fgpack-tmp.$$" ".$o.fgpack-tmp.$$.2" ".$o.fgpack-tmp.$kpid.4" ".other.fgpack-tmp.$kpid" \
		".$o.fgpack-tmp.${kpid}x" ".$o.fgpack-tmp-Qw9Er1" ".$o.fgpack-tmp-Ab3xY" ".$o.fgpack-tmp-Lnk123" old-target \
		".$o.fgpack-tmp-Ab3xYz" "$o.partial"
done
finish
