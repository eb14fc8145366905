#!/bin/sh
# engine_gpu.sh - the GPU decode step on E4B shapes (bench/engine_gpu.c) and,
# side by side in the same run, transformers' own Gemma 4 generate on the same
# shapes in bf16 (bench/hf_gemma4_e4b.py), plus the engine on the tiny INT4
# fixture with --device cuda and cpu. Needs an nvcc build and a GPU: run it
# through the device tool; elsewhere it says so and exits 0.
# FG_BENCH_STEPS / FG_BENCH_REPS / FG_BENCH_WARM tune the timing;
# FG_BENCH_HF=0 skips the transformers run.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
build=${FG_BUILD:-build}
bin=${FG_BENCH_BIN:-$build/bench/engine_gpu}
if [ -z "${FG_BENCH_BIN:-}" ]; then
	make -s "$bin" >/dev/null || exit 1
fi
out=$(FG_BENCH_MODEL=${FG_BENCH_MODEL:-tests/fixtures/oracle/int4} "$bin")
rc=$?
echo "$out"
[ $rc -eq 0 ] || exit $rc
case "$out" in *"skipped:"*) exit 0 ;; esac
if [ "${FG_BENCH_HF:-1}" != 0 ] && python3 -c 'import torch, transformers; assert torch.cuda.is_available()' 2>/dev/null; then
	echo
	python3 bench/hf_gemma4_e4b.py 128 || echo "transformers side-by-side run failed"
else
	echo "transformers side-by-side run skipped (no torch/transformers with a GPU here)"
fi
