// A Load's progress under the model picker: the bar and a line saying what is happening — bytes, rate and time
// left while a model downloads; during the GPU set-up the step with its count (kernels n of N, weights MB of MB) and
// the time it has taken so far, ticking, since that step can take tens of seconds on a software adapter.
//
// Also the per-model memory of which GPU pipelines a Load used (py_engine/app/gpu_setup.py): sent with the next
// Load of the same model, which then compiles them all at once and can count them.

import { formatBytes, formatSeconds } from './format.js';

const $ = (id) => document.getElementById(id);
const SPECS_KEY = 'diskformer.chat.pipelines.v1';

export class LoadProgress {
  #tick = null;
  #last = null;
  #gpuSince = null;

  start() {
    this.#gpuSince = null;
    this.show({ stage: 'start', message: 'starting' });
    clearInterval(this.#tick);
    this.#tick = setInterval(() => this.#last && this.#render(this.#last), 500);
  }

  show(ev) {
    if (ev.stage === 'gpu' && this.#gpuSince === null) this.#gpuSince = performance.now();
    this.#last = ev;
    this.#render(ev);
  }

  stop() {
    clearInterval(this.#tick);
    this.#tick = null;
    $('load-progress').hidden = true;
  }

  #render(ev) {
    $('load-progress').hidden = false;
    const bar = $('load-bar');
    const text = [];
    const hasBytes = Number.isFinite(ev.total) && ev.total > 0 && Number.isFinite(ev.bytes);
    const ofBytes = hasBytes ? `${formatBytes(ev.bytes)} of ${formatBytes(ev.total)}` : '';
    if (ev.stage === 'gpu' && hasBytes) text.push(`${ev.message}: ${ofBytes}`); // "uploading weights: X MB of Y MB"
    else if (ev.message) text.push(ev.message);
    if (hasBytes) {
      bar.value = Math.min(1, ev.bytes / ev.total);
      if (ev.stage !== 'gpu') text.push(ofBytes);
    } else if (Number.isFinite(ev.total_steps) && ev.total_steps > 0) {
      bar.value = Math.min(1, ev.done / ev.total_steps);
    } else {
      bar.removeAttribute('value'); // indeterminate
    }
    if (Number.isFinite(ev.rate)) text.push(`${formatBytes(ev.rate)}/s`);
    if (Number.isFinite(ev.eta) && ev.stage === 'download') text.push(`${formatSeconds(ev.eta)} left`);
    if (ev.stage === 'gpu' && this.#gpuSince !== null) {
      text.push(`${formatSeconds((performance.now() - this.#gpuSince) / 1000)}`);
    }
    $('load-text').textContent = text.join(' · ');
    $('load-progress').dataset.stage = ev.stage ?? '';
    $('load-progress').dataset.step = ev.step ?? '';
  }
}

function readSpecs(storage) {
  try {
    return JSON.parse(storage?.getItem(SPECS_KEY) ?? '{}') ?? {};
  } catch {
    return {};
  }
}

export function rememberedPipelines(model, storage = globalThis.localStorage) {
  const specs = readSpecs(storage)[model];
  return Array.isArray(specs) ? specs : null;
}

export function rememberPipelines(model, specs, storage = globalThis.localStorage) {
  if (!Array.isArray(specs) || !specs.length) return;
  const all = readSpecs(storage);
  all[model] = specs;
  try {
    storage?.setItem(SPECS_KEY, JSON.stringify(all));
  } catch {
    // storage full or disabled: the next Load compiles as it goes
  }
}
