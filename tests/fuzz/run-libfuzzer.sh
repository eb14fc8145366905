#!/bin/sh
# run-libfuzzer.sh SECONDS - builds each tests/fuzz/fuzz_*.c with clang's
# libFuzzer + ASan and fuzzes it for SECONDS, growing its corpus folder.
# FUZZ_TARGETS (e.g. tests/fuzz/fuzz_request.c) picks some targets only.
set -eu
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
# Without CUDA (NVCC empty): targets that reach the engine link the CPU
# twins and kernels/nocuda.c instead of the kernels.
k="build/fuzzlib/kernels/cpu_twin.o build/fuzzlib/kernels/int4_layout.o build/fuzzlib/kernels/nocuda.o"
make -s BUILD=build/fuzzlib CC=clang OPT=-O1 NVCC= CUDA_LIBDIR= \
	EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" build/fuzzlib/libfg.a $k
for f in ${FUZZ_TARGETS:-tests/fuzz/fuzz_*.c}; do
	n=$(basename "$f" .c); n=${n#fuzz_}
	mkdir -p "tests/fuzz/corpus/$n"
	clang -std=c11 -D_GNU_SOURCE -O1 -g -Ilib -I. -fsanitize=fuzzer,address,undefined \
		-o "build/fuzzlib/fuzz_$n" "$f" build/fuzzlib/libfg.a $k build/fuzzlib/libfg.a \
		-lcurl -lcrypto -larchive -lcjson -lzstd -lmicrohttpd -lpthread -lm
	echo "== fuzzing $n for ${secs}s"
	"build/fuzzlib/fuzz_$n" -max_total_time="$secs" -max_len=65536 "tests/fuzz/corpus/$n"
done
