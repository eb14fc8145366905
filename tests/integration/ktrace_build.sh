#!/bin/sh
# ktrace_build.sh - the measuring build (make KTRACE=1, docs/gpu.md "Where a
# step's time goes") still compiles: every kernel file for sm_90 with
# -DFG_KTRACE, each with its fg_kt_set_<file> (which runtime.cu's trace
# calls), and the ordinary objects without any; and the i8 matvec's
# delayed-loads build (make I8DLY=1, docs/bench.md, fifty-seventh session),
# whose object reads FG_I8_DELAY where the ordinary one does not. Where
# nvcc is missing the checks are skipped. A GPU is needed to run a trace;
# this only builds.
. "$(dirname "$0")/../lib.sh"
cd "$TOP" || exit 1
# where the Makefile looks for it (NVCC there); NVCC set empty (make NVCC=
# test, which passes it on to the make below too) means no CUDA build
nvcc=${NVCC-$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)}
if [ -z "$nvcc" ]; then
	ok "# skip: no nvcc here, so no measuring build"
	finish
	exit
fi
B=$WORK/kt
objs=
for f in kernels/*.cu; do
	objs="$objs $B/kernels/$(basename "$f").o"
done
check "the kernel files compile with KTRACE=1 (sm_90)" \
	make -s KTRACE=1 BUILD="$B" NVCC_ARCH='-gencode arch=compute_90,code=sm_90' $objs
for f in int4 int4_i8 ops ple moe draft; do
	check_grep "kernels/$f.cu defines fg_kt_set_$f in the measuring build" " T fg_kt_set_$f\$" \
		"$(nm "$B/kernels/$f.cu.o" >"$WORK/nm.$f" 2>&1; echo "$WORK/nm.$f")"
done
check_grep "runtime.cu calls every file's setter" " U fg_kt_set_draft\$" \
	"$(nm "$B/kernels/runtime.cu.o" >"$WORK/nm.rt" 2>&1; echo "$WORK/nm.rt")"
D=$WORK/dly
check "int4_i8.cu compiles with I8DLY=1 (sm_90)" \
	make -s I8DLY=1 BUILD="$D" NVCC_ARCH='-gencode arch=compute_90,code=sm_90' "$D/kernels/int4_i8.cu.o"
check_grep "the I8DLY object reads FG_I8_DELAY_BLOCKS" "^FG_I8_DELAY_BLOCKS\$" \
	"$(strings "$D/kernels/int4_i8.cu.o" >"$WORK/str.dly" 2>&1; echo "$WORK/str.dly")"
if [ -f build/kernels/int4_i8.cu.o ]; then
	strings build/kernels/int4_i8.cu.o >"$WORK/str.plain" 2>&1
	check "the ordinary build reads no FG_I8_DELAY" sh -c "! grep -q FG_I8_DELAY '$WORK/str.plain'"
fi
if [ -f build/kernels/ops.cu.o ]; then
	nm build/kernels/ops.cu.o >"$WORK/nm.plain" 2>&1
	check "the ordinary build has no trace setter" sh -c "! grep -q fg_kt_set_ '$WORK/nm.plain'"
fi
finish
