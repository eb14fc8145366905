"""hf_gemma4_e4b.py - transformers' own Gemma 4 decode speed on E4B shapes, the
side-by-side figure for bench/engine_gpu.sh (run where torch + transformers
and a GPU exist, i.e. through the device tool).

Builds Gemma4ForCausalLM from an E4B-shaped Gemma4TextConfig (the keys of
../shared facts gemma4.md) with random bf16 weights on the GPU, eager
attention, and times model.generate of 128 greedy tokens after a warm-up.
Weights are random: decode speed does not depend on their values."""
import json
import sys
import time


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
    new = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    with torch.no_grad():
        for _ in range(2):
            model.generate(ids, max_new_tokens=16, min_new_tokens=16, do_sample=False)
        torch.cuda.synchronize()
        t0 = time.time()
        out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)
        torch.cuda.synchronize()
        dt = time.time() - t0
    n = out.shape[1] - ids.shape[1]
    print(json.dumps({"what": "transformers generate, bf16, eager attention, E4B shapes, random weights",
                      "new_tokens": n, "seconds": round(dt, 3), "tokens_per_s": round(n / dt, 2),
                      "ms_per_token": round(1e3 * dt / n, 3)}), flush=True)


if __name__ == "__main__":
    main()
