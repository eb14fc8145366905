#!/bin/sh
# repack.sh - the load-time INT4 repack into the i8 kernel's layout on E4B's
# shapes, one thread against the default, side by side (bench/repack.c).
# Needs a build (build/libfg.a, the kernels' layout object); elsewhere it
# says so and exits 0. FG_BENCH_REPS: passes a shape (default 5).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${FG_BUILD:-$top/build}
if [ ! -f "$build/libfg.a" ] || [ ! -f "$build/kernels/int4_layout.o" ]; then
	echo "bench/repack.sh: no $build/libfg.a and kernels/int4_layout.o (make fgpack first; skipped)"
	exit 0
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -I"$top" -I"$top/lib" "$top/bench/repack.c" "$build/kernels/int4_layout.o" \
	"$build/libfg.a" -lpthread -lm -o "$work/repack" || exit 1
"$work/repack"
