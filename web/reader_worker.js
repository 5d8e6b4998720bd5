// A store reader: a tiny dedicated worker holding a read-only sync access handle on one OPFS file (experts.bin),
// serving {type: 'read', id, offset, n} with the bytes in a transferred buffer (no copy back to the caller).
// Several of these run side by side (py_engine/store/reader_pool.py): 'read-only' handles may coexist.
let handle = null;

async function open({ root, model, file }) {
  const top = await navigator.storage.getDirectory();
  const dir = await (await top.getDirectoryHandle(root)).getDirectoryHandle(model);
  const fileHandle = await dir.getFileHandle(file);
  handle = await fileHandle.createSyncAccessHandle({ mode: 'read-only' });
  return { size: handle.getSize() };
}

self.onmessage = async (event) => {
  const msg = event.data;
  try {
    if (msg.type === 'open') {
      self.postMessage({ id: msg.id, ok: true, ...(await open(msg)) });
    } else if (msg.type === 'read') {
      if (!handle) throw new Error('the reader has no file open');
      const buf = new Uint8Array(msg.n);
      const t0 = performance.now();
      const got = handle.read(buf, { at: msg.offset });
      self.postMessage({ id: msg.id, ok: true, buf, got, ms: performance.now() - t0 }, [buf.buffer]);
    } else if (msg.type === 'close') {
      handle?.close();
      handle = null;
      self.postMessage({ id: msg.id, ok: true });
    } else {
      throw new Error(`unknown reader request ${msg.type}`);
    }
  } catch (err) {
    self.postMessage({ id: msg.id, ok: false, error: `${err?.name ?? 'Error'}: ${err?.message ?? err}` });
  }
};
