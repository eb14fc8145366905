#!/bin/sh
# bench/pull_ab.sh OLD NEW - two fgpack binaries pulling the same file over
# loopback from nginx (tests/servers/serve-hub.sh), alternated, with a plain
# `curl -o` in every round: wall, user and system seconds of each run
# (/usr/bin/time), then the medians. For A/B checks of a change to the fetch
# path; docs/bench.md, pull, has the runs it made.
# Env: SIZE (bytes, default 1073741824), N (rounds, default 5), JOBS (pull -j,
# default 8). Files and stores in /dev/shm when it exists.
set -eu
. "$(dirname "$0")/ab_args.inc" # $old, $new (or a usage line, or skipped under make bench)
cd "$(dirname "$0")/.."
base=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
w=$(mktemp -d "$base/pullab.XXXXXX")
trap 'sh tests/servers/serve-hub.sh stop "$w/st" >/dev/null 2>&1; rm -rf "$w"' EXIT
mkdir -p "$w/hub/buckets/bench/b/big"
head -c "${SIZE:-1073741824}" /dev/urandom >"$w/hub/buckets/bench/b/big/model.safetensors"
ports=$(sh tests/servers/serve-hub.sh start "$w/hub" "$w/st")
export HF_ENDPOINT="http://127.0.0.1:${ports%% *}" FGPACK_NO_PROGRESS=1
unset HF_HUB_OFFLINE HF_TOKEN
printf '{"name": "big", "env": {"WEIGHTS_BUCKET": "hf://buckets/bench/b/big", "LOCAL_MODEL_DIR": "/m"}}\n' >"$w/big.json"
url="$HF_ENDPOINT/buckets/bench/b/resolve/big/model.safetensors"
for i in $(seq "${N:-5}"); do
	for who in old new; do
		b=$old
		[ $who = new ] && b=$new
		rm -rf "$w/store" "$w/big.lock"
		/usr/bin/time -f "$who %e %U %S" env FGPACK_HOME="$w/store" "$b" pull "$w/big.json" --lock "$w/big.lock" \
			-j "${JOBS:-8}" >/dev/null 2>>"$w/t.txt"
	done
	/usr/bin/time -f "curl %e %U %S" curl -s -o "$w/out.bin" "$url" 2>>"$w/t.txt"
	rm -f "$w/out.bin"
done
med() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for who in old new curl; do
	grep "^$who " "$w/t.txt" >"$w/$who.txt"
	printf '%-4s wall runs: %s | medians: wall %s s, user %s s, sys %s s\n' "$who" \
		"$(cut -d' ' -f2 "$w/$who.txt" | tr '\n' ' ')" "$(cut -d' ' -f2 "$w/$who.txt" | med)" \
		"$(cut -d' ' -f3 "$w/$who.txt" | med)" "$(cut -d' ' -f4 "$w/$who.txt" | med)"
done
