#!/bin/sh
# engine_gpu.sh - the GPU decode step on E4B shapes, side by side in one run:
#   1. transformers' own Gemma 4 generate on E4B shapes in bf16, eager
#      (bench/hf_gemma4_e4b.py, median of 3), which then writes the same
#      random weights as an INT4 g128 checkpoint (--write-int4) into
#      $FG_BENCH_E4B_DIR; then the same model with a static cache, which
#      transformers compiles (--static-compiled; FG_BENCH_HF_COMPILED=0 skips
#      it, FG_BENCH_HF_COMPILE_S bounds it, default 480 s);
#   2. bench/engine_gpu.c: the read bandwidth, the INT4 matvecs, the
#      synthetic decode step (both INT4 kernels), the engine itself on that
#      checkpoint (warm-up, then 128-token greedy decodes), and the engine on
#      the tiny INT4 fixture with --device cuda and cpu;
#   3. the issue's model: that checkpoint with its head pruned to a 12k
#      keepset (`fgpack bake prune-head --head int4`, into $FG_BENCH_E4B_DIR-k12),
#      timed by engine_gpu beside the full-head one;
#   4. `fgpack run --device cuda --json` on both checkpoints (the CLI as a
#      user runs it, 128 tokens, one process: graph capture inside);
#   5. prompt prefill on the checkpoint (bench/prefill_gpu.c): a
#      FG_BENCH_PREFILL_N-token prompt (default 512) token by token against
#      chunks of 16, 64 and 128 rows, prompt tokens/s side by side.
# Needs an nvcc build and a GPU: run it through the device tool; elsewhere it
# says so and exits 0. FG_BENCH_STEPS / FG_BENCH_REPS / FG_BENCH_WARM tune
# the timing; FG_BENCH_HF=0 skips step 1 (and the checkpoint, unless
# FG_BENCH_E4B_DIR already holds one); FG_BENCH_BIN / FG_BENCH_FGPACK name
# prebuilt binaries (with FG_BENCH_BIN, step 5 takes prefill_gpu from the
# same folder, or FG_BENCH_PREFILL_BIN, and builds nothing).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
build=${FG_BUILD:-build}
bin=${FG_BENCH_BIN:-$build/bench/engine_gpu}
if [ -z "${FG_BENCH_BIN:-}" ]; then
	make -s "$bin" >/dev/null || exit 1
fi
ck=${FG_BENCH_E4B_DIR:-$build/e4b-int4}
hf_ms=
hfc_ms=
if "$bin" --probe >/dev/null 2>&1 && [ "${FG_BENCH_HF:-1}" != 0 ] &&
	python3 -c 'import torch, transformers; assert torch.cuda.is_available()' 2>/dev/null; then
	hf=$(python3 bench/hf_gemma4_e4b.py 128 --write-int4 "$ck")
	echo "$hf"
	hf_ms=$(echo "$hf" | sed -n 's/.*"ms_per_token": \([0-9.]*\).*/\1/p')
	echo
	# the same model with a static cache, which transformers compiles
	# (torch.compile of the decode step), if it runs within the time given
	if [ "${FG_BENCH_HF_COMPILED:-1}" != 0 ]; then
		hfc=$(timeout "${FG_BENCH_HF_COMPILE_S:-480}" python3 bench/hf_gemma4_e4b.py 128 --static-compiled 2>"$build/hf_compiled.err")
		rc=$?
		echo "$hfc"
		hfc_ms=$(echo "$hfc" | sed -n 's/.*"ms_per_token": \([0-9.]*\).*/\1/p')
		if [ -z "$hfc_ms" ]; then
			echo "transformers static-cache compiled: did not run (exit $rc; the last lines of its errors:)"
			tail -n 5 "$build/hf_compiled.err"
		fi
		echo
	fi
else
	echo "transformers side-by-side run skipped (no torch/transformers with a GPU here, or FG_BENCH_HF=0)"
fi
e4b=
[ -f "$ck/model.safetensors" ] && e4b=$ck
fg=${FG_BENCH_FGPACK:-./fgpack}
# the issue's benchmark model: the same checkpoint with its head pruned to a
# 12k keepset (12288 ids, every 21st of the 262144: a deterministic list, the
# weights being random), INT4 like the body
k12=
if [ -n "$e4b" ] && [ -x "$fg" ]; then
	k12=$ck-k12
	# made by an earlier run: one file, or shards beside their index
	# (fgpack writes shards above its shard size, as this model is)
	if [ ! -f "$k12/model.safetensors" ] && [ ! -f "$k12/model.safetensors.index.json" ]; then
		awk 'BEGIN { printf "{\"keep_ids\": ["; for (i = 0; i < 12288; i++) printf "%s%d", (i ? "," : ""), i * 21;
			printf "], \"pruned_vocab_K\": 12288, \"full_vocab\": 262144}\n" }' >"$ck.keepset.json"
		echo "\$ $fg bake prune-head $ck --keepset $ck.keepset.json $k12 --head int4 --no-sync"
		"$fg" bake prune-head "$ck" --keepset "$ck.keepset.json" "$k12" --head int4 --no-sync >/dev/null || k12=
		echo
	fi
fi
out=$(FG_BENCH_HF_COMPILED_MS=$hfc_ms FG_BENCH_E4B_LEVELS=${FG_BENCH_E4B_LEVELS-"0 1 2"} FG_BENCH_HF_MS=$hf_ms FG_BENCH_E4B=$e4b FG_BENCH_E4B_K12=$k12 FG_BENCH_MODEL=${FG_BENCH_MODEL:-tests/fixtures/oracle/int4} "$bin")
rc=$?
echo "$out"
[ $rc -eq 0 ] || exit $rc
case "$out" in *"skipped:"*) exit 0 ;; esac
for m in $e4b $k12; do
	[ -x "$fg" ] || break
	echo
	echo "\$ $fg run --model $m --ids 2 -n 128 --ignore-eos --device cuda --json"
	"$fg" run --model "$m" --ids 2 -n 128 --ignore-eos --device cuda --json | tr ',' '\n' |
		grep -E '"(tokens_per_s|prefill_tokens_per_s|device|n_generated|generated_tokens)"' | tr '\n' ' '
	echo
done
if [ -n "$e4b" ] && [ "${FG_BENCH_PREFILL_N:-512}" != 0 ]; then
	# beside a prebuilt engine_gpu (FG_BENCH_BIN) its prefill_gpu is taken
	# as it is, never built here: a GPU machine may lack the build's headers
	pb=${FG_BENCH_PREFILL_BIN:-$(dirname "$bin")/prefill_gpu}
	if [ -z "${FG_BENCH_PREFILL_BIN:-}" ] && [ -z "${FG_BENCH_BIN:-}" ]; then
		make -s "$pb" >/dev/null || exit 1
	fi
	echo
	if [ -x "$pb" ]; then
		echo "\$ $pb $e4b ${FG_BENCH_PREFILL_N:-512}"
		"$pb" "$e4b" "${FG_BENCH_PREFILL_N:-512}"
	else
		echo "prompt prefill skipped: no $pb beside the prebuilt FG_BENCH_BIN (FG_BENCH_PREFILL_BIN names one)"
	fi
fi
