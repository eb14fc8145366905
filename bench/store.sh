#!/bin/sh
# store.sh - `fgpack store verify` re-hash rate against `sha256sum` over the
# same blobs, side by side, median of RUNS (default 5), single thread each,
# files warm in the page cache (both read the same cached bytes).
# STORE_BENCH_MB (default 512) total size, split into STORE_BENCH_FILES (default 4).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
FGPACK=${FGPACK:-$top/fgpack}
mb=${STORE_BENCH_MB:-512}
nf=${STORE_BENCH_FILES:-4}
runs=${RUNS:-5}
work=$(mktemp -d "${TMPDIR:-/tmp}/fgbench.XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
export FGPACK_HOME="$work/store"
"$FGPACK" store path >/dev/null
per=$((mb / nf))
i=0
while [ $i -lt "$nf" ]; do
	head -c $((per * 1048576)) /dev/urandom >"$work/f$i"
	h=$(sha256sum "$work/f$i" | cut -d' ' -f1)
	d="$FGPACK_HOME/blobs/sha256/$(echo "$h" | cut -c1-2)"
	mkdir -p "$d"
	mv "$work/f$i" "$d/$h"
	chmod 0444 "$d/$h"
	i=$((i + 1))
done
bytes=$((per * nf * 1048576))
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# timed CMD...: appends "wall cpu" (cpu = user + sys seconds) to $out
timed() { /usr/bin/time -f '%e %U %S' -o "$work/.t" "$@" >/dev/null; awk '{print $1, $2 + $3}' "$work/.t" >>"$out"; }
# warm the page cache once
cat "$FGPACK_HOME"/blobs/sha256/*/* >/dev/null
: >"$work/t_fg"; : >"$work/t_sum"
r=0
while [ $r -lt "$runs" ]; do
	out="$work/t_fg" timed "$FGPACK" store verify -j 1
	out="$work/t_sum" timed sha256sum "$FGPACK_HOME"/blobs/sha256/*/*
	r=$((r + 1))
done
fgw=$(cut -d' ' -f1 "$work/t_fg" | median); fgc=$(cut -d' ' -f2 "$work/t_fg" | median)
sw=$(cut -d' ' -f1 "$work/t_sum" | median); sc=$(cut -d' ' -f2 "$work/t_sum" | median)
rate() { echo "$bytes / $1 / 1000000000" | bc -l; }
echo "store verify bench: $nf files, $mb MiB, median of $runs, 1 thread, page cache warm"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (wall rates suffer from it; CPU rates = GB per CPU-second)"
printf '%-28s wall %7.3f s %6.2f GB/s   cpu %7.3f s %6.2f GB/s per core\n' "fgpack store verify -j 1" "$fgw" "$(rate "$fgw")" "$fgc" "$(rate "$fgc")"
printf '%-28s wall %7.3f s %6.2f GB/s   cpu %7.3f s %6.2f GB/s per core\n' "sha256sum" "$sw" "$(rate "$sw")" "$sc" "$(rate "$sc")"
printf 'speed-up of fgpack over sha256sum: wall %.2fx, cpu %.2fx\n' "$(echo "$sw / $fgw" | bc -l)" "$(echo "$sc / $fgc" | bc -l)"
openssl_rate=$(openssl speed -evp sha256 -bytes 16384 -seconds 1 2>/dev/null | awk '/^sha256/ {print $NF}' | tr -d k)
[ -n "$openssl_rate" ] && printf 'openssl speed -evp sha256 (16 KiB blocks, same moment): %.2f GB/s\n' "$(echo "$openssl_rate * 1000 / 1000000000" | bc -l)"
