#!/usr/bin/env python3
"""ct_check.py - run where torch is (the GPU machine): are vLLM and
compressed-tensors installed, and if compressed-tensors is, does its own
pack-quantized decompression of checkpoints baked by `fgpack bake int4` give,
bit for bit, the weights our format defines (docs/formats/int4.md):
bf16(q * scale), q = nibble - 8? Checks every folder named baked-* next to
this script (bake them here, copy script and folders to the machine):
  fgpack bake int4 SRC DIR/baked-g128
  fgpack bake int4 SRC DIR/baked-g32-head-int4 --group 32 --head int4
  python3 DIR/ct_check.py        # ends with a RESULT: line"""
import glob
import importlib.metadata as md
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def ver(name):
    try:
        return md.version(name)
    except Exception:
        return None


print("python", sys.version.split()[0], sys.executable)
for n in ["vllm", "compressed-tensors", "torch", "transformers", "safetensors", "numpy"]:
    print("package %-20s %s" % (n, ver(n)))
have_ct = importlib.util.find_spec("compressed_tensors") is not None
print("import compressed_tensors possible:", have_ct, "| import vllm possible:",
      importlib.util.find_spec("vllm") is not None)
if not have_ct:
    print("RESULT: compressed-tensors is not installed here; no check run")
    sys.exit(0)

import traceback

import numpy as np
import torch
from safetensors.torch import load_file
from compressed_tensors.quantization import QuantizationArgs
import compressed_tensors.compressors.quantized_compressors.pack_quantized as pq


def ct_dequant(data, args):
    """compressed-tensors' own decompression of one weight; returns (tensor, path)."""
    errs = []
    comp_cls = getattr(pq, "PackedQuantizationCompressor", None)
    if comp_cls is not None and hasattr(comp_cls, "decompress_weight"):
        try:
            comp = comp_cls()
            return comp.decompress_weight(compressed_data=data, quantization_args=args), \
                "PackedQuantizationCompressor.decompress_weight"
        except Exception:
            errs.append(traceback.format_exc())
    try:
        from compressed_tensors.quantization.lifecycle.forward import dequantize
        q = pq.unpack_from_int32(data["weight_packed"], args.num_bits,
                                 torch.Size([int(x) for x in data["weight_shape"].tolist()]))
        return dequantize(q, data["weight_scale"], None, args), \
            "unpack_from_int32 + lifecycle.forward.dequantize"
    except Exception:
        errs.append(traceback.format_exc())
    raise RuntimeError("no compressed-tensors path worked:\n" + "\n".join(errs))


def ours(packed, scale, shape, group):
    """Our dequantization, independently: nibble i of word j is element 8j+i."""
    p = packed.view(torch.int32).numpy().view(np.uint32)
    rows, cols = shape
    nib = np.stack([(p >> (4 * i)) & 15 for i in range(8)], axis=-1).reshape(rows, cols)
    q = nib.astype(np.int32) - 8
    s = scale.view(torch.int16).numpy().view(np.uint16).astype(np.uint32) << 16
    s = s.view(np.float32)
    prod = q.astype(np.float32) * np.repeat(s, group, axis=1)  # exact in fp32
    u = prod.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # to bf16, half to even


total = bad = 0
for ck in sorted(glob.glob(os.path.join(HERE, "baked-*"))):
    cfg = json.load(open(os.path.join(ck, "config.json")))
    qc = cfg["quantization_config"]
    wargs = qc["config_groups"]["group_0"]["weights"]
    args = QuantizationArgs(**{k: v for k, v in wargs.items() if v is not None})
    t = {}
    for f in sorted(glob.glob(os.path.join(ck, "*.safetensors"))):
        t.update(load_file(f))
    bases = sorted(k[: -len(".weight_packed")] for k in t if k.endswith(".weight_packed"))
    n = nbad = 0
    path = "-"
    for b in bases:
        data = {"weight_packed": t[b + ".weight_packed"], "weight_scale": t[b + ".weight_scale"],
                "weight_shape": t[b + ".weight_shape"]}
        got, path = ct_dequant(data, args)
        if got.dtype != torch.bfloat16:
            print("  %s: compressed-tensors returned %s" % (b, got.dtype))
        g = got.to(torch.bfloat16).contiguous().view(torch.int16).numpy().view(np.uint16)
        shape = [int(x) for x in t[b + ".weight_shape"].tolist()]
        want = ours(t[b + ".weight_packed"], t[b + ".weight_scale"], shape, wargs["group_size"])
        n += 1
        if g.shape != want.shape or not np.array_equal(g, want):
            nbad += 1
            diff = int((g != want).sum()) if g.shape == want.shape else -1
            print("  MISMATCH %s: %d of %d elements differ" % (b, diff, want.size))
    print("%s: group %s, %d quantized weights, %d differ from ours (compressed-tensors %s, %s)" %
          (os.path.basename(ck), wargs["group_size"], n, nbad, ver("compressed-tensors"),
           path))
    total += n
    bad += nbad
print("RESULT: %d quantized weights dequantized by compressed-tensors, %d differ bit for bit" %
      (total, bad))
