// Where everything lives in the CPU expert tier's shared memory, computed once from the store's expert record
// layout (py_engine/store/layout.py ExpertLayout.to_json) and the pool's capacities. Shared by pool.js and
// expert_worker.js so both read the same offsets.

export const GGML_F32 = 0;
export const GGML_Q4_0 = 2;
export const GGML_Q8_0 = 8;
const TYPE_NAMES = { [GGML_F32]: 'F32', [GGML_Q4_0]: 'Q4_0', [GGML_Q8_0]: 'Q8_0' };
// the activation between the gate/up and the down products: silu(gate)·up (Qwen) or gelu(gate)·up (gemma4)
export const ACTIVATIONS = ['swiglu', 'geglu'];
// types whose products take the input quantised to Q8_0 blocks
export const quantisedInput = (t) => t === GGML_Q8_0 || t === GGML_Q4_0;

// Control words (Int32 indices at plan.ctrl).
export const CTRL = {
  GEN: 0,        // bumped by the caller for each request; workers wait on it
  CMD: 1,        // what the request is: CMD_RUN or CMD_EXIT
  N_JOBS: 2,
  N_TOKENS: 3,
  BAR_COUNT: 4,  // workers arrived at the barrier between the gate/up and the down products
  BAR_GEN: 5,
  DONE: 6,       // workers finished with the request
  FAILED: 7,     // 1 when a worker failed: its message, UTF-8, is at plan.errorText
  ERROR_LEN: 8,  // bytes of that message
};
export const ERROR_TEXT_BYTES = 1024;
export const CMD_RUN = 1;
export const CMD_EXIT = 2;
const CTRL_BYTES = 64;
const PAGE = 65536;
const MAX_PAGES = 65536;  // 4 GiB: the most a 32-bit WebAssembly memory addresses

const align = (n, a = 64) => Math.ceil(n / a) * a;

function partType(layout, part) {
  const t = Number(layout.types[part]);
  if (!(t in TYPE_NAMES)) {
    throw new Error(`the CPU expert tier computes F32, Q8_0 and Q4_0 experts; this model's ${part} experts are ggml type ${t}`);
  }
  return t;
}

// layout: {types, dims, planes, record_size} of the store's manifest; caps: {workers, slots, tokens, jobs,
// activation ('swiglu' by default, or 'geglu')}.
export function planMemory(layout, caps) {
  const activation = caps.activation ?? 'swiglu';
  if (!ACTIVATIONS.includes(activation)) {
    throw new Error(`the CPU expert tier computes ${ACTIVATIONS.join(' and ')} experts, not ${activation}`);
  }
  const nEmbd = Number(layout.dims.gate[0]);
  const nFf = Number(layout.dims.gate[1]);
  const types = { gate: partType(layout, 'gate'), up: partType(layout, 'up'), down: partType(layout, 'down') };
  if (nEmbd % 32 || nFf % 32) {
    throw new Error(`expert dimensions ${nEmbd} x ${nFf} are not multiples of 32 (one Q8_0 block)`);
  }
  const planes = {};
  for (const [name, [off, n]] of Object.entries(layout.planes)) planes[name] = { off: Number(off), n: Number(n) };
  const { workers, slots, tokens, jobs } = caps;
  let at = 0;
  const take = (n) => { const off = at; at = align(at + n); return off; };
  const plan = { nEmbd, nFf, types, activation, planes, recordSize: Number(layout.record_size), workers, slots, tokens, jobs };
  plan.ctrl = take(CTRL_BYTES);
  plan.errorText = take(ERROR_TEXT_BYTES);
  plan.jobSlot = take(4 * jobs);
  plan.jobToken = take(4 * jobs);
  plan.jobWeight = take(4 * jobs);
  plan.x = take(4 * tokens * nEmbd);
  plan.gate = take(4 * jobs * nFf);
  plan.up = take(4 * jobs * nFf);
  plan.act = take(4 * jobs * nFf);
  plan.y = take(4 * jobs * nEmbd);
  plan.out = take(4 * tokens * nEmbd);
  // each worker quantises the inputs it reads into its own scratch (cheap, and no barrier before the products)
  plan.scratch = [];
  for (let w = 0; w < workers; w++) {
    plan.scratch.push({
      xq: take(2 * tokens * nEmbd), xs: take(4 * tokens * (nEmbd / 32)),
      aq: take(2 * jobs * nFf), as: take(4 * jobs * (nFf / 32)),
    });
  }
  at = align(at, 256);
  plan.records = take(slots * plan.recordSize);
  plan.bytes = at + 64;  // slack: rows_q8 may read a few bytes past a row's last scale (expert_ffn.wat)
  plan.pages = Math.ceil(plan.bytes / PAGE);
  if (plan.pages > MAX_PAGES) {
    throw new Error(`${slots} records of ${plan.recordSize} bytes need ${(plan.bytes / 2 ** 30).toFixed(1)} GiB: more ` +
                    'than the 4 GiB a WebAssembly memory can hold; give the CPU expert tier fewer record slots');
  }
  return plan;
}
