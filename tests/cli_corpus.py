"""Corrupted GGUFs and stores for the command-line fuzz test (tests/unit/test_cli_fuzz.py), made deterministically from
the fixture models: each generator yields (label, write(path or folder)) pairs, so one file or folder at a time
exists on disk."""
import json
import os
import random
import shutil
import struct

import numpy as np
from gguf import GGUFReader

from test_gguf_fuzz import HOSTILE, structural_fields

# Hyper-parameters a broken converter (or an attacker) could write: each is impossible or breaks the math.
HYPER_EDITS = [
    ("expert_used_count", 99), ("expert_used_count", 0), ("expert_count", 0), ("expert_count", 1),
    ("embedding_length", 0), ("embedding_length", 1), ("block_count", 0), ("block_count", 1000),
    ("attention.head_count", 0), ("attention.head_count", 3), ("attention.head_count_kv", 0),
    ("attention.head_count_kv", 5), ("attention.key_length", 0), ("attention.value_length", 0),
    ("context_length", 0), ("rope.dimension_count", 999), ("rope.dimension_count", 3),
    ("expert_feed_forward_length", 0), ("ssm.inner_size", 7), ("ssm.group_count", 0), ("ssm.conv_kernel", 0),
    ("ssm.time_step_rank", 3), ("attention.layer_norm_rms_epsilon", float("nan")),
    ("attention.layer_norm_rms_epsilon", 0.0), ("attention.layer_norm_rms_epsilon", -1.0),
    ("rope.freq_base", float("inf")), ("rope.freq_base", float("nan")), ("rope.freq_base", -5.0),
]


def value_offsets(path):
    """{key: (offset, numpy dtype)} of every scalar metadata value."""
    out = {}
    for f in GGUFReader(path).fields.values():
        if len(f.data) != 1 or len(f.types) != 1:
            continue
        part = f.parts[f.data[0]]
        if part.size != 1 or part.dtype.kind not in "uif":
            continue
        out[f.name] = (f.offset + sum(p.nbytes for p in f.parts[:f.data[0]]), part.dtype)
    return out


def tensor_offsets(path):
    """{name: (absolute offset, type name)} of every tensor."""
    return {t.name: (int(t.data_offset), t.tensor_type.name) for t in GGUFReader(path).tensors}


def gguf_corpus(seed_path, rng: random.Random, n_random: int):
    data = seed_path.read_bytes()
    fields = structural_fields(seed_path)
    values = value_offsets(seed_path)
    tensors = tensor_offsets(seed_path)
    arch = next(k.split(".")[0] for k in values if k.endswith(".block_count"))
    header_end = min(off for off, _ in tensors.values())

    def writer(buf):
        return lambda path: path.write_bytes(bytes(buf))

    for key, value in HYPER_EDITS:
        full = f"{arch}.{key}"
        if full not in values:
            continue
        off, dtype = values[full]
        buf = bytearray(data)
        buf[off:off + dtype.itemsize] = np.array([value], dtype=dtype).tobytes()
        yield f"{full}={value}", writer(buf)
    for name, (off, kind) in sorted(tensors.items()):
        if name in ("output_norm.weight", "token_embd.weight", "blk.0.attn_norm.weight") or "ffn_down_exps" in name:
            for bad, label in ((b"\x00\x00\xc0\x7f", "NaN"), (b"\x00\x00\x80\x7f", "inf")):
                buf = bytearray(data)
                if kind == "F32":
                    buf[off:off + 4 * 16] = bad * 16
                else:  # Q8_0: the block's f16 scale
                    buf[off:off + 2] = b"\x00\x7e" if label == "NaN" else b"\x00\x7c"
                yield f"{label} in {name}", writer(buf)
    for i in range(n_random):
        buf = bytearray(data)
        kind = rng.choice(["flip", "field", "field", "truncate", "truncate-header", "splice"])
        if kind == "flip":
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(header_end)] ^= rng.randint(1, 255)
        elif kind == "field":
            pos, size = rng.choice(fields)
            value = rng.choice(HOSTILE + [len(data) - pos, rng.getrandbits(64)])
            buf[pos:pos + size] = (value % 2 ** (8 * size)).to_bytes(size, "little")
        elif kind == "truncate":
            del buf[rng.randrange(len(buf)):]
        elif kind == "truncate-header":
            del buf[rng.randrange(header_end):]
        else:
            a, b, n = rng.randrange(header_end), rng.randrange(header_end), rng.randint(1, 64)
            buf[b:b + n] = data[a:a + n]
            del buf[len(data):]
        yield f"random {kind} #{i}", writer(buf)


HOSTILE_JSON = [-1, 0, 1.5, True, None, "x", [], {}, 10 ** 12, 2 ** 64, float("nan")]


def _leaves(node, path=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(node, list) and node:
        for i in sorted({0, len(node) // 2, len(node) - 1}):
            yield from _leaves(node[i], path + (i,))
    else:
        yield path


def _set(node, path, value):
    for k in path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value


def store_corpus(clean, rng: random.Random, n_manifest: int, n_bytes: int):
    """Damaged copies of the store folder `clean`: edited manifest values, missing keys and files, torn JSON,
    flipped and cut store files."""
    manifest = json.loads((clean / "manifest.json").read_text())
    leaves = list(_leaves(manifest))

    def copy_then(change):
        def write(folder):
            shutil.copytree(clean, folder)
            change(folder)
        return write

    def put(m):
        return lambda folder: (folder / "manifest.json").write_text(json.dumps(m))

    for i in range(n_manifest):
        m = json.loads(json.dumps(manifest))
        path = rng.choice(leaves)
        value = rng.choice(HOSTILE_JSON + [KeyError])
        _set(m, path, value)
        yield f"manifest {'.'.join(map(str, path))} = {value!r}", copy_then(put(m))
    for label, text in (("empty", b""), ("torn", (clean / "manifest.json").read_bytes()[:500]),
                        ("not JSON", b"\xff\xfe{"), ("a list", b"[]"), ("deep", b"[" * 100000)):
        yield f"manifest {label}", copy_then(lambda f, t=text: (f / "manifest.json").write_bytes(t))
    files = ["header.bin", "dense.bin", "experts.bin"]
    for name in files:
        yield f"{name} missing", copy_then(lambda f, n=name: (f / n).unlink())
        yield f"{name} empty", copy_then(lambda f, n=name: (f / n).write_bytes(b""))
    for i in range(n_bytes):
        name = rng.choice(files)
        size = (clean / name).stat().st_size
        if rng.random() < 0.75:
            pos, x = rng.randrange(size), rng.randint(1, 255)

            def flip(folder, name=name, pos=pos, x=x):
                with open(folder / name, "r+b") as fh:
                    fh.seek(pos)
                    b = fh.read(1)[0]
                    fh.seek(pos)
                    fh.write(struct.pack("B", b ^ x))
            yield f"{name} byte {pos} ^ {x}", copy_then(flip)
        else:
            cut = rng.randrange(size)
            yield f"{name} cut at {cut}", copy_then(lambda f, n=name, c=cut: os.truncate(f / n, c))
