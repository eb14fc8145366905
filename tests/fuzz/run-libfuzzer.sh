#!/bin/sh
# run-libfuzzer.sh SECONDS - builds each tests/fuzz/fuzz_*.c with clang's
# libFuzzer + ASan and fuzzes it for SECONDS, growing its corpus folder.
set -eu
secs=${1:-60}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
make -s BUILD=build/fuzzlib CC=clang OPT=-O1 \
	EXTRA_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined" build/fuzzlib/libfg.a
for f in tests/fuzz/fuzz_*.c; do
	n=$(basename "$f" .c); n=${n#fuzz_}
	mkdir -p "tests/fuzz/corpus/$n"
	clang -std=c11 -D_GNU_SOURCE -O1 -g -Ilib -I. -fsanitize=fuzzer,address,undefined \
		-o "build/fuzzlib/fuzz_$n" "$f" build/fuzzlib/libfg.a \
		-lcurl -lcrypto -larchive -lcjson -lzstd -lmicrohttpd -lpthread -lm
	echo "== fuzzing $n for ${secs}s"
	"build/fuzzlib/fuzz_$n" -max_total_time="$secs" -max_len=65536 "tests/fuzz/corpus/$n"
done
