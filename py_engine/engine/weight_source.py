"""Where weight bytes come from: anything with `read(offset, nbytes) -> bytes` over the GGUF file's byte space.

In Node (and CPython) the engine reads straight from the GGUF file; in the browser the same interface sits over
the OPFS store.
"""
import os


class FileWeightSource:
    """A local GGUF file, read by absolute byte offsets."""

    def __init__(self, path):
        self.path = str(path)
        self._f = open(self.path, "rb")
        self.size = os.fstat(self._f.fileno()).st_size
        self.bytes_read = 0

    def read(self, offset: int, nbytes: int) -> bytes:
        if offset < 0 or offset + nbytes > self.size:
            raise ValueError(f"{self.path}: read of {nbytes} B at {offset} is outside the file ({self.size} B)")
        self._f.seek(offset)
        data = self._f.read(nbytes)
        if len(data) != nbytes:
            raise OSError(f"{self.path}: short read at {offset} ({len(data)} of {nbytes} B)")
        self.bytes_read += nbytes
        return data

    def close(self):
        self._f.close()
