#!/bin/sh
# bench/pack_baked.sh - `fgpack pack` of a bake's output folder, as a user
# packs what `fgpack bake int4` just made: INT4 weights and bf16 embeddings
# (they compress, unlike the random bytes of bench/pack.sh), beside GNU tar |
# zstd -3 on the same folder, in alternated rounds (bench/rounds.inc):
#   - after:  pack right after the bake, with the store the bake used: the
#             bake kept its output shards' seen records and chain states as it
#             wrote them (docs/formats/store.md, "Seen"), so pack does not
#             hash them again;
#   - rehash: the same with --rehash (every file hashed, as with no store);
#   - tar:    tar --sort=name ... | zstd -3 (hashes nothing, no fsync), and
#             the same followed by `sync FILE` (pack fsyncs its bundle).
# Every pack must give the same bundle (checked with cmp) and verify.
# Env: BAKE_LAYERS (default 4 of the 42 E4B layers: about 2.6 GB of bf16
# input, 2.1 GB out), RUNS (default 5), DIR (default /tmp/fgpack-bench-bake,
# bench/bake.sh's: the checkpoint is kept there and shared with it), FGPACK
# (default ./fgpack).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/e4b_checkpoint.inc"
FGPACK=${FGPACK:-$top/fgpack}
layers=${BAKE_LAYERS:-4}
RUNS=${RUNS:-5}
dir=${DIR:-/tmp/fgpack-bench-bake}
src=$dir/e4b-L$layers
mkdir -p "$dir"
W=$(mktemp -d "$dir/run.XXXXXX")
trap 'rm -rf "$W"' EXIT
e4b_checkpoint "$dir" "$layers"
# the store the bake and the packs use (empty: the bake's inputs are hashed)
mkdir -p "$W/store/blobs/sha256"
export FGPACK_HOME="$W/store"
echo "== bake int4 $src -> $W/out" >&2
"$FGPACK" bake int4 "$src" "$W/out" -j 2 --no-sync >/dev/null 2>"$W/bake.err"
sync # the bake's writes (--no-sync) on their way to the disk are not the packs' cost
out_bytes=$(du -sb "$W/out" | cut -f1)
noted=$(ls "$W/store/seen" 2>/dev/null | wc -l)
ENGINE=${FG_BENCH_ENGINE:-$top/build/fgpack-engine}
[ -x "$ENGINE" ] || ENGINE=$FGPACK
after() { "$FGPACK" pack --model "$W/out" --no-golden --engine "$ENGINE" -o "$W/a.fgb" 2>>"$W/after.err"; }
rehash() { "$FGPACK" pack --model "$W/out" --no-golden --engine "$ENGINE" --rehash -o "$W/r.fgb"; }
tarz() {
	tar -C "$W" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=posix \
		--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf - out |
		zstd -3 -q -f -o "$W/t.tar.zst"
}
tarz_sync() { tarz && sync "$W/t.tar.zst"; }
. "$top/bench/rounds.inc"
echo "== $RUNS alternated rounds (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
rounds after rehash tarz tarz_sync
cmp "$W/a.fgb" "$W/r.fgb" || { echo "pack_baked.sh: the two packs differ" >&2; exit 1; }
"$FGPACK" verify "$W/a.fgb" --no-replay --summary - >/dev/null
echo "pack of a bake's output: $out_bytes bytes ($layers E4B layers baked; the bake left $noted seen records), the engine beside; $RUNS rounds, medians"
echo "  cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  $(grep -m1 'hashed before' "$W/after.err" || echo 'pack right after: nothing named by a seen record')"
medof after; wa=$W_; ca=$C_
medof rehash; wr=$W_; cr=$C_
medof tarz; wt=$W_; ct=$C_
medof tarz_sync; ws=$W_; cs=$C_
awk -v wa="$wa" -v ca="$ca" -v wr="$wr" -v cr="$cr" -v wt="$wt" -v ct="$ct" -v ws="$ws" -v cs="$cs" 'BEGIN {
	printf "  pack right after the bake  %6.2fs %6.2f CPU-s | wall %.2fx tar|zstd (%.2fx + sync), %.2fx --rehash\n", wa, ca, wa / wt, wa / ws, wa / wr
	printf "  pack --rehash              %6.2fs %6.2f CPU-s | wall %.2fx tar|zstd (%.2fx + sync)\n", wr, cr, wr / wt, wr / ws
	printf "  tar | zstd -3              %6.2fs %6.2f CPU-s\n", wt, ct
	printf "  tar | zstd -3 + sync       %6.2fs %6.2f CPU-s\n", ws, cs
	printf "  target pack wall <= 1.2x tar|zstd -3: right after the bake %.2fx, every file hashed %.2fx\n", wa / wt, wr / wt }'
echo "  sizes: bundle $(stat -c %s "$W/a.fgb"), tar.zst $(stat -c %s "$W/t.tar.zst")"
