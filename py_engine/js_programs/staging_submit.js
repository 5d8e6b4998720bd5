// The staging ring's batch (py_engine/gpu/staging_ring.py): fill, unmap and copy every queued upload in one
// command buffer and one submit, then remap the staging buffers.
// items: [staging buffer, JS Uint8Array or undefined (filled already), dst, offset, bytes (rounded to 4), bytes]
((device, items) => {
  const enc = device.createCommandEncoder();
  for (const [buf, data, dst, offset, n4, n] of items) {
    if (data != null) new Uint8Array(buf.getMappedRange(0, n4), 0, n).set(data);
    buf.unmap();
    enc.copyBufferToBuffer(buf, 0, dst, offset, n4);
  }
  device.queue.submit([enc.finish()]);
  return items.map(([buf]) => buf.mapAsync(GPUMapMode.WRITE));
})
