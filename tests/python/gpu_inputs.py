"""Inputs for the GPU tests: NumPy arrays by tensor name for any op, seeded, bf16 as uint16 raw
bits (as `moejit run` reads and writes them), and their torch twins."""
import numpy as np

POISON = 0xA5  # every output starts as this byte: rows an op leaves unwritten must keep it


def bf16_bits(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def numpy_dtype(decl):
    return np.uint16 if decl.dtype == "bfloat16" else np.dtype(decl.dtype)


def floats(decl, values):
    return bf16_bits(values) if decl.dtype == "bfloat16" else values.astype(numpy_dtype(decl))


def make_arrays(op, tokens, seed=0):
    """{name: array} for every tensor of `op` but unbound optional inputs; outputs poisoned."""
    rng = np.random.default_rng(seed)
    decls = {d.name: d for d in op.tensors()}
    experts = decls["w13"].shape_for(tokens)[0] if "w13" in decls else None
    out = {}
    for d in op.tensors():
        shape = d.shape_for(tokens)
        if d.role == "output":
            out[d.name] = np.full(int(np.prod(shape)) * d.itemsize, POISON, np.uint8).view(numpy_dtype(d)).reshape(shape)
        elif d.optional:
            continue
        elif d.name == "topk_ids":
            k = shape[1]
            out[d.name] = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k].astype(numpy_dtype(d))
        elif d.name == "topk_weights":
            out[d.name] = rng.random(shape, dtype=np.float32)
        elif d.name == "expert_num_tokens":
            out[d.name] = rng.integers(0, tokens + 1, shape).astype(np.int32)
        elif d.name == "gamma":
            out[d.name] = floats(d, 1 + 0.1 * rng.standard_normal(shape, dtype=np.float32))
        else:
            scale = 0.05 if d.name.startswith("w") else 1.0
            out[d.name] = floats(d, scale * rng.standard_normal(shape, dtype=np.float32))
    return out


def to_torch(torch, array, decl, device="cuda"):
    if decl.dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).to(device).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


def to_numpy(torch, tensor):
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).cpu().numpy().view(np.uint16)
    return tensor.cpu().numpy()
