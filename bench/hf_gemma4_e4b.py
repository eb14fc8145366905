"""hf_gemma4_e4b.py - transformers' own Gemma 4 decode speed on E4B shapes, the
side-by-side figure for bench/engine_gpu.sh (run where torch + transformers
and a GPU exist, i.e. through the device tool).

Builds Gemma4ForCausalLM from an E4B-shaped Gemma4TextConfig (the keys of
../shared facts gemma4.md) with random bf16 weights on the GPU, eager
attention, and times model.generate of 128 greedy tokens after a warm-up.
Weights are random: decode speed does not depend on their values.

usage: hf_gemma4_e4b.py [NEW_TOKENS] [--runs N] [--static-compiled] [--write-int4 DIR]
Without --static-compiled: eager generate (the default dynamic cache), N timed
runs (default 3) after two warm-up generates, median ms per token.
--static-compiled: generate with cache_implementation="static" instead, which
transformers compiles (torch.compile of the decode step, its default
CompileConfig) on a CUDA device; the first generate pays the compilation and is
timed apart, then N timed runs, median. The JSON line says which was timed
("mode": "eager" or "static-compiled") and whether the compiled call was used.
--write-int4 DIR then writes the same model as an fgpack INT4 input
checkpoint: every linear quantized on the GPU to compressed-tensors
pack-quantized INT4, group 128 (symmetric, scale = absmax / 7.5 in bf16, q =
round(w / scale) clamped to -8..7, nibble i of word j = element 8j + i as q +
8), everything else bf16 as built, tied embeddings; config.json with the
same text config (docs/formats/int4.md)."""
import json
import struct
import sys
import time

LINEARS = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight", "gate_proj.weight",
           "up_proj.weight", "down_proj.weight", "per_layer_input_gate.weight", "per_layer_projection.weight",
           "per_layer_model_projection.weight")
GROUP = 128


def quantize(w):
    """bf16 [n, k] on the GPU -> (packed int32 [n, k/8], scale bf16 [n, k/G]), both on the CPU."""
    import torch
    n, k = w.shape
    wf = w.float().view(n, k // GROUP, GROUP)
    scale = (wf.abs().amax(-1) / 7.5).clamp(min=1e-12).to(torch.bfloat16)
    q = torch.round(wf / scale.float().unsqueeze(-1)).clamp(-8, 7).to(torch.int64) + 8
    q = q.view(n, k // 8, 8)
    packed = torch.zeros(n, k // 8, dtype=torch.int64, device=w.device)
    for i in range(8):
        packed |= q[..., i] << (4 * i)
    packed = torch.where(packed >= 2 ** 31, packed - 2 ** 32, packed).to(torch.int32)
    return packed.cpu(), scale.cpu()


def write_int4(model, text, out):
    """model's weights as an INT4 g128 checkpoint in out (config.json + model.safetensors)."""
    import os
    import torch
    os.makedirs(out, exist_ok=True)
    tensors = []  # (name, dtype, shape, cpu tensor)
    for name, t in model.state_dict().items():
        if name == "lm_head.weight" or not name.startswith("model."):
            continue
        name = "model.language_model." + name[len("model."):]
        t = t.detach()
        if name.endswith(LINEARS) and t.dim() == 2:
            base = name[:-len(".weight")]
            packed, scale = quantize(t)
            tensors.append((base + ".weight_packed", "I32", list(packed.shape), packed))
            tensors.append((base + ".weight_scale", "BF16", list(scale.shape), scale))
            tensors.append((base + ".weight_shape", "I64", [2], torch.tensor(list(t.shape), dtype=torch.int64)))
        else:
            dt = {torch.bfloat16: "BF16", torch.float32: "F32"}.get(t.dtype)
            if dt is None:
                print("write_int4: %s (%s) left out" % (name, t.dtype), flush=True)
                continue
            tensors.append((name, dt, list(t.shape), t.cpu()))
    tensors.sort(key=lambda x: x[0])
    header, off = {}, 0
    for name, dt, shape, t in tensors:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, t in tensors:
            t = t.contiguous()
            if t.dtype == torch.bfloat16:
                t = t.view(torch.int16)
            f.write(t.numpy().tobytes())
    quant = {"config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                           "output_activations": None,
                                           "weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                                       "strategy": "group", "group_size": GROUP,
                                                       "dynamic": False, "actorder": None,
                                                       "block_structure": None, "observer": "minmax"}}},
             "format": "pack-quantized", "ignore": ["lm_head"], "quant_method": "compressed-tensors",
             "quantization_status": "compressed", "kv_cache_scheme": None, "global_compression_ratio": None}
    text = dict(text, model_type="gemma4_text")
    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text,
           "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0,
           "torch_dtype": "bfloat16", "quantization_config": quant,
           "fgpack_note": "E4B-shaped random-weight model written by bench/hf_gemma4_e4b.py --write-int4"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return off


