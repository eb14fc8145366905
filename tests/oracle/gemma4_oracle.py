#!/usr/bin/env python3
"""gemma4_oracle.py - records Hugging Face transformers' answers for the tiny
Gemma 4 checkpoints made by tiny_gemma4.py; run on the GPU machine (torch +
transformers 5.17), results go under $OUT.

For each checkpoint folder (bf16/, int4/ - int4 weights are dequantized to
fp32 exactly as q * scale) it builds Gemma4ForCausalLM from the folder's
text_config in fp32 with eager attention, on the CPU (exact fp32, no TF32),
and records:
  - for each prompt: a 32-token greedy continuation decoded step by step with
    transformers' KV cache, with the top-1/top-2 margin of every step;
  - fp32 logits (after the final softcap) at every position of prompt +
    continuation from one uncached forward pass;
  - the same on the GPU, and our numpy reading of the math, as cross-checks
    (their max differences are printed, not stored).
Also one run with sliding_window overridden to 5 (the --sliding-window knob).
Output: $OUT/oracle.tar with <variant>/oracle.json + <variant>/logits.bin
(float32 little-endian, positions × vocab) and the transformers sources read.

usage: OUT=dir python3 gemma4_oracle.py FIXTURE_DIR
"""
import inspect
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_gemma4 as tg  # noqa: E402

OUT = os.environ.get("OUT", "/tmp/oracle_out")
FILES = {}  # name -> bytes, packed into oracle.tar at the end


def log(*a):
    print(*a, flush=True)


def dump_sources():
    import transformers
    log("transformers", transformers.__version__)
    mods = ["transformers.models.gemma4.modeling_gemma4",
            "transformers.models.gemma4.configuration_gemma4",
            "transformers.modeling_rope_utils",
            "transformers.masking_utils",
            "transformers.integrations.sdpa_attention",
            "transformers.cache_utils",
            "transformers.activations"]
    for m in mods:
        try:
            mod = __import__(m, fromlist=["x"])
            FILES["src/" + m.split(".")[-1] + ".py"] = inspect.getsource(mod).encode()
        except Exception as e:  # keep going: the sources are a convenience
            log("source of", m, "unavailable:", e)


def safe_attr(obj, k):
    """getattr that survives transformers' per-layer config attributes (an
    ambiguous global read raises)."""
    try:
        v = getattr(obj, k, None)
        json.dumps(v)
        return v
    except Exception as e:
        return "<%s>" % type(e).__name__


def build(text, window=None):
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig
    text = dict(text)
    text.pop("model_type", None)
    # a canonical JSON writer (fgpack's) prints 30.0 as 30; transformers'
    # strict config wants floats there
    for k in ("final_logit_softcapping", "rms_norm_eps", "initializer_range", "attention_dropout"):
        if isinstance(text.get(k), int) and not isinstance(text.get(k), bool):
            log("  config key %s = %r is an integer; passing it as a float" % (k, text[k]))
            text[k] = float(text[k])
    if window:
        text["sliding_window"] = window
    log("  Gemma4TextConfig signature:", inspect.signature(Gemma4TextConfig))
    try:
        cfg = Gemma4TextConfig(**text)
    except Exception:
        log("Gemma4TextConfig(**text) failed:")
        traceback.print_exc()
        try:
            known = set(inspect.signature(Gemma4TextConfig).parameters)
            log("  dropping keys not in the signature:", sorted(set(text) - known))
            cfg = Gemma4TextConfig(**{k: v for k, v in text.items() if k in known})
        except Exception:
            traceback.print_exc()
            cfg = Gemma4TextConfig()
        for k, v in text.items():
            if getattr(cfg, k, None) != v:
                log("  setting cfg.%s = %r after construction" % (k, v))
                try:
                    setattr(cfg, k, v)
                except Exception as e:
                    log("   failed:", e)
    cfg._attn_implementation = "eager"
    for k in ("head_dim", "global_head_dim", "sliding_window", "num_kv_shared_layers",
              "final_logit_softcapping", "rope_parameters", "layer_types", "hidden_size_per_layer_input"):
        log("  cfg.%s = %r" % (k, safe_attr(cfg, k)))
    torch.manual_seed(0)
    model = Gemma4ForCausalLM(cfg).float().eval()
    return cfg, model


def load_weights(model, w):
    import torch
    sd = {}
    for k, v in w.items():
        sd["model." + k] = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
    own = model.state_dict()
    for k in list(sd):
        if k in own and tuple(own[k].shape) != tuple(sd[k].shape):
            sd[k] = sd[k].reshape(own[k].shape)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    log("  missing:", missing, "unexpected:", unexpected)
    bad = [m for m in missing if m != "lm_head.weight"]
    if bad or unexpected:
        raise SystemExit("weights do not match the model: missing %s unexpected %s" % (bad, unexpected))
    model.tie_weights()
    e = model.model.embed_tokens.weight
    if not torch.equal(model.lm_head.weight, e):
        log("  lm_head was not tied after loading: copying the embedding into it")
        with torch.no_grad():
            model.lm_head.weight.copy_(e)
    for n, b in model.named_buffers():
        if n.endswith("layer_scalar"):
            key = n[len("model."):]
            if key in w and abs(float(b.flatten()[0]) - float(w[key].flatten()[0])) > 1e-6:
                raise SystemExit("layer scalar %s did not load" % n)


