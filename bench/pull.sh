#!/bin/sh
# bench/pull.sh - fgpack pull against curl, over loopback from nginx.
#   1. one big file: fgpack pull (sha256-verified, into a fresh store) vs
#      `curl -o` vs `curl -o` + `sha256sum`, interleaved, median of RUNS;
#   2. the durable journal's cost: the big file into a store on disk
#      (DISK_DIR, default /var/tmp) with and without FGPACK_JOURNAL_NOSYNC=1;
#   3. 1000 files of 4 KiB: fgpack pull vs a shell loop of curl vs xargs -P8 curl;
#   4. a no-op re-pull of a fully present manifest.
# PARTS (default "big durable small noop") picks which run; noop needs small.
# Outputs and stores live in /dev/shm when it exists (the same for every
# contender), so the shared disk's fsync speed is not what is measured.
# Env: BENCH_PULL_SIZE (bytes, default 536870912; 2147483648 for the 2 GiB
# figure), RUNS (default 5), SMALL_RUNS (runs of part 2, default RUNS), JOBS
# (fgpack -j, default 8), SMALL (file count, default 1000).
PARTS=${PARTS:-big durable small noop}
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
SIZE=${BENCH_PULL_SIZE:-536870912}
RUNS=${RUNS:-5}
JOBS=${JOBS:-8}
SMALL=${SMALL:-1000}
SMALL_RUNS=${SMALL_RUNS:-$RUNS}
base=${TMPDIR:-/tmp}
[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
w=$(mktemp -d "$base/fgbench.XXXXXX")
trap 'sh tests/servers/serve-hub.sh stop "$w/st" >/dev/null 2>&1; rm -rf "$w"' EXIT
mkdir -p "$w/hub/buckets/bench/b/big" "$w/hub/buckets/bench/b/small"
$PY - "$w/hub/buckets/bench/b" "$SIZE" "$SMALL" <<'PY'
import os, random, sys
d, size, small = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(1)
blk = r.randbytes(1 << 20)
with open(os.path.join(d, 'big/model.safetensors'), 'wb') as f:
    left, i = size, 0
    while left:
        n = min(left, len(blk))
        f.write((blk[i % 4096:] + blk[:i % 4096])[:n])
        left -= n; i += 1
for i in range(small):
    with open(os.path.join(d, 'small/f%04d.bin' % i), 'wb') as f:
        f.write(r.randbytes(4096))
PY
ports=$(sh tests/servers/serve-hub.sh start "$w/hub" "$w/st")
ep="http://127.0.0.1:${ports%% *}"
for c in big small; do
	printf '{"name": "%s", "env": {"WEIGHTS_BUCKET": "hf://buckets/bench/b/%s", "LOCAL_MODEL_DIR": "/m"}}\n' $c $c >"$w/$c.json"
done
url="$ep/buckets/bench/b/resolve/big/model.safetensors"
export HF_ENDPOINT="$ep" FGPACK_NO_PROGRESS=1
unset HF_HUB_OFFLINE HF_TOKEN
timeit() { # prints "wall cpu" seconds of the command and its children (output dropped)
	$PY -c 'import resource, subprocess, sys, time
t = time.time(); subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.3f %.3f" % (time.time() - t, u.ru_utime + u.ru_stime))' "$@"
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
mw() { cut -d' ' -f1 <"$1" | median; }   # median wall
mc() { cut -d' ' -f2 <"$1" | median; }   # median CPU (user+sys, all processes of the command)
curl_only="curl -s -o $w/out.bin $url"
curl_sha="curl -s -o $w/out.bin $url && sha256sum $w/out.bin"
fg_big="rm -rf $w/store $w/big.lock && FGPACK_HOME=$w/store ./fgpack pull $w/big.json --lock $w/big.lock -j $JOBS"
: >"$w/t.curl"; : >"$w/t.sha"; : >"$w/t.fg"
cat "$w/hub/buckets/bench/b/big/model.safetensors" >/dev/null  # warm nginx's page cache
if part big; then
i=0
while [ $i -lt "$RUNS" ]; do
	timeit sh -c "$curl_only" >>"$w/t.curl"; rm -f "$w/out.bin"
	timeit sh -c "$curl_sha" >>"$w/t.sha"; rm -f "$w/out.bin"
	timeit sh -c "$fg_big" >>"$w/t.fg"
	i=$((i + 1))
done
c=$(mw "$w/t.curl"); s=$(mw "$w/t.sha"); f=$(mw "$w/t.fg")
cc=$(mc "$w/t.curl"); cs=$(mc "$w/t.sha"); cf=$(mc "$w/t.fg")
echo "## one file of $SIZE bytes over loopback (median of $RUNS; outputs in $base)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
printf '%-42s wall %7ss %7.1f MB/s %5.2fx   cpu %6ss %5.2fx\n' "curl -o" "$c" "$($PY -c "print($SIZE/$c/1e6)")" 1 "$cc" 1
printf '%-42s wall %7ss %7.1f MB/s %5.2fx   cpu %6ss %5.2fx\n' "curl -o && sha256sum" "$s" "$($PY -c "print($SIZE/$s/1e6)")" "$($PY -c "print($s/$c)")" "$cs" "$($PY -c "print($cs/$cc)")"
printf '%-42s wall %7ss %7.1f MB/s %5.2fx   cpu %6ss %5.2fx\n' "fgpack pull -j $JOBS (fresh store, verified)" "$f" "$($PY -c "print($SIZE/$f/1e6)")" "$($PY -c "print($f/$c)")" "$cf" "$($PY -c "print($cf/$cc)")"
echo "   wall runs: curl $(cut -d' ' -f1 "$w/t.curl" | tr '\n' ' ')| curl+sha $(cut -d' ' -f1 "$w/t.sha" | tr '\n' ' ')| fgpack $(cut -d' ' -f1 "$w/t.fg" | tr '\n' ' ')"
fi

# what the durable journal costs: the same file into a store on disk (fdatasync
# is free on /dev/shm), journaled with and without fdatasync, interleaved
if part durable; then
disk=$(mktemp -d "${DISK_DIR:-/var/tmp}/fgbench.XXXXXX")
trap 'sh tests/servers/serve-hub.sh stop "$w/st" >/dev/null 2>&1; rm -rf "$w" "$disk"' EXIT
fg_disk="rm -rf $disk/store $disk/big.lock && FGPACK_HOME=$disk/store ./fgpack pull $w/big.json --lock $disk/big.lock -j $JOBS"
: >"$w/t.dsync"; : >"$w/t.dnosync"
i=0
while [ $i -lt "$RUNS" ]; do
	timeit sh -c "$fg_disk" >>"$w/t.dsync"
	timeit sh -c "FGPACK_JOURNAL_NOSYNC=1 $fg_disk" >>"$w/t.dnosync"
	i=$((i + 1))
done
ds=$(mw "$w/t.dsync"); dn=$(mw "$w/t.dnosync"); cds=$(mc "$w/t.dsync"); cdn=$(mc "$w/t.dnosync")
echo "## the same file into a store on disk ($(df -T "$disk" | awk 'NR == 2 {print $2}') in $disk), median of $RUNS"
printf '%-42s wall %7ss %5.2fx   cpu %6ss %5.2fx\n' "journal without fdatasync (NOSYNC=1)" "$dn" 1 "$cdn" 1
printf '%-42s wall %7ss %5.2fx   cpu %6ss %5.2fx\n' "durable journal (fdatasync part+journal)" "$ds" "$($PY -c "print($ds/$dn)")" "$cds" "$($PY -c "print($cds/$cdn)")"
echo "   wall runs: nosync $(cut -d' ' -f1 "$w/t.dnosync" | tr '\n' ' ')| durable $(cut -d' ' -f1 "$w/t.dsync" | tr '\n' ' ')"
rm -rf "$disk/store"
fi

# many small files
if part small; then
ls "$w/hub/buckets/bench/b/small" | sed "s|^|$ep/buckets/bench/b/resolve/small/|" >"$w/urls"
mkdir -p "$w/o"
loop="cd $w/o && while read -r u; do curl -s -o \"\${u##*/}\" \"\$u\"; done <$w/urls"
xarg="cd $w/o && xargs -P8 -n 50 curl -s --remote-name-all <$w/urls"
fg_small="rm -rf $w/store2 $w/small.lock && FGPACK_HOME=$w/store2 ./fgpack pull $w/small.json --lock $w/small.lock -j $JOBS"
: >"$w/t.loop"; : >"$w/t.xargs"; : >"$w/t.fgs"
i=0
while [ $i -lt "$SMALL_RUNS" ]; do
	rm -rf "$w/o"; mkdir -p "$w/o"; timeit sh -c "$loop" >>"$w/t.loop"
	rm -rf "$w/o"; mkdir -p "$w/o"; timeit sh -c "$xarg" >>"$w/t.xargs"
	timeit sh -c "$fg_small" >>"$w/t.fgs"
	i=$((i + 1))
done
[ "$(ls "$w/o" | wc -l)" -eq "$SMALL" ] || { echo "xargs curl fetched $(ls "$w/o" | wc -l) files, not $SMALL" >&2; exit 1; }
l=$(mw "$w/t.loop"); x=$(mw "$w/t.xargs"); g=$(mw "$w/t.fgs")
cl=$(mc "$w/t.loop"); cx=$(mc "$w/t.xargs"); cg=$(mc "$w/t.fgs")
echo "## $SMALL files of 4 KiB (median of $SMALL_RUNS)"
printf '%-42s wall %7ss %5.2fx   cpu %6ss %5.2fx\n' "shell loop of curl" "$l" 1 "$cl" 1
printf '%-42s wall %7ss %5.2fx   cpu %6ss %5.2fx\n' "xargs -P8 curl" "$x" "$($PY -c "print($x/$l)")" "$cx" "$($PY -c "print($cx/$cl)")"
printf '%-42s wall %7ss %5.2fx   cpu %6ss %5.2fx\n' "fgpack pull -j $JOBS (fresh store, verified)" "$g" "$($PY -c "print($g/$l)")" "$cg" "$($PY -c "print($cg/$cl)")"
fi

# no-op re-pull of a present manifest
if part noop; then
[ -f "$w/small.lock" ] || FGPACK_HOME="$w/store2" ./fgpack pull "$w/small.json" --lock "$w/small.lock" -j "$JOBS" >/dev/null 2>&1
: >"$w/t.noop"; : >"$w/t.ver"
i=0
while [ $i -lt "$RUNS" ]; do
	timeit env FGPACK_HOME="$w/store2" ./fgpack pull "$w/small.json" --lock "$w/small.lock" --into "$w/into" >>"$w/t.noop"
	timeit ./fgpack --version >>"$w/t.ver"
	i=$((i + 1))
done
echo "## no-op re-pull of the $SMALL-file manifest, materialized (median of $RUNS)"
printf '%-42s wall %7ss   cpu %6ss\n' "fgpack pull --into (all present)" "$(mw "$w/t.noop")" "$(mc "$w/t.noop")"
printf '%-42s wall %7ss   cpu %6ss\n' "fgpack --version (process start alone)" "$(mw "$w/t.ver")" "$(mc "$w/t.ver")"
fi
