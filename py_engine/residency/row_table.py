"""A table of fixed-size rows on disk (one data file + a JSON manifest), read a batch of rows at a time.

Files in a store folder (any sink of py_engine.store: OPFS in the browser, a directory or memory elsewhere):

    <name>.rows    row r at byte r * row_bytes, nothing else
    <name>.json    {"format", "name", "rows", "row_bytes", "dtype", "columns", "crc32", "fingerprint"}

`dtype` names the element type (f32, u32, i32, f16 packed in pairs...), `columns` the elements per row; the cache
never interprets them, kernels do. Rows are whole 32-bit words because the gather kernel copies u32 words.

Fingerprint: sha256 over the canonical manifest fields and the crc32 of the data. A cache (or anything derived from
a table, such as GPU rows) keyed by the fingerprint is stale as soon as the data or its shape changes. `open()`
checks the data file's size always and its crc32 when `verify` is set (a full read: cheap for small tables; large
ones may skip it and rely on the size + an expected fingerprint).
"""
import hashlib
import json
import zlib

FORMAT = 1
DTYPE_BYTES = {"f32": 4, "u32": 4, "i32": 4, "f16": 2, "bf16": 2, "u8": 1, "i8": 1}
READ_CHUNK = 8 << 20  # crc pass and merged runs are read in pieces of at most this many bytes
MERGE_GAP_ROWS = 4  # rows between two wanted rows read (and dropped) rather than issuing a second read


class RowTableError(RuntimeError):
    """A row table is missing, malformed or changed on disk."""


class RowTableChanged(RowTableError):
    """The data or manifest no longer matches what was recorded (or what the caller expected)."""


def _manifest_core(name, rows, row_bytes, dtype, columns, crc):
    return {"format": FORMAT, "name": name, "rows": rows, "row_bytes": row_bytes, "dtype": dtype,
            "columns": columns, "crc32": crc}


def fingerprint_of(core: dict) -> str:
    canon = json.dumps(core, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canon).hexdigest()


def _check_shape(name, rows, row_bytes, dtype, columns):
    if not name or "/" in name:
        raise ValueError(f"bad row table name {name!r}")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(sorted(DTYPE_BYTES))})")
    if not isinstance(rows, int) or rows <= 0:
        raise ValueError(f"a row table needs at least one row, got {rows!r}")
    if not isinstance(row_bytes, int) or row_bytes <= 0 or row_bytes % 4:
        raise ValueError(f"row_bytes must be a positive multiple of 4 (the gather copies u32 words), got {row_bytes!r}")
    if columns * DTYPE_BYTES[dtype] != row_bytes:
        raise ValueError(f"{columns} x {dtype} is {columns * DTYPE_BYTES[dtype]} B, not the row's {row_bytes} B")


async def write_row_table(sink, name: str, data, row_bytes: int, dtype: str = "u32") -> dict:
    """Store `data` (rows * row_bytes bytes) as table `name` in `sink`; returns the manifest."""
    mv = memoryview(data).cast("B")
    if not isinstance(row_bytes, int) or row_bytes <= 0 or len(mv) % row_bytes:
        raise ValueError(f"{len(mv)} B of data is not a whole number of {row_bytes} B rows")
    rows = len(mv) // row_bytes
    columns = row_bytes // DTYPE_BYTES.get(dtype, 1)
    _check_shape(name, rows, row_bytes, dtype, columns)
    crc = 0
    for start in range(0, len(mv), READ_CHUNK):
        piece = mv[start:start + READ_CHUNK]
        await sink.write(name + ".rows", start, piece)
        crc = zlib.crc32(piece, crc)
    await sink.flush()
    core = _manifest_core(name, rows, row_bytes, dtype, columns, crc)
    manifest = dict(core, fingerprint=fingerprint_of(core))
    await sink.put(name + ".json", json.dumps(manifest, indent=1).encode())
    return manifest


