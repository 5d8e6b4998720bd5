// argmax_final.wgsl's step after the argmax where queued greedy steps advance on the GPU: a token launched with
// step.pad = 1 leaves the next token's parameters (its argmax at the next position) in the step buffer, so the host
// queues the next step without a writeBuffer or a copy of the id (each a command of its own between two tokens).
@group(0) @binding(3) var<storage, read_write> step_words: array<u32, 4>;

fn after_argmax(id: u32) {
  if (step_words[3] == 1u) {
    let pos = step_words[1];
    step_words[0] = id;
    step_words[1] = pos + 1u;
    step_words[2] = pos + 2u;
  }
}
