#!/usr/bin/env python3
"""variants_mm.py - tiny multimodal Gemma 4 checkpoints made by transformers
itself: Gemma4ForConditionalGeneration(Gemma4Config(text_config, vision_config,
audio_config)) as google/gemma-4-E4B ships (tensors model.language_model.*,
model.vision_tower.*, model.audio_tower.*, model.embed_vision.*,
model.embed_audio.*; config.json with text_config, vision_config,
audio_config), with transformers' text-only logits and greedy continuations
for token prompts. Run on the GPU machine (torch + transformers 5.17).

Every step is tests/oracle/variants.py's (imported, not copied): its build()
re-draws the weights (towers included) with make= building the multimodal
model, its run() picks the seed, saves with save_pretrained in bf16, reloads
and records oracle.json/logits.bin. On top of that, here:
  - tiny vision and audio towers (clipped linears, so the towers carry 0-d
    clip buffers: +-inf in the audio tower, finite in the vision tower;
    the vision tower's standardize buffers);
  - image/audio/video placeholder ids inside the tiny vocabulary (250, 251,
    252): Gemma4Model embeds them as pad_token_id in a text-only forward, and
    the prompts hold them;
  - mm-e4b-sharded: mm-e4b saved again with a small max_shard_size
    (model-0000i-of-0000n.safetensors + model.safetensors.index.json), same
    oracle;
  - mm-tie-top / mm-tie-text: tie_word_embeddings false at the top level
    (true in text_config), and the reverse: which one transformers follows
    shows in the saved files (lm_head.weight or not) and in the logits;
  - probes.json: generation_config of each model (bos/eos/pad as generate()
    would use them), whether lm_head is the embedding, and whether
    Gemma4ForCausalLM.from_pretrained reads the multimodal checkpoint.

Output: $OUT/variants_mm.tar with <variant>/{config.json, model.safetensors
(or the shards and the index), generation_config.json, oracle.json,
logits.bin} and probes.json.

usage: OUT=dir python3 variants_mm.py
"""
import copy
import json
import os
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_gemma4 as tg  # noqa: E402
import variants as vr  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/variants_mm_out")
PROBES = {}

# placeholder ids inside the tiny vocabulary (E4B: 258880, 258881, 258884)
MM_IDS = {"image_token_id": 250, "audio_token_id": 251, "video_token_id": 252}

VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
              num_key_value_heads=2, head_dim=16, patch_size=4, pooling_kernel_size=2,
              position_embedding_size=16, use_clipped_linears=True, standardize=True)
AUDIO = dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, subsampling_conv_channels=[8, 4],
             conv_kernel_size=3, attention_chunk_size=4, attention_context_left=5, attention_context_right=0,
             output_proj_dims=48, use_clipped_linears=True)

SMALL = vr.VARIANTS["bidir-vision"]

# name -> (text config, top-level Gemma4Config keys)
MM = {
    "mm-e4b": (vr.VARIANTS["e4b-shape"], dict(MM_IDS, tie_word_embeddings=True)),
    "mm-tie-top": (dict(SMALL, tie_word_embeddings=True),
                   dict(MM_IDS, tie_word_embeddings=False, eos_token_id=[1, 106])),
    "mm-tie-text": (dict(SMALL, tie_word_embeddings=False), dict(MM_IDS, tie_word_embeddings=True)),
}

# the prompts of variants.py (the third holds 250, the image placeholder)
# and one with every placeholder
EXTRA_PROMPT = [2, 251, 252, 9, 250, 250, 11, 40]


def maker(top):
    def make(text):
        import torch
        from transformers import (Gemma4AudioConfig, Gemma4Config, Gemma4ForConditionalGeneration,
                                  Gemma4VisionConfig)
        kw = dict(text_config=dict(text), vision_config=Gemma4VisionConfig(**VISION),
                  audio_config=Gemma4AudioConfig(**AUDIO))
        try:
            cfg = Gemma4Config(**kw, **top)
        except Exception:
            traceback.print_exc()
            vr.log("  Gemma4Config refused %s: built without eos_token_id" % top)
            cfg = Gemma4Config(**kw, **{k: v for k, v in top.items() if k != "eos_token_id"})
        cfg._attn_implementation = "eager"
        cfg.text_config._attn_implementation = "eager"
        model = Gemma4ForConditionalGeneration(cfg)
        g = torch.Generator().manual_seed(1234)
        with torch.no_grad():
            for n, b in model.named_buffers():
                if n.startswith("model.vision_tower") and n.endswith(("input_min", "output_min")):
                    b.fill_(-4.0 - float(torch.rand((), generator=g)))
                elif n.startswith("model.vision_tower") and n.endswith(("input_max", "output_max")):
                    b.fill_(4.0 + float(torch.rand((), generator=g)))
                elif n.endswith("std_bias"):
                    b.copy_(torch.randn(b.shape, generator=g) * 0.1)
                elif n.endswith("std_scale"):
                    b.copy_(torch.rand(b.shape, generator=g) + 0.5)
        return model.config.text_config, model
    return make


