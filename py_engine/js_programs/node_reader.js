// Expert records read in parallel through Node's fs.promises (py_engine/store/node_reader.py): every record of a
// batch at once on libuv's thread pool, each into a Uint8Array, one promise for the batch.
({
  async open(path) {
    const fs = process.getBuiltinModule('fs');
    return await fs.promises.open(path, 'r');
  },
  readMany(fh, offsets, size) {
    return Promise.all(Array.from(offsets, async (off) => {
      const buf = new Uint8Array(size);
      let got = 0;
      while (got < size) {
        const { bytesRead } = await fh.read(buf, got, size - got, off + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      if (got !== size) throw new Error(`short read: ${got} of ${size} bytes at offset ${off}`);
      return buf;
    }));
  },
})