def main():
    import torch
    import transformers
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    layers = 42
    text = dict(
        attention_bias=False, attention_dropout=0.0, attention_k_eq_v=False, bos_token_id=2, eos_token_id=1,
        enable_moe_block=False, final_logit_softcapping=30.0, global_head_dim=512, head_dim=256,
        hidden_activation="gelu_pytorch_tanh", hidden_size=2560, hidden_size_per_layer_input=256,
        initializer_range=0.02, intermediate_size=10240,
        layer_types=["full_attention" if i % 6 == 5 else "sliding_attention" for i in range(layers)],
        max_position_embeddings=4096, num_attention_heads=8, num_hidden_layers=layers, num_key_value_heads=2,
        num_kv_shared_layers=18, pad_token_id=0, rms_norm_eps=1e-6,
        rope_parameters={"full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0,
                                            "rope_type": "proportional"},
                         "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}},
        sliding_window=512, tie_word_embeddings=True, use_double_wide_mlp=False, vocab_size=262144,
        vocab_size_per_layer_input=262144)
    cfg = Gemma4TextConfig(**text)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    t0 = time.time()
    with torch.device("cuda"):
        model = Gemma4ForCausalLM(cfg).eval()
    torch.cuda.synchronize()
    n_params = sum(p.numel() for p in model.parameters())
    print("transformers %s, torch %s, %s: E4B-shaped Gemma4ForCausalLM, %.2f B params bf16, built in %.1f s"
          % (transformers.__version__, torch.__version__, torch.cuda.get_device_name(0), n_params / 1e9,
             time.time() - t0), flush=True)
    ids = torch.tensor([[2, 17, 300, 5]], device="cuda")
    args = sys.argv[1:]
    ck_dir = None
    if "--write-int4" in args:
        i = args.index("--write-int4")
        ck_dir = args[i + 1]
        del args[i:i + 2]
    runs = 3
    if "--runs" in args:
        i = args.index("--runs")
        runs = max(1, int(args[i + 1]))
        del args[i:i + 2]
    static = "--static-compiled" in args
    if static:
        args.remove("--static-compiled")
    new = int(args[0]) if args else 128
    kw = dict(max_new_tokens=new, min_new_tokens=new, do_sample=False)
    if static:
        kw["cache_implementation"] = "static"
    first = None
    times = []
    with torch.no_grad():
        # warm-up: the static cache's shape follows max_new_tokens, so its
        # warm-up (and compilation) uses the timed length
        for w in range(2):
            t0 = time.time()
            model.generate(ids, **(kw if static else dict(kw, max_new_tokens=16, min_new_tokens=16)))
            torch.cuda.synchronize()
            if w == 0:
                first = time.time() - t0
        for _ in range(runs):
            torch.cuda.synchronize()
            t0 = time.time()
            out = model.generate(ids, **kw)
            torch.cuda.synchronize()
            times.append(time.time() - t0)
    n = out.shape[1] - ids.shape[1]
    ms = sorted(1e3 * t / n for t in times)
    compiled = hasattr(model, "_compiled_call") if static else False
    rec = {"what": "transformers generate, bf16, eager attention, E4B shapes, random weights",
           "mode": "static-compiled" if static else "eager", "new_tokens": n, "runs": runs,
           "ms_per_token_runs": [round(m, 3) for m in ms], "ms_per_token": round(ms[len(ms) // 2], 3),
           "tokens_per_s": round(1e3 / ms[len(ms) // 2], 2)}
    if static:
        rec["first_generate_seconds"] = round(first, 1)
        rec["compiled_call_seen"] = compiled
    print(json.dumps(rec), flush=True)
    if ck_dir:
        t0 = time.time()
        with torch.no_grad():
            n_bytes = write_int4(model, text, ck_dir)
        print("wrote %s: INT4 g128 checkpoint of the same weights, %.2f GB of tensors, in %.1f s"
              % (ck_dir, n_bytes / 1e9, time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