def probe_model(name, model, dtype):
    import torch
    from transformers import Gemma4ForCausalLM
    p = {}
    lm = model.model.language_model.embed_tokens.weight
    p["lm_head_is_embedding"] = model.lm_head.weight.data_ptr() == lm.data_ptr()
    p["lm_head_equals_embedding"] = bool(torch.equal(model.lm_head.weight, lm))
    gc = model.generation_config.to_dict()
    p["generation_config"] = {k: gc.get(k) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    p["config_top"] = {k: getattr(model.config, k, "(absent)") for k in
                       ("bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings")}
    tc = model.config.text_config
    p["config_text"] = {k: getattr(tc, k, "(absent)") for k in
                        ("bos_token_id", "eos_token_id", "pad_token_id", "tie_word_embeddings")}
    p["tensors"] = []
    with tempfile.TemporaryDirectory() as d:
        copy.deepcopy(model).to(dtype).save_pretrained(d, safe_serialization=True)
        from safetensors import safe_open
        with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
            for k in f.keys():
                t = f.get_slice(k)
                p["tensors"].append([k, str(t.get_dtype()), list(t.get_shape())])
        p["lm_head_saved"] = any(k == "lm_head.weight" for k, _, _ in p["tensors"])
        # a text-only loader on the multimodal checkpoint
        try:
            pr = torch.tensor([vr.PROMPTS[-1]])
            back = Gemma4ForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
            with torch.no_grad():
                p["causallm_from_pretrained_max_diff"] = float(
                    (back(input_ids=pr).logits - model(input_ids=pr).logits).abs().max())
        except Exception as e:
            p["causallm_from_pretrained_error"] = "%s: %s" % (type(e).__name__, str(e)[:300])
    vr.log("  probe %s: %s" % (name, json.dumps({k: v for k, v in p.items() if k != "tensors"}, default=str)))
    PROBES[name] = p


def save_sharded(name, model, dtype, src):
    with tempfile.TemporaryDirectory() as d:
        copy.deepcopy(model).to(dtype).save_pretrained(d, safe_serialization=True, max_shard_size="200KB")
        for f in sorted(os.listdir(d)):
            vr.log("   saved sharded", f, os.path.getsize(os.path.join(d, f)))
            vr.FILES[name + "/" + f] = open(os.path.join(d, f), "rb").read()
    for f in ("oracle.json", "logits.bin"):
        vr.FILES[name + "/" + f] = vr.FILES[src + "/" + f]


def main():
    import torch
    import transformers
    torch.set_num_threads(8)
    vr.log("transformers", transformers.__version__, "torch", torch.__version__)
    os.makedirs(OUT, exist_ok=True)
    vr.PROMPTS = vr.PROMPTS + [EXTRA_PROMPT]
    for name, (text, top) in MM.items():
        vr.log("==", name)
        try:
            model, dtype = vr.run(name, text, make=maker(top))
            meta = json.loads(vr.FILES[name + "/oracle.json"])
            meta["made_by"] = "transformers save_pretrained (tests/oracle/variants_mm.py)"
            meta["architecture"] = type(model).__name__
            vr.FILES[name + "/oracle.json"] = (json.dumps(meta, indent=1) + "\n").encode()
            with tempfile.TemporaryDirectory() as d:
                copy.deepcopy(model).to(dtype).save_pretrained(d, safe_serialization=True)
                vr.FILES[name + "/generation_config.json"] = open(os.path.join(d, "generation_config.json"),
                                                                  "rb").read()
            probe_model(name, model, dtype)
            if name == "mm-e4b":
                save_sharded("mm-e4b-sharded", model, dtype, name)
        except BaseException:
            traceback.print_exc()
    vr.FILES["probes.json"] = (json.dumps(PROBES, indent=1, default=str) + "\n").encode()
    tg.write_tar(os.path.join(OUT, "variants_mm.tar"), vr.FILES)
    vr.log("wrote variants_mm.tar: %d files" % len(vr.FILES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
