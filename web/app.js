// The page: starts the engine worker, shows boot progress, the WebGPU adapter facts and the kernel check.

import { startChat } from './chat.js';
import { EngineClient } from './engine_client.js';
import { CODE, NO_WEBGPU_MESSAGE, REQUEST } from './protocol.js';

const $ = (id) => document.getElementById(id);

// Readable by tests and from the console: window.diskformer.state.
const state = { phase: 'starting', info: null, selftest: null, error: null };
let client = null;

function el(tag, text, attrs = {}) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = text;
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

function setPhase(phase, text) {
  state.phase = phase;
  document.body.dataset.phase = phase;
  $('status').dataset.phase = phase;
  $('status').textContent = text;
}

function showNotice(kind, title, detail = '') {
  const notice = $('notice');
  notice.dataset.kind = kind;
  notice.replaceChildren(el('strong', title));
  if (detail) notice.append(el('pre', detail));
  notice.hidden = false;
}

function showNoWebGPU(detail) {
  setPhase('no-webgpu', 'no WebGPU');
  // The worker's message repeats the hint; show it once, as the title.
  showNotice(CODE.NO_WEBGPU, NO_WEBGPU_MESSAGE, detail.replace(NO_WEBGPU_MESSAGE, '').trim());
  $('kernel-result').textContent = 'not run: no WebGPU adapter';
}

function showError(err) {
  state.error = { message: err.message, errorType: err.errorType ?? err.name, stack: err.workerStack ?? err.stack };
  setPhase('error', 'error');
  showNotice('error', err.message, err.workerStack || '');
}

// Each step shows how long it took, filled in when the next one starts.
let lastStep = null;

function addStep({ stage, message, elapsedMs }) {
  if (lastStep) lastStep.span.textContent = `${((elapsedMs - lastStep.at) / 1000).toFixed(1)} s`;
  const item = el('li', message, { 'data-stage': stage });
  const span = el('span', '…', { class: 'ms' });
  item.append(span);
  $('boot-steps').append(item);
  lastStep = { span, at: elapsedMs };
}

function finishSteps(message, totalMs) {
  if (lastStep) lastStep.span.textContent = `${((totalMs - lastStep.at) / 1000).toFixed(1)} s`;
  lastStep = null;
  const item = el('li', message, { 'data-stage': 'ready', class: 'done' });
  item.append(el('span', `${(totalMs / 1000).toFixed(1)} s in all`, { class: 'ms' }));
  $('boot-steps').append(item);
}

function formatBytes(n) {
  if (typeof n !== 'number') return String(n);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1 && n % 1024 === 0) { n /= 1024; i += 1; }
  return `${n} ${units[i]}`;
}

const BYTE_LIMITS = new Set(['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize',
  'maxUniformBufferBindingSize']);

function renderFacts({ adapter, features, limits }) {
  const rows = [
    ['vendor', adapter.vendor],
    ['architecture', adapter.architecture],
    ['device', adapter.device],
    ['description', adapter.description],
    ['fallback adapter', adapter.isFallbackAdapter === null ? 'unknown' : adapter.isFallbackAdapter ? 'yes (software)' : 'no'],
    ['subgroup sizes', adapter.subgroupMinSize == null ? 'not reported'
      : `${adapter.subgroupMinSize}–${adapter.subgroupMaxSize}`],
    ['features', features.length ? features.join(', ') : 'none'],
    ...Object.entries(limits).map(([name, v]) => [name, BYTE_LIMITS.has(name) ? formatBytes(v) : String(v)]),
  ];
  const body = $('adapter-facts').tBodies[0];
  body.replaceChildren(...rows.map(([name, value]) => {
    const tr = el('tr', null, { 'data-fact': name });
    tr.append(el('th', name, { scope: 'row' }), el('td', value === '' || value == null ? '—' : String(value)));
    return tr;
  }));
}

function renderKernel(k) {
  const p = $('kernel-result');
  p.dataset.ok = String(k.ok);
  const total = k.partial_sums.reduce((s, v) => s + v, 0);
  if (k.ok) {
    p.textContent = `passed: ${k.n} outputs of y = ${k.a}·x + y and ${k.workgroups} workgroup sums are exact ` +
      `(total ${total}, ${k.ms} ms, ${k.shader})`;
    return;
  }
  const first = k.first_output_mismatch ?? k.first_partial_sum_mismatch;
  p.textContent = `FAILED: ${k.output_mismatches} of ${k.n} outputs and ${k.partial_sum_mismatches} of ` +
    `${k.workgroups} workgroup sums differ; first at index ${first.index}: got ${first.got}, want ${first.want}`;
}

async function start() {
  if (!('gpu' in navigator)) {
    showNoWebGPU('navigator.gpu is missing on this page.');
    return;
  }
  client = new EngineClient('/worker.js');
  client.onFatal = showError;
  try {
    setPhase('booting', 'starting Python…');
    state.info = await client.request(REQUEST.BOOT, {}, addStep);
    finishSteps(`Python ${state.info.pythonVersion} (Pyodide ${state.info.pyodideVersion}), ` +
      `engine ${state.info.engineVersion}`, state.info.bootMs);

    setPhase('selftest', 'testing WebGPU…');
    state.selftest = await client.request(REQUEST.SELFTEST);
    renderFacts(state.selftest);
    renderKernel(state.selftest.kernel);
    if (state.selftest.kernel.ok) {
      setPhase('ready', 'ready');
      window.diskformer.chat = startChat(client, state.selftest); // web/chat.js
    } else {
      const message = 'The WebGPU self-test kernel returned wrong values; this GPU/driver cannot run the engine.';
      state.error = { message, errorType: 'KernelCheckFailed', stack: $('kernel-result').textContent };
      setPhase('error', 'kernel check failed');
      showNotice('error', message, $('kernel-result').textContent);
    }
  } catch (err) {
    if (err.code === CODE.NO_WEBGPU) showNoWebGPU(err.message);
    else showError(err);
  }
}

// Any typed request, from the console or a test; a failure is also shown on the page.
async function request(type, payload = {}) {
  if (!client) throw new Error('the engine worker was not started (no WebGPU on this page)');
  try {
    return await client.request(type, payload);
  } catch (err) {
    showNotice('error', `request "${type}" failed: ${err.message}`, err.workerStack || '');
    throw err;
  }
}

window.diskformer = { state, request };
start();
