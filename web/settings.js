// The chat page's settings, kept in localStorage so a reload keeps them: the model choice, the GPU budget, the
// context size and KV cache format, the load path, thinking on/off, the reply length and the sampling parameters.
// Stored values are checked on the way in: a damaged or outdated entry falls back to the default, field by field.

const KEY = 'diskformer.chat.settings.v1';
const MIB = 1024 * 1024;

export const DEFAULTS = Object.freeze({
  model: '', // 'served:<name>' | 'url' | 'file' ('file' cannot survive a reload: the File is gone)
  url: '',
  budgetMiB: null, // null: derived from the adapter's limits (defaultBudgetMiB)
  nCtx: 4096,
  kv: 'f16',
  loadPath: 'store', // 'store': into this browser's model store (OPFS), experts paged from it; 'direct': into memory
  cpuWorkers: 0, // the store path's CPU expert tier: workers computing missed experts on the CPU; 0 = off
  thinking: true,
  maxTokens: 512,
  // Qwen3's recommended sampling for thinking mode; temperature 0 = greedy
  temperature: 0.6,
  topK: 20,
  topP: 0.95,
  minP: 0,
  seed: null, // null: a fresh seed per reply
});

const CHECKS = {
  model: (v) => typeof v === 'string',
  url: (v) => typeof v === 'string',
  budgetMiB: (v) => v === null || (Number.isFinite(v) && v >= 1),
  nCtx: (v) => Number.isInteger(v) && v >= 16 && v <= 1 << 20,
  kv: (v) => v === 'f16' || v === 'f32',
  loadPath: (v) => v === 'store' || v === 'direct',
  cpuWorkers: (v) => Number.isInteger(v) && v >= 0 && v <= 64,
  thinking: (v) => typeof v === 'boolean',
  maxTokens: (v) => Number.isInteger(v) && v >= 1 && v <= 1 << 20,
  temperature: (v) => Number.isFinite(v) && v >= 0 && v <= 5,
  topK: (v) => Number.isInteger(v) && v >= 0,
  topP: (v) => Number.isFinite(v) && v > 0 && v <= 1,
  minP: (v) => Number.isFinite(v) && v >= 0 && v <= 1,
  seed: (v) => v === null || (Number.isSafeInteger(v) && v >= 0),
};

// The adapter does not say how much memory it has; its largest buffer is a fair scale for what it can hold.
// Twice that, between 256 MiB and 8 GiB.
export function defaultBudgetMiB(limits) {
  const maxBuffer = Number(limits?.maxBufferSize) || 256 * MIB;
  return Math.round(Math.min(8192, Math.max(256, (2 * maxBuffer) / MIB)));
}

export function validSetting(name, value) {
  return Object.hasOwn(CHECKS, name) && CHECKS[name](value);
}

export function loadSettings(storage = globalThis.localStorage) {
  let stored = {};
  try {
    stored = JSON.parse(storage?.getItem(KEY) ?? '{}') ?? {};
  } catch {
    stored = {};
  }
  const out = { ...DEFAULTS };
  for (const name of Object.keys(DEFAULTS)) {
    if (Object.hasOwn(stored, name) && validSetting(name, stored[name])) out[name] = stored[name];
  }
  return out;
}

// A first visit is one with nothing stored at all: a stored entry, even one whose model is still '' (the demo only
// preselected), holds what the user chose and must not be overwritten by the demo's defaults.
export function isFirstVisit(storage = globalThis.localStorage) {
  try {
    return storage?.getItem(KEY) == null;
  } catch {
    return false; // storage disabled: nothing persists either way, keep the defaults as they are
  }
}

export function saveSettings(settings, storage = globalThis.localStorage) {
  const clean = {};
  for (const name of Object.keys(DEFAULTS)) {
    if (validSetting(name, settings[name])) clean[name] = settings[name];
  }
  try {
    storage?.setItem(KEY, JSON.stringify(clean));
  } catch {
    // storage full or disabled (a private window): the settings just do not persist
  }
  return clean;
}

// What the engine's `generate` request takes as `sampling` (py_engine/app/session.py sampling_params).
export function samplingFrom(s) {
  const out = { temperature: s.temperature, top_k: s.topK, top_p: s.topP, min_p: s.minP };
  if (s.seed !== null) out.seed = s.seed;
  return out;
}

export function loadOptionsFrom(s, fallbackBudgetMiB) {
  return { budget_bytes: Math.round((s.budgetMiB ?? fallbackBudgetMiB) * MIB), n_ctx: s.nCtx, kv: s.kv, path: s.loadPath,
    cpu_tier: s.cpuWorkers };
}
