#!/bin/sh
# store.sh - `fgpack store verify` re-hash rate against `sha256sum` over the
# same blobs, side by side, median of RUNS (default 5), single thread each,
# plus `-j 2`; prints wall and CPU (user + system) rates, the CPU rate against
# the target (issue #2: >= 1.5 GB per CPU-second) and against the hash alone
# (`openssl speed -evp sha256`, measured in the same run). fgpack reads blobs
# with O_DIRECT (from the disk: the page cache state does not matter to it);
# sha256sum reads them warm from the page cache.
# The same with FG_SHA256_X2=0 (one blob per thread through OpenSSL, the path
# before two-stream hashing) in the same rounds, for a side-by-side figure.
# Also the fixed cost (`store verify` of an empty store: start, OpenSSL) and
# the ceiling they leave: bytes / (the hash alone + the fixed cost).
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
# warm the page cache once (for sha256sum; fgpack reads around it)
cat "$FGPACK_HOME"/blobs/sha256/*/* >/dev/null
load0=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$work/t_fg"; : >"$work/t_sum"; : >"$work/t_fg2"; : >"$work/t_empty"; : >"$work/t_x0"; : >"$work/t_x02"
mkdir -p "$work/empty"
FGPACK_HOME="$work/empty" "$FGPACK" store path >/dev/null
r=0
while [ $r -lt "$runs" ]; do
	out="$work/t_fg" timed "$FGPACK" store verify -j 1
	out="$work/t_x0" timed env FG_SHA256_X2=0 "$FGPACK" store verify -j 1
	out="$work/t_sum" timed sha256sum "$FGPACK_HOME"/blobs/sha256/*/*
	out="$work/t_fg2" timed "$FGPACK" store verify -j 2
	out="$work/t_x02" timed env FG_SHA256_X2=0 "$FGPACK" store verify -j 2
	out="$work/t_empty" timed env FGPACK_HOME="$work/empty" "$FGPACK" store verify -j 1
	r=$((r + 1))
done
fgw=$(cut -d' ' -f1 "$work/t_fg" | median); fgc=$(cut -d' ' -f2 "$work/t_fg" | median)
f2w=$(cut -d' ' -f1 "$work/t_fg2" | median); f2c=$(cut -d' ' -f2 "$work/t_fg2" | median)
sw=$(cut -d' ' -f1 "$work/t_sum" | median); sc=$(cut -d' ' -f2 "$work/t_sum" | median)
ec=$(cut -d' ' -f2 "$work/t_empty" | median)
x0w=$(cut -d' ' -f1 "$work/t_x0" | median); x0c=$(cut -d' ' -f2 "$work/t_x0" | median)
x2w=$(cut -d' ' -f1 "$work/t_x02" | median); x2c=$(cut -d' ' -f2 "$work/t_x02" | median)
rate() { echo "$bytes / $1 / 1000000000" | bc -l; }
openssl_rate=$(openssl speed -evp sha256 -bytes 16384 -seconds 1 2>/dev/null | awk '/^sha256/ {print $NF}' | tr -d k)
ossl=$(echo "${openssl_rate:-0} * 1000 / 1000000000" | bc -l)
echo "store verify bench: $nf files, $mb MiB, median of $runs runs; fgpack reads from the disk (O_DIRECT), sha256sum from the warm page cache"
echo "load average: $load0 at start, $(cut -d' ' -f1-3 /proc/loadavg) at end, on $(nproc) cores (wall rates suffer from load; CPU rates = GB per CPU-second, user + system)"
printf '%-28s wall %7.3f s %6.2f GB/s   cpu %7.3f s %6.2f GB/s per core\n' "fgpack store verify -j 1" "$fgw" "$(rate "$fgw")" "$fgc" "$(rate "$fgc")"
printf '%-28s wall %7.3f s %6.2f GB/s   cpu %7.3f s %6.2f GB/s per core\n' "fgpack store verify -j 2" "$f2w" "$(rate "$f2w")" "$f2c" "$(rate "$f2c")"
printf '%-28s wall %7.3f s %6.2f GB/s   cpu %7.3f s %6.2f GB/s per core\n' "  FG_SHA256_X2=0 -j 1" "$x0w" "$(rate "$x0w")" "$x0c" "$(rate "$x0c")"
printf '%-28s wall %7.3f s %6.2f GB/s   cpu %7.3f s %6.2f GB/s per core\n' "  FG_SHA256_X2=0 -j 2" "$x2w" "$(rate "$x2w")" "$x2c" "$(rate "$x2c")"
printf 'two streams (default) over FG_SHA256_X2=0: -j 1 cpu %.2fx less, wall %.2fx faster; -j 2 cpu %.2fx less, wall %.2fx faster\n' \
	"$(echo "$x0c / $fgc" | bc -l)" "$(echo "$x0w / $fgw" | bc -l)" "$(echo "$x2c / $f2c" | bc -l)" "$(echo "$x2w / $f2w" | bc -l)"
printf '%-28s wall %7.3f s %6.2f GB/s   cpu %7.3f s %6.2f GB/s per core\n' "sha256sum" "$sw" "$(rate "$sw")" "$sc" "$(rate "$sc")"
printf 'fgpack -j 1 over sha256sum: wall %.2fx faster, cpu %.2fx less\n' "$(echo "$sw / $fgw" | bc -l)" "$(echo "$sc / $fgc" | bc -l)"
printf 'openssl speed -evp sha256 (16 KiB blocks, the hash alone, same run): %.2f GB/s; fgpack per core reaches %.0f%% of it\n' "$ossl" "$(echo "100 * $(rate "$fgc") / ($ossl + 0.000001)" | bc -l)"
printf 'target (issue #2) store verify >= 1.50 GB per CPU-second: %.2f -> %s\n' "$(rate "$fgc")" "$(echo "$(rate "$fgc") >= 1.5" | bc -l | sed 's/1/MET/; s/0/not met/')"
# the hash alone in memory: OpenSSL's single stream, ours, ours paired
# (bench/sha256_pair.c, built against the tree's build/libfg.a when there)
if [ -f "$top/build/libfg.a" ] && cc -std=c11 -D_GNU_SOURCE -O2 -I"$top" -I"$top/lib" \
	"$top/bench/sha256_pair.c" "$top/build/libfg.a" -lcrypto -lpthread -lm -o "$work/sha256_pair" 2>/dev/null; then
	"$work/sha256_pair"
fi
printf 'fixed cost (store verify of an empty store): %.3f CPU-s; one stream of the hash alone + that = a ceiling of %.2f GB per CPU-second on these bytes (two streams paired lift it)\n' \
	"$ec" "$(echo "$bytes / ($bytes / ($ossl * 1000000000 + 1) + $ec) / 1000000000" | bc -l)"
