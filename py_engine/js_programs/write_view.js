// write_view (py_engine/gpu/buffers.py): writeBuffer straight from a Python buffer's bytes in the WASM heap.
(queue, buf, offset, py, start, size) => {
  const pb = py.getBuffer('u8');
  try { queue.writeBuffer(buf, offset, pb.data, start, size); } finally { pb.release(); }
}
