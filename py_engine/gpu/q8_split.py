"""Split Q8_0 block streams into the kernels' two planes on the GPU (shaders/q8_split.wgsl).

Splitting in Python (py_engine.gguf.split_q8_0) costs ~2 s per GB under Pyodide and then a second upload pass;
here the raw blocks are copied once into a scratch buffer and a tiny kernel writes the code plane and the f16
scale plane straight into their destination buffers, with exactly the bytes split_q8_0 produces.

One scratch buffer is reused for every piece: the queue orders each `writeBuffer` before the dispatch submitted
after it and after the dispatches submitted before it, so overwriting the scratch for the next piece is safe
without waiting. A piece is an even number of blocks (a piece then starts on a scale-word boundary), at most the
scratch's size; a band larger than that goes in several pieces.
"""
import js

from .buffers import COPY_DST, STORAGE, UNIFORM, create_buffer, write_view
from .commands import split_groups
from .jsutil import js_bytes
from .pipelines import Pipelines

Q8_BLOCK = 34
PAIR_BYTES = 2 * Q8_BLOCK  # 17 u32 words: the unit the kernel reads aligned
CODE_WORDS = 8  # per block
PAIRS_PER_GROUP = 64  # the shader's workgroup size: one thread per pair of blocks
DEFAULT_SCRATCH = 64 << 20


class Q8Splitter:
    """`split(read, n_blocks, codes, scales)` writes n_blocks blocks' planes into `codes` / `scales`."""

    def __init__(self, gpu, pipelines: Pipelines | None = None, scratch_bytes: int = DEFAULT_SCRATCH):
        self.gpu = gpu
        self.pipes = pipelines or Pipelines(gpu)
        cap = min(scratch_bytes, gpu.max_binding, int(gpu.limits["maxBufferSize"]))
        self.piece_blocks = (cap // PAIR_BYTES) * 2
        if self.piece_blocks < 2:
            raise ValueError(f"Q8_0 split scratch of {cap} B cannot hold one pair of blocks ({PAIR_BYTES} B)")
        self.max_groups = int(gpu.limits.get("maxComputeWorkgroupsPerDimension", 65535))
        self._scratch = None
        self._scratch_bytes = 0
        self._params = None
        self.pieces = 0  # dispatches made, for tests and stats

    def _scratch_for(self, nbytes: int):
        """The scratch buffer, grown to `nbytes` (at most the cap) when smaller; the old one is destroyed (the
        queue keeps it alive for work already submitted)."""
        if self._scratch is None or self._scratch_bytes < nbytes:
            if self._scratch is not None:
                self._scratch.destroy()
            self._scratch_bytes = nbytes
            self._scratch = create_buffer(self.gpu, nbytes, STORAGE | COPY_DST, "q8_split.raw")
        if self._params is None:
            self._params = create_buffer(self.gpu, 16, UNIFORM | COPY_DST, "q8_split.params")
        return self._scratch

    def split(self, read, n_blocks: int, codes, scales, label: str = "", dst_block: int = 0) -> None:
        """Split n_blocks Q8_0 blocks into codes (32 B per block) and scales (2 B per block), from block
        `dst_block` of the planes (even: scales are written a word, two blocks, at a time). `read(block0, n)`
        returns the raw bytes of blocks block0 .. block0 + n (n * 34 bytes)."""
        if dst_block % 2:
            raise ValueError(f"{label}: Q8_0 planes can only be written from an even block, not {dst_block}")
        if n_blocks <= 0:
            return
        largest = min(n_blocks + (n_blocks & 1), self.piece_blocks)
        scratch = self._scratch_for(largest * Q8_BLOCK)
        pipe = self.pipes.get("q8_split.wgsl")
        layout = self.pipes.params_layout("q8_split.wgsl")
        bind = self.pipes.bind_group(pipe, {0: self._params, 1: scratch, 2: codes, 3: scales}, "q8_split " + label)
        for b0 in range(0, n_blocks, self.piece_blocks):
            n = min(self.piece_blocks, n_blocks - b0)
            raw = read(b0, n)
            if len(raw) != n * Q8_BLOCK:
                raise ValueError(f"{label}: read {len(raw)} B for {n} Q8_0 blocks, expected {n * Q8_BLOCK}")
            self._upload_raw(scratch, raw)
            groups = ((n + 1) // 2 + PAIRS_PER_GROUP - 1) // PAIRS_PER_GROUP
            gx, gy = split_groups(groups, self.max_groups)
            self.gpu.queue.writeBuffer(self._params, 0, js_bytes(layout.pack({
                "n_blocks": n, "code_word_base": (dst_block + b0) * CODE_WORDS,
                "scale_word_base": (dst_block + b0) // 2, "nx": gx})))
            enc = self.gpu.device.createCommandEncoder()
            pas = enc.beginComputePass()
            pas.setPipeline(pipe)
            pas.setBindGroup(0, bind)
            pas.dispatchWorkgroups(gx, gy, 1)
            pas.end()
            self.gpu.queue.submit(js.Array.of(enc.finish()))
            self.pieces += 1

    def _upload_raw(self, scratch, raw) -> None:
        """raw into the scratch from byte 0: the 4-byte-aligned part without a copy, then the tail (2 bytes for an
        odd block count) zero-padded to a word."""
        n = len(raw)
        whole = n & ~3
        write_view(self.gpu, scratch, 0, raw, 0, whole)
        if whole < n:
            self.gpu.queue.writeBuffer(scratch, whole, js_bytes(bytes(raw[whole:]) + b"\0" * (4 - (n - whole))))

    def release(self) -> None:
        """Free the scratch (the queue keeps it until submitted work is done); a later split makes a new one."""
        for b in (self._scratch, self._params):
            if b is not None:
                b.destroy()
        self._scratch = self._params = None
        self._scratch_bytes = 0
