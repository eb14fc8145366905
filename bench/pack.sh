#!/bin/sh
# bench/pack.sh - fgpack pack / verify against GNU tar + zstd and sha256sum on
# the same files, side by side in one run. Size: FG_BENCH_MB (default 256) of
# model-like data (7/8 incompressible random bytes as in weights, 1/8 JSON-ish
# text), in 8 files. Prints medians of FG_BENCH_RUNS (default 3) runs and ratios.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
FGPACK=${FGPACK:-$top/fgpack}
MB=${FG_BENCH_MB:-256}
RUNS=${FG_BENCH_RUNS:-3}
W=$(mktemp -d "${TMPDIR:-/tmp}/fgbench.XXXXXX")
trap 'rm -rf "$W"' EXIT
M=$W/model
mkdir -p "$M"
per=$((MB / 8))
for i in 1 2 3 4 5 6 7; do head -c $((per << 20)) /dev/urandom >"$M/shard-$i.safetensors"; done
python3 -c "
import json, sys
rows = [{'id': i, 'token': 'tok%d' % i, 'score': i * 0.5} for i in range(2000000)]
s = json.dumps(rows)
sys.stdout.write(s[: $per << 20])" >"$M/tokenizer.json"
bytes=$(du -sb "$M" | cut -f1)

# median wall seconds of "$@" over RUNS runs
med() {
	for r in $(seq "$RUNS"); do
		s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
		echo "$e - $s" | bc -l
	done | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
rate() { echo "scale=1; $bytes / $1 / 1000000" | bc -l; }
sync
fg_pack() { "$FGPACK" pack --model "$M" --no-golden -o "$W/a.fgb"; }
gnu_pack() {
	tar -C "$M" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf - . |
		zstd -3 -q -f -o "$W/b.tar.zst"
}
gnu_pack_sync() { gnu_pack && sync "$W/b.tar.zst"; }
fg_verify() { "$FGPACK" verify "$W/a.fgb" --no-replay --summary -; }
fg_extract() { rm -rf "$W/x1"; "$FGPACK" exec "$W/a.fgb" --dir "$W/x1" -- true; }
gnu_extract() { rm -rf "$W/x2"; mkdir "$W/x2"; zstd -dc "$W/b.tar.zst" | tar -xf - -C "$W/x2"; }
gnu_extract_hash() { gnu_extract && (cd "$W/x2" && find . -type f -print0 | xargs -0 sha256sum >/dev/null); }
sha_files() { sha256sum "$M"/* ; }

fg_pack >/dev/null
gnu_pack
echo "pack bench: $bytes bytes in $(ls "$M" | wc -l) files, $RUNS runs each, median wall time"
echo "  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; $(zstd --version | head -1)"
tp=$(med fg_pack); tg=$(med gnu_pack); tgs=$(med gnu_pack_sync)
printf '  pack      fgpack pack        %6.2fs %7s MB/s   tar|zstd -3  %6.2fs %7s MB/s   ratio %.2fx\n' \
	"$tp" "$(rate "$tp")" "$tg" "$(rate "$tg")" "$(echo "$tp / $tg" | bc -l)"
printf '  pack (fgpack fsyncs its output) vs tar|zstd -3 + sync FILE %6.2fs %7s MB/s   ratio %.2fx\n' \
	"$tgs" "$(rate "$tgs")" "$(echo "$tp / $tgs" | bc -l)"
te=$(med fg_extract); tx=$(med gnu_extract); th=$(med gnu_extract_hash)
printf '  extract   fgpack exec --dir  %6.2fs %7s MB/s   zstd -dc|tar %6.2fs %7s MB/s   ratio %.2fx\n' \
	"$te" "$(rate "$te")" "$tx" "$(rate "$tx")" "$(echo "$te / $tx" | bc -l)"
printf '  extract+hash (fgpack hashes while extracting) vs zstd|tar + sha256sum %6.2fs   ratio %.2fx\n' \
	"$th" "$(echo "$te / $th" | bc -l)"
tv=$(med fg_verify); ts=$(med sha_files)
printf '  re-hash   fgpack verify --no-replay %6.2fs %7s MB/s   sha256sum (files) %6.2fs %7s MB/s   ratio %.2fx\n' \
	"$tv" "$(rate "$tv")" "$ts" "$(rate "$ts")" "$(echo "$tv / $ts" | bc -l)"
ls -l "$W/a.fgb" "$W/b.tar.zst" | awk '{print "  size", $5, $9}'