def run_variant(name, fixdir, window=None, prompts=None):
    import torch
    torch.set_num_threads(8)
    conf = json.load(open(os.path.join(fixdir, "config.json")))
    text = conf["text_config"]
    w = tg.load_dequantized(fixdir)
    cfg, model = build(text, window)
    load_weights(model, w)
    for n, p in model.named_parameters():
        if n.startswith(("model.layers.0.", "model.layers.2.", "model.layers.5.")) or "layers" not in n:
            log("  param %-60s %s" % (n, tuple(p.shape)))
    for n, b in model.named_buffers():
        if "layer_scalar" in n and n.startswith("model.layers.0"):
            log("  buffer %s %s" % (n, b.tolist()))
    prompts = prompts or tg.prompts()
    meta = {"variant": name, "source": fixdir, "window": window or text["sliding_window"], "vocab": cfg.vocab_size,
            "transformers_config": {k: safe_attr(cfg, k) for k in (
                "head_dim", "global_head_dim", "sliding_window", "num_kv_shared_layers")},
            "prompts": []}
    chunks = []
    offset = 0
    V = cfg.vocab_size
    with torch.no_grad():
        for pr in prompts:
            # greedy with transformers' cache, one token at a time after the prompt
            ids = torch.tensor([pr])
            out = model(input_ids=ids, use_cache=True)
            past = out.past_key_values
            last = out.logits[0, -1]
            gen, margins, step_logits = [], [], []
            for _ in range(32):
                top = torch.topk(last, 2)
                tok = int(top.indices[0])
                gen.append(tok)
                margins.append(float(top.values[0] - top.values[1]))
                step_logits.append(last.clone())
                out = model(input_ids=torch.tensor([[tok]]), past_key_values=past, use_cache=True)
                past = out.past_key_values
                last = out.logits[0, -1]
            seq = list(pr) + gen
            full = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0].float()
            # cached steps vs the uncached pass at the same positions
            st = torch.stack(step_logits)
            d_cache = float((st - full[len(pr) - 1:len(pr) - 1 + 32]).abs().max())
            argmax_ok = all(int(full[len(pr) - 1 + i].argmax()) == gen[i] for i in range(32))
            npl = tg.forward(tg.TEXT_CONFIG if window is None else dict(tg.TEXT_CONFIG, sliding_window=window),
                             w, seq)
            d_np = float(np.abs(npl - full.numpy()).max())
            gpu = None
            if torch.cuda.is_available():
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False
                mg = model.to("cuda")
                gl = mg(input_ids=torch.tensor([seq], device="cuda"), use_cache=False).logits[0].float().cpu()
                gpu = float((gl - full).abs().max())
                model.to("cpu")
            log("  %s prompt len %d: gen %s... min margin %.5f | cache-vs-full %.3g argmax_ok %s | "
                "numpy-vs-torch %.3g | gpu-vs-cpu %s" % (name, len(pr), gen[:8], min(margins), d_cache,
                                                          argmax_ok, d_np, gpu))
            arr = full.numpy().astype("<f4")
            chunks.append(arr.tobytes())
            meta["prompts"].append({"prompt": pr, "generated": gen, "margins": margins,
                                    "positions": len(seq), "logits_offset": offset,
                                    "check": {"cache_vs_full": d_cache, "argmax_consistent": argmax_ok,
                                              "numpy_vs_torch": d_np, "gpu_vs_cpu": gpu}})
            offset += len(seq) * V
    FILES[name + "/oracle.json"] = (json.dumps(meta, indent=1) + "\n").encode()
    FILES[name + "/logits.bin"] = b"".join(chunks)


def main():
    fix = sys.argv[1]
    os.makedirs(OUT, exist_ok=True)
    t0 = time.time()
    try:
        dump_sources()
    except Exception:
        traceback.print_exc()
    for name, sub, window, prs in (("bf16", "bf16", None, None),
                                   ("int4", "int4", None, None),
                                   ("bf16-window5", "bf16", 5, [tg.prompts()[3]])):
        try:
            log("==", name)
            run_variant(name, os.path.join(fix, sub), window, prs)
        except BaseException:
            traceback.print_exc()
        # write what we have after each variant, so a late failure keeps the rest
        size = tg.write_tar(os.path.join(OUT, "oracle.tar"), FILES)
        log("  wrote oracle.tar (%d files, %d bytes) at %.1fs" % (len(FILES), size, time.time() - t0))


if __name__ == "__main__":
    main()
