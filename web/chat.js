// The chat: model picker and Load (with a progress bar), streamed replies, Stop, multi-turn, New chat, Copy, the
// stats meter, settings. Every bit of work runs in the engine worker (py_engine/app through EngineClient); this file
// only moves messages and DOM nodes. Model text is shown through markdown.js (escaped, then a small subset rendered)
// or textContent — never raw innerHTML.
//
// Readable by tests and from the console: window.diskformer.chat.state.

import { renderMarkdown } from './markdown.js';
import { PINNED_MODELS } from './pinned_models.js';
import { defaultBudgetMiB, loadOptionsFrom, loadSettings, samplingFrom, saveSettings } from './settings.js';

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

export function formatBytes(n) {
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i += 1; }
  return i === 0 ? `${n} B` : `${n.toFixed(n < 10 ? 2 : 1)} ${units[i]}`;
}

function formatSeconds(s) {
  if (!Number.isFinite(s)) return '—';
  if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
  if (s < 90) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

const STOP_LABELS = {
  stop: null,
  length: 'reply length limit reached',
  abort: 'stopped',
  context_full: 'context full',
};

export class Chat {
  constructor(client, selftest) {
    this.client = client;
    this.limits = selftest?.limits ?? {};
    this.fallbackBudgetMiB = defaultBudgetMiB(this.limits);
    this.settings = loadSettings();
    // nothing chosen yet (a first visit): the built-in demo model is preselected, with the settings it was made for
    this.firstVisit = this.settings.model === '';
    this.quotaWarned = null; // the source a storage warning was shown for: a second Load goes ahead
    this.file = null; // the picked or dropped File
    this.state = {
      phase: 'idle', // idle | loading | ready | generating
      loaded: null, // the load request's answer
      models: null, // the models request's answer
      conversation: [], // [{role, content, reasoning_content?}] as sent to generate
      lastResult: null,
      lastDeltas: 0,
      loadEvents: [],
      error: null,
    };
    this.#bind();
    this.#showSettings();
    this.#setPhase('idle');
    this.refreshModels();
  }

  // --- state and errors -----------------------------------------------------------------------------------------
  #setPhase(phase) {
    this.state.phase = phase;
    $('chat-panel').dataset.state = phase;
    const busy = phase === 'loading' || phase === 'generating';
    $('load-btn').disabled = busy || !this.#sourceReady();
    $('model-select').disabled = busy;
    $('prompt').disabled = phase !== 'ready' && phase !== 'generating';
    $('send-btn').disabled = phase !== 'ready';
    $('send-btn').hidden = phase === 'generating';
    $('stop-btn').hidden = phase !== 'generating';
    $('new-chat').disabled = busy;
  }

  showError(err, where = '') {
    const message = err?.message ?? String(err);
    this.state.error = { message, errorType: err?.errorType ?? err?.name ?? 'Error', where };
    const box = $('chat-error');
    box.replaceChildren(el('strong', {}, where ? `${where}: ` : ''), document.createTextNode(message));
    if (err?.workerStack) {
      const d = el('details');
      d.append(el('summary', {}, 'details'), el('pre', {}, err.workerStack));
      box.append(d);
    }
    box.hidden = false;
  }

  clearError() {
    this.state.error = null;
    delete $('chat-error').dataset.kind;
    $('chat-error').hidden = true;
    $('chat-error').replaceChildren();
  }

  // --- models ---------------------------------------------------------------------------------------------------
  async refreshModels() {
    try {
      this.state.models = await this.client.request('models');
    } catch (err) {
      this.state.models = { served: [], stored: [], loaded: null };
      this.showError(err, 'listing models');
    }
    this.#fillModelSelect();
    this.#fillStored();
  }

  #fillModelSelect() {
    const select = $('model-select');
    const served = this.state.models?.served ?? [];
    const options = [];
    if (served.length) {
      const group = el('optgroup', { label: 'Served by this host' });
      for (const m of served) {
        const label = m.builtin ? `${m.name} (built-in demo, ${formatBytes(m.size)})` : `${m.name} (${formatBytes(m.size)})`;
        group.append(el('option', { value: `served:${m.name}` }, label));
      }
      options.push(group);
    }
    if (PINNED_MODELS.length) {
      const group = el('optgroup', { label: 'Download (pinned hub files)' });
      for (const m of PINNED_MODELS) {
        group.append(el('option', { value: `pinned:${m.id}` }, `${m.label} (${m.size ? formatBytes(m.size) : m.size_note ?? 'size unknown'})`));
      }
      options.push(group);
    }
    const stored = (this.state.models?.stored ?? []).filter((m) => m.complete);
    if (stored.length) {
      const group = el('optgroup', { label: 'Stored in this browser' });
      for (const m of stored) group.append(el('option', { value: `stored:${m.name}` }, `${m.name} (${formatBytes(m.bytes)})`));
      options.push(group);
    }
    const other = el('optgroup', { label: 'Other' });
    other.append(el('option', { value: 'url' }, 'From a URL…'), el('option', { value: 'file' }, 'Local GGUF file…'));
    options.push(other);
    select.replaceChildren(...options);
    const wanted = this.settings.model;
    const values = [...select.options].map((o) => o.value);
    const demo = served.find((m) => m.builtin);
    const fallback = demo ? `served:${demo.name}` : values[0];
    select.value = values.includes(wanted) && (wanted !== 'file' || this.file) ? wanted : fallback;
    if (this.firstVisit && demo) this.#useDemoSettings();
    this.firstVisit = false;
    select.disabled = false;
    this.#sourceChanged(false);
  }

  // The demo model answers from its training text: greedy and without a thinking block, as in demo/README.md.
  #useDemoSettings() {
    this.#saveSetting('thinking', false);
    this.#saveSetting('temperature', 0);
    this.#saveSetting('maxTokens', 128);
    this.#showSettings();
  }

  // The stored folder a source would land in (store/app folder_name: '/' flattens to '__').
  #storedFor(kind) {
    let name = null;
    if (kind.startsWith('served:')) name = kind.slice('served:'.length);
    else if (kind.startsWith('pinned:')) name = pinnedFor(kind)?.file;
    else if (kind === 'file' && this.file) name = this.file.name;
    if (!name) return null;
    return (this.state.models?.stored ?? []).find((m) => m.name === name.replaceAll('/', '__')) ?? null;
  }

  // What a Load of the current source would have to write to the store, when that is known (0: stored already).
  #bytesToStore() {
    const kind = $('model-select').value;
    if (this.settings.loadPath !== 'store' || kind.startsWith('stored:')) return 0;
    const stored = this.#storedFor(kind);
    if (stored?.complete) return 0;
    let size = null;
    if (kind.startsWith('served:')) size = this.state.models?.served?.find((m) => `served:${m.name}` === kind)?.size;
    else if (kind.startsWith('pinned:')) size = pinnedFor(kind)?.size;
    else if (kind === 'file') size = this.file?.size;
    return Number.isFinite(size) ? size - (stored?.bytes ?? 0) : null;
  }

  // Before a download into the store: warn when the browser's storage estimate says it will not fit. The warning
  // shows once per source; pressing Load again tries anyway (estimates are rough, and space may have been freed).
  async #storageFits() {
    const need = this.#bytesToStore();
    const kind = $('model-select').value;
    if (!need || !navigator.storage?.estimate || this.quotaWarned === kind) return true;
    let estimate;
    try {
      estimate = await navigator.storage.estimate();
    } catch {
      return true; // no estimate: nothing to warn about
    }
    const available = (estimate.quota ?? Infinity) - (estimate.usage ?? 0);
    if (need <= available) return true;
    this.quotaWarned = kind;
    const err = new Error(`this model needs ${formatBytes(need)} in this browser's storage, and about ` +
      `${formatBytes(Math.max(0, available))} is available. Free some space (Remove from disk below, or the ` +
      'browser\'s site data), switch the load path to "direct" in Settings, or press Load again to try anyway.');
    err.name = 'StorageQuota';
    this.showError(err, 'not enough storage');
    $('chat-error').dataset.kind = 'quota';
    return false;
  }

  #fillStored() {
    const box = $('stored-models');
    const stored = this.state.models?.stored ?? [];
    box.hidden = stored.length === 0;
    if (!stored.length) return box.replaceChildren();
    const list = el('ul');
    for (const m of stored) {
      const total = m.source?.size;
      const partial = Number.isFinite(total) ? ` (download interrupted: ${formatBytes(m.bytes)} of ${formatBytes(total)}` +
        ' stored; Load it from the same source to resume)' : ' (incomplete: Load it from the same source to resume)';
      const li = el('li', { 'data-model': m.name, 'data-complete': String(!!m.complete) },
        `${m.name} — ${formatBytes(m.bytes)}${m.complete ? '' : partial} `);
      const rm = el('button', { type: 'button', class: 'small remove' }, 'Remove from disk');
      rm.addEventListener('click', () => this.removeStored(m.name));
      li.append(rm);
      list.append(li);
    }
    box.replaceChildren(el('span', { class: 'muted' }, 'Stored in this browser:'), list);
  }

  async removeStored(name) {
    try {
      const answer = await this.client.request('remove', { model: name });
      this.clearError();
      if (answer.unloaded) {
        this.state.loaded = null;
        $('model-info').textContent = `${name} was removed and unloaded`;
        this.newChat(false);
        this.#setPhase('idle');
      }
    } catch (err) {
      this.showError(err, `removing ${name}`);
    }
    await this.refreshModels();
  }

  #sourceReady() {
    const kind = $('model-select').value;
    if (kind === 'url') return /^https?:\/\/\S+$|^\/\S+$/.test($('model-url').value.trim());
    if (kind === 'file') return this.file !== null;
    return kind.startsWith('served:') || kind.startsWith('stored:') || kind.startsWith('pinned:');
  }

  #sourceChanged(save = true) {
    const kind = $('model-select').value;
    $('model-url').hidden = kind !== 'url';
    $('pick-file').hidden = kind !== 'file';
    $('file-name').textContent = kind === 'file' && this.file ? this.file.name : '';
    if (save) this.#saveSetting('model', kind);
    if (this.state.phase !== 'loading' && this.state.phase !== 'generating') {
      $('load-btn').disabled = !this.#sourceReady();
    }
    if (this.state.phase === 'idle') $('model-info').textContent = this.#sourceNote(kind);
  }

  // A line under the picker: where a Load of this source will take its bytes from.
  #sourceNote(kind) {
    if (this.settings.loadPath !== 'store' || kind.startsWith('stored:')) return '';
    const stored = this.#storedFor(kind);
    if (stored?.complete) return 'stored in this browser: Load reads it from disk, no download';
    if (stored) return 'a download of this model was interrupted: Load resumes it';
    return kind.startsWith('served:') || kind.startsWith('pinned:') ? 'Load stores it in this browser once, then reads it from disk' : '';
  }

  #source() {
    const kind = $('model-select').value;
    if (kind === 'url') return { kind: 'url', url: $('model-url').value.trim() };
    if (kind === 'file') return { kind: 'file', file: this.file };
    if (kind.startsWith('stored:')) return { kind: 'stored', name: kind.slice('stored:'.length) };
    if (kind.startsWith('pinned:')) {
      const m = pinnedFor(kind);
      return m.sha256 ? { kind: 'url', url: m.url, sha256: m.sha256 } : { kind: 'url', url: m.url };
    }
    return { kind: 'served', name: kind.slice('served:'.length) };
  }

  useFile(file) {
    if (!file) return;
    if (!file.name.toLowerCase().endsWith('.gguf')) {
      this.showError(new Error(`${file.name} is not a .gguf file`), 'local file');
      return;
    }
    this.file = file;
    $('model-select').value = 'file';
    this.#sourceChanged();
  }

  // --- load -----------------------------------------------------------------------------------------------------
  async load() {
    if (!this.#sourceReady() || this.state.phase === 'loading' || this.state.phase === 'generating') return;
    this.clearError();
    if (!(await this.#storageFits())) return;
    const source = this.#source();
    const options = loadOptionsFrom(this.settings, this.fallbackBudgetMiB);
    this.state.loadEvents = [];
    this.state.loaded = null;
    $('model-info').textContent = '';
    this.#setPhase('loading');
    this.#showProgress({ stage: 'start', message: 'starting' });
    try {
      const info = await this.client.request('load', { source, options }, (ev) => {
        this.state.loadEvents.push({ stage: ev.stage, bytes: ev.bytes, total: ev.total });
        this.#showProgress(ev);
      });
      this.state.loaded = info;
      const fromDisk = this.state.loadEvents.some((e) => e.stage === 'stored') ? ' · loaded from disk, no download' : '';
      $('model-info').textContent = `${info.name} · ${info.arch} · ${info.n_ctx} tokens context · ` +
        `${formatBytes(info.gpu_bytes)} on the GPU · experts ${info.experts} · ${info.path} path · ` +
        `loaded in ${formatSeconds(info.load_seconds)}${fromDisk}`;
      $('load-progress').hidden = true;
      $('diagnostics').open = false;
      this.newChat(false);
      if (info.path === 'store') this.refreshModels();
      this.#setPhase('ready');
      $('prompt').focus();
    } catch (err) {
      $('load-progress').hidden = true;
      this.#setPhase('idle');
      if (options.path === 'store' || source.kind === 'stored') await this.refreshModels(); // e.g. a partial download
      this.showError(err, 'loading the model');
    }
  }

  #showProgress(ev) {
    $('load-progress').hidden = false;
    const bar = $('load-bar');
    const text = [];
    if (ev.message) text.push(ev.message);
    if (Number.isFinite(ev.total) && ev.total > 0 && Number.isFinite(ev.bytes)) {
      bar.value = Math.min(1, ev.bytes / ev.total);
      text.push(`${formatBytes(ev.bytes)} of ${formatBytes(ev.total)}`);
    } else {
      bar.removeAttribute('value'); // indeterminate
    }
    if (Number.isFinite(ev.rate)) text.push(`${formatBytes(ev.rate)}/s`);
    if (Number.isFinite(ev.eta) && ev.stage === 'download') text.push(`${formatSeconds(ev.eta)} left`);
    $('load-text').textContent = text.join(' · ');
    $('load-progress').dataset.stage = ev.stage ?? '';
  }

  // --- conversation ---------------------------------------------------------------------------------------------
  newChat(tellEngine = true) {
    if (this.state.phase === 'generating') return;
    this.state.conversation = [];
    this.state.lastResult = null;
    const demo = this.state.models?.served?.some((m) => m.builtin && m.name === this.state.loaded?.name);
    $('messages').replaceChildren(el('p', { class: 'empty muted' },
      !this.state.loaded ? 'Load a model, then ask something.'
        : demo ? `${this.state.loaded.name} is ready. It knows the docstrings of Python's standard library: ` +
          'ask e.g. "What does os.path.join do?"' : `${this.state.loaded.name} is ready: ask something.`));
    if (tellEngine && this.state.loaded) {
      this.client.request('reset').catch((err) => this.showError(err, 'new chat'));
    }
  }

  #bubble(role) {
    $('messages').querySelector('.empty')?.remove();
    const node = el('article', { class: `msg ${role}`, 'data-role': role });
    $('messages').append(node);
    return node;
  }

  #scroll() {
    const box = $('messages');
    box.scrollTop = box.scrollHeight;
  }

  async send() {
    const text = $('prompt').value.trim();
    if (!text || this.state.phase !== 'ready') return;
    this.clearError();
    $('prompt').value = '';
    const userMsg = { role: 'user', content: text };
    this.state.conversation.push(userMsg);
    const userNode = this.#bubble('user');
    userNode.append(el('div', { class: 'text' }, text));

    const reply = new ReplyView(this.#bubble('assistant'), this.settings.thinking);
    this.#setPhase('generating');
    this.state.lastDeltas = 0;
    const started = performance.now();
    try {
      const result = await this.client.request('generate', {
        messages: this.state.conversation,
        thinking: this.settings.thinking,
        sampling: samplingFrom(this.settings),
        max_tokens: this.settings.maxTokens,
      }, (ev) => {
        if (ev.kind !== 'delta') return;
        this.state.lastDeltas += 1;
        reply.add(ev.channel, ev.text);
        this.#liveMeter(started);
        this.#scroll();
      });
      this.state.lastResult = result;
      this.state.conversation.push({ role: 'assistant', content: result.text, reasoning_content: result.thinking });
      reply.finish(result);
      this.#meter(result.stats);
    } catch (err) {
      // the turn failed: take it out of the conversation and give the text back to the composer
      this.state.conversation.pop();
      if (!$('prompt').value) $('prompt').value = text;
      reply.fail(err);
      this.showError(err, 'generating');
    } finally {
      this.#setPhase(this.state.loaded ? 'ready' : 'idle');
      this.#scroll();
    }
  }

  async stop() {
    if (this.state.phase !== 'generating') return;
    $('stop-btn').disabled = true;
    try {
      await this.client.request('stop');
    } catch (err) {
      this.showError(err, 'stopping');
    } finally {
      $('stop-btn').disabled = false;
    }
  }

  // --- the meter ------------------------------------------------------------------------------------------------
  #liveMeter(started) {
    const secs = (performance.now() - started) / 1000;
    $('meter').textContent = `generating… ${this.state.lastDeltas} pieces in ${formatSeconds(secs)}`;
  }

  #meter(s) {
    if (!s) return;
    const parts = [
      `decode ${Number.isFinite(s.decode_tokens_per_s) ? s.decode_tokens_per_s.toFixed(1) : '—'} tok/s`,
      `first token ${formatSeconds(s.first_token_seconds)}`,
      `prefill ${s.prefilled_tokens} tok${s.reused_tokens ? ` (${s.reused_tokens} reused)` : ''}`,
      `GPU ${formatBytes(s.gpu_bytes)}`,
      `experts ${Number.isFinite(s.expert_hit_rate) ? `${(100 * s.expert_hit_rate).toFixed(1)} % hit` : s.experts === 'resident' ? 'all resident' : '—'}`,
      `read/token ${Number.isFinite(s.bytes_read_per_token) ? formatBytes(s.bytes_read_per_token) : '—'}`,
      `context ${s.n_cached}/${s.n_ctx}`,
    ];
    $('meter').textContent = parts.join(' · ');
  }

  // --- settings -------------------------------------------------------------------------------------------------
  #saveSetting(name, value) {
    this.settings[name] = value;
    this.settings = { ...this.settings, ...saveSettings(this.settings) };
  }

  #showSettings() {
    const s = this.settings;
    $('set-budget').value = String(s.budgetMiB ?? this.fallbackBudgetMiB);
    $('set-ctx').value = String(s.nCtx);
    $('set-kv').value = s.kv;
    $('set-path').value = s.loadPath;
    $('set-thinking').checked = s.thinking;
    $('set-max-tokens').value = String(s.maxTokens);
    $('set-temperature').value = String(s.temperature);
    $('set-top-k').value = String(s.topK);
    $('set-top-p').value = String(s.topP);
    $('set-min-p').value = String(s.minP);
    $('set-seed').value = s.seed === null ? '' : String(s.seed);
    $('model-url').value = s.url;
  }

  #bindSetting(id, name, read) {
    $(id).addEventListener('change', () => {
      const value = read($(id));
      const before = this.settings[name];
      this.#saveSetting(name, value);
      if (this.settings[name] !== value) { // refused by the checks: show what is kept
        $(id).classList.add('invalid');
        this.#showSettings();
      } else {
        $(id).classList.remove('invalid');
      }
      return before;
    });
  }

  #bind() {
    const num = (node) => (node.value.trim() === '' ? NaN : Number(node.value));
    const int = (node) => Math.round(num(node));
    this.#bindSetting('set-budget', 'budgetMiB', num);
    this.#bindSetting('set-ctx', 'nCtx', int);
    this.#bindSetting('set-kv', 'kv', (n) => n.value);
    this.#bindSetting('set-path', 'loadPath', (n) => n.value);
    this.#bindSetting('set-thinking', 'thinking', (n) => n.checked);
    this.#bindSetting('set-max-tokens', 'maxTokens', int);
    this.#bindSetting('set-temperature', 'temperature', num);
    this.#bindSetting('set-top-k', 'topK', int);
    this.#bindSetting('set-top-p', 'topP', num);
    this.#bindSetting('set-min-p', 'minP', num);
    this.#bindSetting('set-seed', 'seed', (n) => (n.value.trim() === '' ? null : int(n)));

    $('model-select').addEventListener('change', () => {
      this.#sourceChanged();
      if ($('model-select').value === 'file' && !this.file) $('model-file').click();
    });
    $('model-url').addEventListener('input', () => {
      this.#saveSetting('url', $('model-url').value.trim());
      this.#sourceChanged(false);
    });
    $('pick-file').addEventListener('click', () => $('model-file').click());
    $('model-file').addEventListener('change', () => this.useFile($('model-file').files[0]));
    $('load-btn').addEventListener('click', () => this.load());

    $('composer').addEventListener('submit', (e) => {
      e.preventDefault();
      this.send();
    });
    $('prompt').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.send();
      }
    });
    $('stop-btn').addEventListener('click', () => this.stop());
    $('new-chat').addEventListener('click', () => this.newChat());

    const panel = $('chat-panel');
    panel.addEventListener('dragover', (e) => {
      if ([...(e.dataTransfer?.types ?? [])].includes('Files')) {
        e.preventDefault();
        panel.classList.add('dropping');
      }
    });
    panel.addEventListener('dragleave', () => panel.classList.remove('dropping'));
    panel.addEventListener('drop', (e) => {
      panel.classList.remove('dropping');
      const file = e.dataTransfer?.files?.[0];
      if (!file) return;
      e.preventDefault();
      this.useFile(file);
    });
  }
}

