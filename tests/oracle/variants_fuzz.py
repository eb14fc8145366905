#!/usr/bin/env python3
"""variants_fuzz.py - tiny Gemma 4 text models in shapes drawn at random (a
fixed seed per model, so the set is the same every run), made and answered by
transformers exactly as variants.py makes its hand-picked ones: the engine
is held to shapes nobody chose. Run on the GPU machine (torch +
transformers 5.17).

Each draw picks: layers 1-7 with a random sliding/full pattern; query heads
1-4, KV heads a divisor of them; sliding and full head dims; hidden 16-64;
per-layer embeddings off or 4-16 wide; KV sharing of the last layers where
an earlier layer of each shared type exists; sliding window 2-10; RoPE
default or proportional (factor 0.25, 0.5 or 1) on full layers with random
thetas; final softcap off, 15 or 30; tied or untied head; the double-wide
MLP; sometimes attention_k_eq_v (with or without num_global_key_value_heads),
attention biases or a mixture of experts; saved in bf16, fp16 or fp32. A draw
transformers refuses to build is logged and replaced by the next seed.

Output: $OUT/variants_fuzz.tar with fuzz-NN/{config.json, model.safetensors,
oracle.json, logits.bin, draw.json}, the layout of tests/fixtures/oracle/variants.

usage: OUT=dir python3 variants_fuzz.py [COUNT [odd|plain [BASE]]]   (default 12;
odd: the widths no multiple of 4, vocabularies of 251-263, windows from 1:
fuzzodd-NN; BASE > 0 draws from seeds BASE on, a set none of the fixtures
holds, named fuzzBASE-NN / fuzzoddBASE-NN, into variants_fuzz[_odd]_BASE.tar)
"""
import json
import os
import random
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_gemma4 as tg  # noqa: E402
import variants as va  # noqa: E402


def draw(seed, odd=False, base=0):
    """odd: widths that are no multiple of 8 or even of 4 anywhere (hidden,
    heads, per-layer inputs, MLP, vocabulary), windows down to 1."""
    r = random.Random((5000 if odd else 1000) + base + seed)
    n_layers = r.randint(1, 7)
    types = [r.choice(["sliding_attention", "full_attention"]) for _ in range(n_layers)]
    heads = r.randint(1, 4)
    kv = r.choice([d for d in range(1, heads + 1) if heads % d == 0])
    hd = r.choice([6, 10, 14, 20] if odd else [8, 12, 16, 24])
    ghd = r.choice([hd, 2 * hd])
    # the last k layers share an earlier layer's KV: each shared layer's type
    # must appear among the layers before the shared block
    shared = 0
    for k in range(n_layers - 1, 0, -1):
        if r.random() < 0.5 and all(t in types[:n_layers - k] for t in types[n_layers - k:]):
            shared = k
            break
    full_rope = r.choice([
        {"rope_type": "default", "rope_theta": r.choice([10000.0, 100000.0, 1000000.0])},
        {"rope_type": "proportional", "partial_rotary_factor": r.choice([0.25, 0.5, 1.0]),
         "rope_theta": r.choice([10000.0, 1000000.0])}])
    text = dict(va.BASE, hidden_size=r.choice([18, 22, 30, 38, 50] if odd else [16, 24, 32, 40, 48, 64]),
                intermediate_size=r.choice([14, 26, 42] if odd else [16, 32, 48, 64]), num_hidden_layers=n_layers,
                num_attention_heads=heads, num_key_value_heads=kv, head_dim=hd, global_head_dim=ghd,
                hidden_size_per_layer_input=r.choice([0, 3, 5, 7] if odd else [0, 0, 4, 8, 16]), layer_types=types,
                sliding_window=r.randint(1, 10) if odd else r.randint(2, 10), num_kv_shared_layers=shared,
                rope_parameters={"sliding_attention": {"rope_type": "default",
                                                       "rope_theta": r.choice([10000.0, 50000.0])},
                                 "full_attention": full_rope},
                final_logit_softcapping=r.choice([None, 15.0, 30.0]),
                tie_word_embeddings=r.random() < 0.6, use_double_wide_mlp=r.random() < 0.3)
    if r.random() < 0.3:
        text["attention_k_eq_v"] = True
        if r.random() < 0.5:
            text["num_global_key_value_heads"] = r.choice([d for d in range(1, heads + 1) if heads % d == 0])
    if r.random() < 0.2:
        text["attention_bias"] = True
    if r.random() < 0.2:
        ne = r.randint(3, 6)
        text.update(enable_moe_block=True, num_experts=ne, top_k_experts=r.randint(1, min(3, ne - 1)),
                    moe_intermediate_size=r.choice([16, 24, 32]))
    if odd:
        v = r.choice([251, 257, 263])
        text.update(vocab_size=v, vocab_size_per_layer_input=v)
    dtype = r.choice(["bfloat16", "bfloat16", "bfloat16", "float16", "float32"])
    return text, dtype


def main():
    import torch
    import transformers
    torch.set_num_threads(8)
    va.log("transformers", transformers.__version__, "torch", torch.__version__)
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    odd = len(sys.argv) > 2 and sys.argv[2] == "odd"
    base = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    tag = ("fuzzodd" if odd else "fuzz") + (str(base) if base else "")
    os.makedirs(va.OUT, exist_ok=True)
    made, seed = 0, 0
    while made < count and seed < count * 4:
        text, dtype = draw(seed, odd, base)
        name = "%s-%02d" % (tag, made)
        va.log("== %s (draw %d, %s): %s" % (name, seed, dtype, json.dumps(text, sort_keys=True)))
        seed += 1
        va.SAVE_DTYPE[name] = dtype
        before = dict(va.FILES)
        try:
            va.run(name, text)
        except BaseException:
            traceback.print_exc()
            va.FILES.clear()
            va.FILES.update(before)
            va.log("  draw %d refused, next" % (seed - 1))
            continue
        va.FILES[name + "/draw.json"] = (json.dumps({"draw": seed - 1, "base": base, "dtype": dtype, "text": text},
                                                    indent=1, sort_keys=True) + "\n").encode()
        made += 1
    tar = "variants_fuzz%s%s.tar" % ("_odd" if odd else "", "_%d" % base if base else "")
    tg.write_tar(os.path.join(va.OUT, tar), va.FILES)
    va.log("wrote %s: %d files, %d models" % (tar, len(va.FILES), made))
    return 0


if __name__ == "__main__":
    sys.exit(main())
