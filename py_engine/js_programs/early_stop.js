// The early-stop token runner (py_engine/engine/early_stop.py): replays a token's list, where dispatches after
// the first residency check are indirect, and reads back its status, routed ids and result in one map.
({
  // ops: [0, pipeline, bindGroup, x, y, z] | [2, pipeline, bindGroup, argsBuffer, argsOffset] | [1, copy...]
  record(enc, ops) {
    let pass = null;
    for (const op of ops) {
      if (op[0] === 1) {
        if (pass !== null) { pass.end(); pass = null; }
        enc.copyBufferToBuffer(op[1], op[2], op[3], op[4], op[5]);
        continue;
      }
      if (pass === null) pass = enc.beginComputePass();
      pass.setPipeline(op[1]); pass.setBindGroup(0, op[2]);
      if (op[0] === 0) pass.dispatchWorkgroups(op[3], op[4], op[5]);
      else pass.dispatchWorkgroupsIndirect(op[3], op[4]);
    }
    if (pass !== null) pass.end();
  },
  // Write the step words, run `ops`, copy each [src, srcOffset, dstOffset, size] into `staging`; with
  // nbytes > 0 map it and resolve to its first nbytes, else resolve to null without waiting.
  async run(device, stepBuf, stepWords, ops, copies, staging, nbytes) {
    device.queue.writeBuffer(stepBuf, 0, new Uint32Array(stepWords));
    const enc = device.createCommandEncoder();
    this.record(enc, ops);
    for (const c of copies) enc.copyBufferToBuffer(c[0], c[1], staging, c[2], c[3]);
    device.queue.submit([enc.finish()]);
    if (nbytes === 0) return null;
    await staging.mapAsync(GPUMapMode.READ, 0, nbytes);
    const bytes = new Uint8Array(staging.getMappedRange(0, nbytes)).slice();
    staging.unmap();
    return bytes;
  },
})
