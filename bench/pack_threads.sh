#!/bin/sh
# bench/pack_threads.sh - how `fgpack pack`, `fgpack verify --no-replay`
# and `fgpack exec` (extraction and the bundle id) scale with --threads, beside `tar | zstd -3` (one thread, as pack's
# bytes), `tar | zstd -3 -T0` (zstd's own threads, other bytes) and `zstd -dc
# | tar -x` on the same files, and beside the same fgpack commands read from
# start to end (FG_TAR_LANES=0), median of RUNS rounds run in alternation.
# Every pack must give the same bundle (checked with cmp). Made for machines
# with more cores than the 2-core dev VM (the GPU machine: docs/bench.md,
# pack).
# Env: FGPACK (default ./fgpack; a static build runs on bare machines),
# FG_BENCH_MB (default 1024: 7/8 random bytes in 7 files, 1/8 JSON text),
# THREADS (default 1 2 4 ... up to the CPUs online), RUNS (default 3), DIR (default /dev/shm
# when writable, else $TMPDIR or /tmp: there fsync is free, so this measures
# CPU scaling, not the disk).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
FGPACK=${FGPACK:-$top/fgpack}
MB=${FG_BENCH_MB:-1024}
# default: 1, 2, 4, ... up to the CPUs online (each count keeps a bundle in DIR)
if [ -z "${THREADS:-}" ]; then
	THREADS=1
	t=2
	while [ "$t" -le "$(nproc)" ]; do THREADS="$THREADS $t"; t=$((t * 2)); done
fi
RUNS=${RUNS:-3}
base=${DIR:-}
if [ -z "$base" ]; then
	base=${TMPDIR:-/tmp}
	[ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
fi
W=$(mktemp -d "$base/fgthreads.XXXXXX")
trap 'rm -rf "$W"' EXIT
. "$top/bench/rounds.inc"
M=$W/model
mkdir -p "$M"
per=$((MB / 8))
for i in 1 2 3 4 5 6 7; do head -c $((per << 20)) /dev/urandom >"$M/shard-$i.safetensors"; done
python3 -c "
import json, sys
rows = [{'id': i, 'token': 'tok%d' % i, 'score': i * 0.5} for i in range($per * 24000)]
sys.stdout.write(json.dumps(rows)[: $per << 20])" >"$M/tokenizer.json"
bytes=$(du -sb "$M" | cut -f1)

# one shell function per contender (rounds.inc runs functions by name)
for t in $THREADS; do
	# --rehash: every file hashed, whatever a store's seen records say
	eval "pack_$t() { \"\$FGPACK\" pack --model \"\$M\" --no-golden --engine \"\$FGPACK\" --threads $t --rehash -o \"\$W/t$t.fgb\"; }"
	eval "verify_$t() { \"\$FGPACK\" verify \"\$W/t1.fgb\" --no-replay --threads $t --summary -; }"
	eval "exec_$t() { rm -rf \"\$W/x\"; \"\$FGPACK\" exec \"\$W/t1.fgb\" --dir \"\$W/x\" --threads $t -- true; }"
done
# from start to end: the id and the member digests in one paired pass
exec_seq() { rm -rf "$W/x"; FG_TAR_LANES=0 "$FGPACK" exec "$W/t1.fgb" --dir "$W/x" -- true; }
untar() { rm -rf "$W/x"; mkdir "$W/x"; zstd -dc "$W/t1.fgb" | tar -xf - -C "$W/x"; }
tar_zstd() { tar -C "$M" --sort=name -cf - . | zstd -3 -q -f -o "$W/g.tar.zst"; }
tar_zstd_t0() { tar -C "$M" --sort=name -cf - . | zstd -3 -T0 -q -f -o "$W/g0.tar.zst"; }

echo "pack_threads bench: $bytes bytes in 8 files, $RUNS rounds, medians"
zv=$(zstd --version 2>/dev/null | head -1) || zv=""
echo "  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; ${zv:-no zstd CLI: the tar rows are left out}"
echo "  in $base; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
list=""
for t in $THREADS; do list="$list pack_$t"; done
if [ -n "$zv" ]; then
	rounds $list tar_zstd tar_zstd_t0
	medof tar_zstd; tg=$W_; cg=$C_
	medof tar_zstd_t0; tg0=$W_; cg0=$C_
else
	rounds $list
	tg=0; cg=0; tg0=0; cg0=0
fi
row() { # label wall cpu
	awk -v l="$1" -v w="$2" -v c="$3" -v b="$bytes" -v tg="$tg" -v tg0="$tg0" \
		'BEGIN { printf "  %-28s %7.3fs %8.1f MB/s %7.2f CPU-s", l, w, b / w / 1e6, c;
			 if (tg > 0) printf " | wall / tar|zstd -3 %.2fx, / -T0 %.2fx", w / tg, w / tg0; printf "\n" }'
}
if [ -n "$zv" ]; then
	row "tar | zstd -3" "$tg" "$cg"
	row "tar | zstd -3 -T0" "$tg0" "$cg0"
fi
for t in $THREADS; do
	medof "pack_$t"
	row "fgpack pack --threads $t" "$W_" "$C_"
	cmp "$W/t1.fgb" "$W/t$t.fgb" || { echo "  pack --threads $t: OTHER BYTES" >&2; exit 1; }
done
echo "  every pack gave the same bundle (cmp): $(stat -c %s "$W/t1.fgb") bytes"
list=""
for t in $THREADS; do list="$list verify_$t"; done
rounds $list
for t in $THREADS; do
	medof "verify_$t"
	awk -v l="fgpack verify --threads $t" -v w="$W_" -v c="$C_" -v b="$bytes" \
		'BEGIN { printf "  %-28s %7.3fs %8.1f MB/s %7.2f CPU-s  %.0f MB per CPU-second\n", l, w, b / w / 1e6, c, b / c / 1e6 }'
done
# exec: the members extracted in lanes, the bundle id read beside them
xrow() { # label wall cpu [reference wall, its label]
	awk -v l="$1" -v w="$2" -v c="$3" -v b="$bytes" -v r="${4:-0}" -v rl="${5:-}" \
		'BEGIN { printf "  %-34s %7.3fs %8.1f MB/s %7.2f CPU-s", l, w, b / w / 1e6, c;
			 if (r > 0) printf " | wall / %s %.2fx", rl, w / r; printf "\n" }'
}
list="exec_seq"
[ -n "$zv" ] && list="$list untar"
for t in $THREADS; do list="$list exec_$t"; done
rounds $list
medof exec_seq; te=$W_; ce=$C_
tu=0
if [ -n "$zv" ]; then
	medof untar; tu=$W_
	xrow "zstd -dc | tar -x" "$W_" "$C_"
fi
xrow "exec --dir, start to end" "$te" "$ce" "$tu" "zstd|tar"
for t in $THREADS; do
	medof "exec_$t"
	xrow "exec --dir --threads $t" "$W_" "$C_" "$te" "start to end"
done
echo "  load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
