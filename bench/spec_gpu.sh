#!/bin/sh
# spec_gpu.sh - speculative decoding on the GPU, side by side in one run
# (docs/bench.md "Speculative decoding"): an E4B-shaped INT4 g128 target with
# a 12k INT4 keepset head (the challenge's configuration) and an E4B-shaped
# gemma4_assistant drafter, both made by transformers with random weights on
# the GPU machine; then `fgpack run --device cuda` plain and with the drafter
# at K = 1, 2, 4, 7 (tokens/s, and whether the ids are plain greedy's), and
# bench/spec_gpu.c: one decode step against the verify pass of T rows and a
# round of k drafts. A random drafter is almost never right, so the run-level
# figures measure what drafting costs; bench/spec_gpu.c's figures are what a
# trained drafter's acceptance multiplies.
#
# Needs torch + transformers 5.17 and a GPU (run it through the device tool);
# BIN (default build) holds fgpack, fgpack-engine and bench/spec_gpu
# (`make fgpack engine build/bench/spec_gpu`).
set -u
B=${BIN:-build}
if ! python3 -c "import torch, transformers; assert torch.cuda.is_available()" 2>/dev/null ||
	[ ! -x "$B/fgpack-engine" ] || [ ! -x "$B/bench/spec_gpu" ]; then
	echo "spec_gpu.sh: skipped (needs a GPU, torch + transformers, $B/fgpack-engine and $B/bench/spec_gpu)"
	exit 0
fi
W=${FG_BENCH_DIR:-/tmp}
[ -f "$W/e4b/model.safetensors" ] || python3 bench/hf_gemma4_e4b.py 1 --write-int4 "$W/e4b" >/dev/null
[ -f "$W/asst/model.safetensors" ] || python3 bench/hf_gemma4_assistant.py "$W/asst" >/dev/null
T=$W/e4b-k12
# (bake writes the pruned model as shards and an index: config.json says
# it is whole, as bake renames its folder into place last)
if [ ! -f "$T/config.json" ]; then
	python3 -c "import json; json.dump({'keep_ids': list(range(12288)), 'pruned_vocab_K': 12288, 'full_vocab': 262144}, open('$W/keep.json', 'w'))"
	"$B/fgpack" bake prune-head "$W/e4b" --keepset "$W/keep.json" "$T" --head int4 --no-sync >/dev/null || T=$W/e4b
fi
echo "target $T, drafter $W/asst"
# FG_BENCH_SPEC_PROMPT: the prompt's length (default 256, so the 128 new
# tokens run at positions 256-383, past the short attention launches' 256
# keys; a prompt of 100 keeps them below it, docs/gpu.md)
N=${FG_BENCH_SPEC_PROMPT:-256}
P=$(python3 -c "print(','.join(str(2 + (i * 7919) % 12000) for i in range($N)))")
run() { "$B/fgpack-engine" run --model "$T" --ids "$P" -n 128 --ignore-eos --device cuda --json "$@" 2>/dev/null; }
for rep in 1 2; do
	run >"$W/r0.json"
	for k in 1 2 4 7; do run --drafter "$W/asst" --draft-tokens $k >"$W/r$k.json"; done
	python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
b = json.load(open(w + "/r0.json"))
line = ["fgpack run, 128 tokens: plain %.1f tok/s" % b["tokens_per_s"]]
for k in (1, 2, 4, 7):
    d = json.load(open("%s/r%d.json" % (w, k)))
    line.append("K=%d %.1f tok/s (%.2fx) same ids: %s, %d of %d drafts kept" % (
        k, d["tokens_per_s"], d["tokens_per_s"] / b["tokens_per_s"], d["generated_ids"] == b["generated_ids"],
        d["speculative"]["accepted"], d["speculative"]["drafted"]))
print(" | ".join(line))
PY
done
FG_BENCH_REPS=${FG_BENCH_REPS:-21} "$B/bench/spec_gpu" "$T" "$W/asst" "$N"
