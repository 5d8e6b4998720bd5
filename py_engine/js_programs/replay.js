// The replay helper of recorded dispatch lists (py_engine/gpu/commands.py): one call per submit replays a list
// of operations into a command encoder. Evaluated once by load_program (py_engine/gpu/jsutil.py); the value of
// the file is the helper object.
({
  // ops: [0, pipeline, bindGroup, x, y, z] dispatch | [1, src, srcOffset, dst, dstOffset, size] copy
  // ts: null, or {querySet, begin, end} (a benchmark's per-step GPU times): query `begin` takes the start of the
  // range's first compute pass, `end` the end of its last
  record(enc, ops, from = 0, to = ops.length, ts = null) {
    let pass = null, pipeline = null, first = -1, last = -1;
    if (ts !== null) {
      for (let i = from; i < to && first < 0; i++) if (ops[i][0] === 0) first = i;
      for (let i = to - 1; i >= from && last < 0; i--) if (ops[i][0] === 0) last = i;
    }
    for (let i = from; i < to; i++) {
      const op = ops[i];
      if (op[0] === 0) {
        if (pass === null) {
          pass = enc.beginComputePass(ts === null ? undefined : { timestampWrites: this.passStamps(ops, i, to, first, last, ts) });
          pipeline = null;
        }
        // consecutive dispatches of one pipeline (a matrix's row bands, the pool buffers) set it once
        if (op[1] !== pipeline) { pass.setPipeline(op[1]); pipeline = op[1]; }
        pass.setBindGroup(0, op[2]); pass.dispatchWorkgroups(op[3], op[4], op[5]);
      } else {
        if (pass !== null) { pass.end(); pass = null; }
        enc.copyBufferToBuffer(op[1], op[2], op[3], op[4], op[5]);
      }
    }
    if (pass !== null) pass.end();
  },
  // Ops per submit (0: one submit). Encoding a long list costs CPU time (a few µs per WebGPU call) during which a
  // single submit leaves the GPU idle; submitting every `splitEvery` ops lets the GPU run the first part while
  // the rest is encoded. leadOps (0: splitEvery) sizes the first piece of a list that is cut at all: the GPU idles
  // until it is submitted, and a prompt chunk's first few dispatches already take longer than encoding the next
  // piece. Both set per device by Python (set_submit_split).
  splitEvery: 0,
  leadOps: 0,
  // Record ops in pieces of `split` ops (split 0: one piece), the first of `lead` where the list is cut at all,
  // submitting every piece but the last; returns the last piece's encoder. first(enc), when given, records commands
  // ahead of the ops in the first piece. ts: null, or {querySet, base}: piece p's first pass starts at query
  // base + 2p, its last ends at base + 2p + 1.
  recordSplit(device, ops, first = null, ts = null, split = this.splitEvery, lead = this.leadOps) {
    const n = ops.length, every = split > 0 ? split : n;
    let start = 0, piece = 0, size = lead > 0 && n > every ? Math.min(lead, every) : every;
    const stamps = () => ts === null ? null
      : { querySet: ts.querySet, begin: ts.base + 2 * piece, end: ts.base + 2 * piece + 1 };
    while (n - start > size) {
      const enc = device.createCommandEncoder();
      if (start === 0 && first !== null) first(enc);
      this.record(enc, ops, start, start + size, stamps());
      device.queue.submit([enc.finish()]);
      start += size;
      piece++;
      size = every;
    }
    const enc = device.createCommandEncoder();
    if (start === 0 && first !== null) first(enc);
    this.record(enc, ops, start, n, stamps());
    return enc;
  },
  // The timestampWrites of the pass opened at ops[i] (running to the next copy or `to`): ts.begin if it opens at the
  // range's first dispatch, ts.end if it holds the range's last.
  passStamps(ops, i, to, first, last, ts) {
    let j = i;
    while (j < to && ops[j][0] === 0) j++;
    const w = { querySet: ts.querySet };
    if (i === first) w.beginningOfPassWriteIndex = ts.begin;
    if (last >= i && last < j) w.endOfPassWriteIndex = ts.end;
    return w;
  },
  replay(device, ops) {
    device.queue.submit([this.recordSplit(device, ops).finish()]);
  },
  // One token: write the step uniform, replay, copy `nbytes` of `out` into `staging` and map it; resolves to
  // the bytes (or null without `out`, once the GPU is done). tokenFrom: a buffer whose first word replaces the
  // step's token on the GPU before the token's ops run (the previous step's argmax: greedy steps can then be
  // queued before the previous one is read back). ts: null, or {querySet, base} (recordSplit: 2 queries a piece).
  // whole: one submit, not pieces of splitEvery ops. stepWords null: the step buffer already holds this token's
  // parameters (the step before wrote them on the GPU: argmax_step_next.wgsl). stepTimes: null, or an array a
  // benchmark set, to which each step adds its ms in the encode (up to the finished command buffer) and in the submit
  // and map request. repeat: the ops recorded that many times in the one submit (a benchmark's runs of greedy tokens,
  // each token's argmax writing the next one's parameters; with whole), each followed by its copy of `out` to
  // staging at nbytes · j; resolves to the nbytes · repeat bytes.
  stepTimes: null,
  async step(device, stepBuf, stepWords, ops, out, outOffset, staging, nbytes, tokenFrom = null, ts = null,
             whole = false, repeat = 1) {
    const t0 = performance.now();
    if (stepWords !== null) device.queue.writeBuffer(stepBuf, 0, new Uint32Array(stepWords));
    const first = tokenFrom === null ? null : (e) => e.copyBufferToBuffer(tokenFrom, 0, stepBuf, 0, 4);
    const enc = this.recordSplit(device, ops, first, ts, whole ? 0 : this.splitEvery);
    if (out === null) {
      device.queue.submit([enc.finish()]);
      await device.queue.onSubmittedWorkDone();
      return null;
    }
    enc.copyBufferToBuffer(out, outOffset, staging, 0, nbytes);
    for (let j = 1; j < repeat; j++) {
      this.record(enc, ops);
      enc.copyBufferToBuffer(out, outOffset, staging, nbytes * j, nbytes);
    }
    const commands = enc.finish(), t1 = performance.now();
    device.queue.submit([commands]);
    const mapped = staging.mapAsync(GPUMapMode.READ);
    if (this.stepTimes) this.stepTimes.push(t1 - t0, performance.now() - t1);
    await mapped;
    const bytes = new Uint8Array(staging.getMappedRange(0, nbytes * repeat)).slice();
    staging.unmap();
    return bytes;
  },
  // Many tokens without reading anything back (prompt prefill): writeBuffer and submit are ordered on the
  // queue, so each replay sees its own step words. Nothing is awaited.
  feed(device, stepBuf, tokens, pos0, ops) {
    for (let i = 0; i < tokens.length; i++) {
      const p = pos0 + i;
      device.queue.writeBuffer(stepBuf, 0, new Uint32Array([tokens[i], p, p + 1, 0]));
      this.replay(device, ops);
    }
  },
  trackErrors(device, sink) {
    device.onuncapturederror = (e) => { if (sink.length < 20) sink.push(String(e.error.message)); };
  },
})
