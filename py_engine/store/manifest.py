"""manifest.json: what a model folder holds, where its ingest stands, and the checksums to verify it by.

    format      FORMAT_VERSION; another version is never resumed (the folder is rebuilt)
    source      {name, url, size, etag, header_sha256, sha256_expected}: the identity a resume must match
    config      {architecture, metadata: every scalar metadata value of the GGUF}
    layout      StoreLayout.to_json(): dense planes and the expert record
    state       {complete, failed, next_offset, chunk_bytes, checkpoints: [{offset, time}], gaps}
    checksums   {algorithm: "crc32", header, dense: {plane key: crc}, records: [crc per record sub-plane]}
    sha256      the source file's sha256, once the whole file has streamed through

Checksums are zlib.crc32: C code in CPython and in Pyodide (GB/s), and, unlike hashlib's sha256, its running state
is a plain int, so a half-written plane's checksum is saved in a checkpoint and continued after a resume. While the
ingest runs, `checksums` holds those running values; when it completes they are the final ones. `gaps` keeps the
(rare) non-zero padding bytes between tensors, keyed by source offset, so the source can be rebuilt from the store.
"""
import json
import time

from .layout import FORMAT_VERSION, MANIFEST_FILE, RECORD_PLANES

IDENTITY_KEYS = ("size", "etag", "header_sha256")


def new_manifest(header, layout, identity: dict, chunk_bytes: int, expected_sha256=None) -> dict:
    n_records = len(layout.experts.layers) * layout.experts.n_experts if layout.experts else 0
    metadata = {k: v for k, v in header.metadata.items() if isinstance(v, (str, int, float, bool))}
    return {
        "format": FORMAT_VERSION,
        "source": {**identity, "sha256_expected": expected_sha256},
        "config": {"architecture": header.architecture, "metadata": metadata},
        "layout": layout.to_json(),
        "state": {"complete": False, "failed": None, "next_offset": 0, "chunk_bytes": chunk_bytes,
                  "checkpoints": [], "gaps": {}},
        "checksums": {"algorithm": "crc32", "header": 0, "dense": {p.key: 0 for p in layout.dense},
                      "records": [0] * (n_records * len(RECORD_PLANES))},
        "sha256": None,
    }


def same_source(manifest: dict, identity: dict) -> bool:
    """True when a stored manifest was made from the same source file (size, ETag and header hash all equal)."""
    if not manifest or manifest.get("format") != FORMAT_VERSION:
        return False
    old = manifest.get("source", {})
    return all(old.get(k) == identity.get(k) for k in IDENTITY_KEYS)


async def load_manifest(sink):
    raw = await sink.get(MANIFEST_FILE)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None  # a torn or foreign file: treated as no store at all


async def save_manifest(sink, manifest: dict):
    await sink.put(MANIFEST_FILE, json.dumps(manifest, separators=(",", ":")).encode())


def add_checkpoint(manifest: dict, offset: int):
    st = manifest["state"]
    st["next_offset"] = offset
    st["checkpoints"].append({"offset": offset, "time": round(time.time(), 3)})


def store_bytes(manifest: dict) -> int:
    """Bytes the finished folder occupies (manifest aside)."""
    lay = manifest["layout"]
    ex = lay["experts"]
    return lay["header_size"] + lay["dense"]["size"] + (ex["file_size"] if ex else 0)


def record_checksums(manifest: dict, layer: int, expert: int):
    """{sub-plane: crc} of one record."""
    ex = manifest["layout"]["experts"]
    i = (ex["layers"].index(layer) * ex["n_experts"] + expert) * len(RECORD_PLANES)
    return dict(zip(RECORD_PLANES, manifest["checksums"]["records"][i:i + len(RECORD_PLANES)]))