class RowTable:
    """An opened table: shape, fingerprint and batched row reads through the sink."""

    def __init__(self, sink, manifest: dict):
        self.sink = sink
        self.manifest = manifest
        self.name = manifest["name"]
        self.rows = manifest["rows"]
        self.row_bytes = manifest["row_bytes"]
        self.dtype = manifest["dtype"]
        self.columns = manifest["columns"]
        self.fingerprint = manifest["fingerprint"]
        self.data_file = self.name + ".rows"
        self.reads = 0  # sink reads issued (a batch of neighbouring rows is one read)
        self.bytes_read = 0

    @classmethod
    async def open(cls, sink, name: str, verify: bool = True, expected_fingerprint: str = None) -> "RowTable":
        raw = await sink.get(name + ".json")
        if raw is None:
            raise RowTableError(f"row table {name!r} has no manifest ({name}.json) in this folder")
        try:
            manifest = json.loads(raw)
            core = {k: manifest[k] for k in ("format", "name", "rows", "row_bytes", "dtype", "columns", "crc32")}
        except (ValueError, KeyError, TypeError) as e:
            raise RowTableError(f"row table {name!r}: unreadable manifest ({e})") from None
        if core["format"] != FORMAT:
            raise RowTableError(f"row table {name!r} has format {core['format']}, this engine reads {FORMAT}")
        if core["name"] != name:
            raise RowTableError(f"manifest {name}.json describes table {core['name']!r}")
        _check_shape(name, core["rows"], core["row_bytes"], core["dtype"], core["columns"])
        if fingerprint_of(core) != manifest.get("fingerprint"):
            raise RowTableChanged(f"row table {name!r}: the manifest was edited (its fingerprint does not match)")
        if expected_fingerprint is not None and manifest["fingerprint"] != expected_fingerprint:
            raise RowTableChanged(f"row table {name!r} is not the expected one: fingerprint "
                                  f"{manifest['fingerprint'][:16]} instead of {expected_fingerprint[:16]}")
        table = cls(sink, manifest)
        size = (await sink.files()).get(table.data_file)
        want = table.rows * table.row_bytes
        if size != want:
            raise RowTableChanged(f"row table {name!r}: {table.data_file} holds {size} B, the manifest says "
                                  f"{table.rows} rows x {table.row_bytes} B = {want} B")
        if verify:
            crc = await table.data_crc32()
            if crc != core["crc32"]:
                raise RowTableChanged(f"row table {name!r}: {table.data_file} changed on disk (crc32 {crc:08x}, "
                                      f"manifest {core['crc32']:08x})")
        return table

    async def data_crc32(self) -> int:
        crc, total = 0, self.rows * self.row_bytes
        for start in range(0, total, READ_CHUNK):
            crc = zlib.crc32(await self.sink.read(self.data_file, start, min(READ_CHUNK, total - start)), crc)
        return crc

    def runs(self, ids):
        """Distinct ids grouped into ascending runs [first, last] read as one range each (gaps <= MERGE_GAP_ROWS
        rows are read and dropped; a run never exceeds READ_CHUNK bytes)."""
        per_run = max(1, READ_CHUNK // self.row_bytes)
        out = []
        for r in sorted(set(ids)):
            if not 0 <= r < self.rows:
                raise IndexError(f"row {r} outside table {self.name!r} of {self.rows} rows")
            if out and r - out[-1][1] <= MERGE_GAP_ROWS + 1 and r - out[-1][0] < per_run:
                out[-1][1] = r
            else:
                out.append([r, r])
        return out

    async def read_rows(self, ids) -> dict:
        """{row id: bytes} for the distinct ids, read in merged runs."""
        out = {}
        wanted = sorted(set(ids))
        i = 0
        for first, last in self.runs(wanted):
            n = (last - first + 1) * self.row_bytes
            data = await self.sink.read(self.data_file, first * self.row_bytes, n)
            if len(data) != n:
                raise RowTableChanged(f"row table {self.name!r}: read {len(data)} of {n} B at row {first}")
            self.reads += 1
            self.bytes_read += n
            mv = memoryview(data)
            while i < len(wanted) and wanted[i] <= last:
                off = (wanted[i] - first) * self.row_bytes
                out[wanted[i]] = bytes(mv[off:off + self.row_bytes])
                i += 1
        return out
