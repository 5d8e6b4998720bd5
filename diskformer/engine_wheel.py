"""Build the `py_engine` wheel that the page installs into Pyodide with micropip, in memory, from the repo sources.

The wheel holds every `py_engine/**/*.py` and `py_engine/**/*.js` (the JS programs the engine evaluates) plus
`shaders/**/*.wgsl` as `py_engine/shaders/**/*.wgsl` (subfolders kept), so the engine finds its kernels beside its
code. It is rebuilt whenever a source's path, size or mtime changes (a cheap stat walk per request), so a reload of
the page picks up an edit without restarting the host. Entries carry a fixed timestamp, so
the same sources always give the same bytes and the ETag (a content hash) only changes when the engine does.
"""
import base64
import hashlib
import io
import os
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

NAME = "py_engine"
VERSION = "0.1.0"
WHEEL_NAME = f"{NAME}-{VERSION}-py3-none-any.whl"
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
_FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # earliest date a zip entry can hold; keeps builds byte-identical

_METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: diskformer's in-browser MoE inference engine (pure Python, runs in Pyodide)
Requires-Python: >=3.11
"""

_WHEEL = """Wheel-Version: 1.0
Generator: diskformer.engine_wheel
Root-Is-Purelib: true
Tag: py3-none-any
"""


@dataclass(frozen=True)
class BuiltWheel:
    data: bytes
    etag: str          # quoted, from the wheel's sha256
    built_at: float    # unix time; used as Last-Modified
    files: tuple       # archive names of the engine files (dist-info excluded)


def source_files(repo_root) -> list:
    """(archive name, path on disk) of every file that goes into the wheel, sorted by archive name."""
    root = Path(repo_root)
    found = []
    engine = root / NAME
    if engine.is_dir():
        for path in sorted((*engine.rglob("*.py"), *engine.rglob("*.js"))):  # the code and its JS programs
            rel = path.relative_to(engine)
            if "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
                continue
            found.append((f"{NAME}/{rel.as_posix()}", path))
    shaders = root / "shaders"
    if shaders.is_dir():
        for path in shaders.rglob("*.wgsl"):
            rel = path.relative_to(shaders)
            if any(p.startswith(".") for p in rel.parts):
                continue
            found.append((f"{NAME}/shaders/{rel.as_posix()}", path))
    return sorted(found)


def fingerprint(files) -> tuple:
    """What a rebuild depends on: each file's name, size and mtime."""
    out = []
    for name, path in files:
        st = os.stat(path)
        out.append((name, st.st_size, st.st_mtime_ns))
    return tuple(out)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"sha256={digest}"


def build_wheel(files) -> bytes:
    """Zip `files` [(archive name, path)] plus METADATA, WHEEL and RECORD into wheel bytes."""
    entries = [(name, Path(path).read_bytes()) for name, path in files]
    entries.append((f"{DIST_INFO}/METADATA", _METADATA.encode()))
    entries.append((f"{DIST_INFO}/WHEEL", _WHEEL.encode()))
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{DIST_INFO}/RECORD,,\n"
    entries.append((f"{DIST_INFO}/RECORD", record.encode()))

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=_FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


class WheelCache:
    """Holds the last build for one repo root and rebuilds it when the sources' fingerprint changes."""

    def __init__(self, repo_root):
        self.repo_root = Path(repo_root)
        self._lock = threading.Lock()
        self._key = None
        self._built = None

    def current(self) -> BuiltWheel:
        with self._lock:
            files = source_files(self.repo_root)
            try:
                key = fingerprint(files)
            except FileNotFoundError:  # a file vanished between the walk and the stat (an editor's save)
                files = source_files(self.repo_root)
                key = fingerprint(files)
            if key != self._key or self._built is None:
                data = build_wheel(files)
                etag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
                self._built = BuiltWheel(data, etag, time.time(), tuple(name for name, _ in files))
                self._key = key
            return self._built
