"""qkvref - writes PyTorch reference values for qkv's tests as safetensors files.

A reference file holds named cases. Case `c` stores tensors as "c/<name>" and its parameters
(a JSON object) in the safetensors __metadata__ under key "c", and the file records the torch
version that computed it under "__torch__" (tools/gen_refs.py sets TORCH_VERSION). The C++ side
(tests/common/ref.h) iterates the cases, reads the parameters, runs qkv and compares.
"""
import json
import struct

import torch

TORCH_VERSION = torch.__version__  # gen_refs.py sets it too; recorded in every reference file

_DT = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32", torch.int64: "I64",
       torch.uint8: "U8", torch.bool: "BOOL"}


def save_safetensors(path, tensors, metadata=None):
    header, blobs, pos = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        raw = t.numpy().tobytes() if t.dtype != torch.bool else t.to(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape), "data_offsets": [pos, pos + len(raw)]}
        blobs.append(raw)
        pos += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    import os
    os.replace(tmp, path)


class Refs:
    """Collects cases; save() writes them."""

    def __init__(self):
        self.tensors, self.meta = {}, {}

    def case(self, name, params=None, **tensors):
        assert "/" not in name and name not in self.meta, name
        self.meta[name] = json.dumps(params or {})
        for k, v in tensors.items():
            if v is None:
                continue
            if not torch.is_tensor(v):
                v = torch.tensor(v)
            self.tensors[f"{name}/{k}"] = v

    def save(self, path):
        save_safetensors(path, self.tensors, dict(self.meta, __torch__=TORCH_VERSION))


def grads(out, inputs, gy):
    """Gradients of sum(out * gy) w.r.t. inputs (None where an input gets none)."""
    gs = torch.autograd.grad(out, inputs, gy, allow_unused=True)
    return list(gs)