// One assistant reply: a collapsed thinking block, the answer (Markdown, re-rendered at most once per frame while
// it streams), and a footer with the stop reason and Copy.
class ReplyView {
  constructor(node, thinkingOn) {
    this.node = node;
    this.text = '';
    this.thinking = '';
    this.pending = false;
    this.details = el('details', { class: 'thinking' });
    this.details.append(el('summary', {}, 'Thinking'));
    this.thinkingBody = el('div', { class: 'thinking-text' });
    this.details.append(this.thinkingBody);
    this.details.hidden = true;
    this.answer = el('div', { class: 'answer' });
    this.footer = el('div', { class: 'msg-footer' });
    this.node.dataset.streaming = 'true';
    this.node.append(this.details, this.answer, this.footer);
    this.thinkingOn = thinkingOn;
  }

  add(channel, text) {
    if (channel === 'thinking') {
      this.thinking += text;
      this.details.hidden = false;
    } else {
      this.text += text;
    }
    if (!this.pending) {
      this.pending = true;
      requestAnimationFrame(() => this.#render());
    }
  }

  #render() {
    this.pending = false;
    this.thinkingBody.textContent = this.thinking;
    this.answer.innerHTML = renderMarkdown(this.text); // escaped by renderMarkdown
  }

  finish(result) {
    this.text = result.text;
    this.thinking = result.thinking;
    this.details.hidden = !result.thinking;
    this.#render();
    delete this.node.dataset.streaming;
    this.node.dataset.stopReason = result.stop_reason;
    const label = STOP_LABELS[result.stop_reason];
    if (label) this.footer.append(el('span', { class: `badge ${result.stop_reason}` }, label));
    if (result.message) this.footer.append(el('span', { class: 'muted' }, result.message));
    const copy = el('button', { type: 'button', class: 'small copy' }, 'Copy');
    copy.addEventListener('click', () => copyText(result.text, copy));
    this.footer.append(copy);
  }

  fail(err) {
    this.#render();
    delete this.node.dataset.streaming;
    this.node.dataset.stopReason = 'error';
    this.node.classList.add('failed');
    this.footer.append(el('span', { class: 'badge error' }, `failed: ${err?.message ?? err}`));
  }
}

async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    // no clipboard permission (an insecure context, a headless browser): copy through a selection
    const area = el('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  button.textContent = 'Copied';
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
}

function pinnedFor(kind) {
  return PINNED_MODELS.find((m) => `pinned:${m.id}` === kind) ?? null;
}

export function startChat(client, selftest) {
  return new Chat(client, selftest);
}
