// The chat: model picker and Load (with progress), streamed replies, Stop, multi-turn, the saved chats (reopen,
// rename, delete, export), Regenerate, Edit, the stats line and settings. Every bit of work runs in the engine worker
// (py_engine/app through EngineClient); this file moves messages between the modules that draw the page:
//   model_list.js (picker, stored models)   message_view.js (the messages)   stats_view.js (figures)
//   conversations.js (IndexedDB, export)    chat_list.js (past chats)        store_sync.js (other tabs)
//   settings.js (localStorage)              error_view.js (errors in the user's words)
//
// Readable by tests and from the console: window.diskformer.chat.state.

import { renderChatList } from './chat_list.js';
import { ConversationStore, download, exportName, newConversation, toJSON, toMarkdown } from './conversations.js';
import { renderError } from './error_view.js';
import { el, formatBytes, formatSeconds } from './format.js';
import { LoadProgress, rememberPipelines, rememberedPipelines } from './load_progress.js';
import { ReplyView, userView } from './message_view.js';
import { bytesToStore, folderName, modelOptions, sourceFor, sourceName, sourceNote, storedList } from './model_list.js';
import { defaultBudgetMiB, isFirstVisit, loadOptionsFrom, loadSettings, samplingFrom, saveSettings } from './settings.js';
import { bindSettings, showSettings } from './settings_form.js';
import { LiveRate, meterText } from './stats_view.js';
import { StoreSync } from './store_sync.js';

const $ = (id) => document.getElementById(id);

export class Chat {
  constructor(client, selftest) {
    this.client = client;
    this.limits = selftest?.limits ?? {};
    this.fallbackBudgetMiB = defaultBudgetMiB(this.limits);
    // nothing stored yet (a first visit): the built-in demo model is preselected, with the settings it was made for
    this.firstVisit = isFirstVisit();
    this.settings = loadSettings();
    this.quotaWarned = null; // the source a storage warning was shown for: a second Load goes ahead
    this.file = null; // the picked or dropped File
    this.chats = new ConversationStore();
    this.sync = new StoreSync((change) => this.#storeChanged(change));
    this.chat = newConversation(); // the open chat; saved once it has a message
    this.editFrom = null; // index of the user message being edited (Send replaces it and what followed)
    this.progress = new LoadProgress();
    this.state = {
      phase: 'idle', // idle | loading | ready | generating
      loaded: null, // the load request's answer
      models: null, // the models request's answer
      conversation: this.chat.messages, // [{role, content, reasoning_content?, stats?, stop_reason?}]
      chatId: this.chat.id,
      chats: [], // the saved chats, newest first
      lastResult: null,
      lastDeltas: 0,
      liveTokens: 0, // tokens of the reply being generated
      liveTokensPerSecond: null,
      loadEvents: [],
      error: null,
    };
    this.#bind();
    this.#showSettings();
    this.#setPhase('idle');
    this.#renderMessages();
    this.refreshModels();
    this.refreshChats();
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
    $('new-chat').disabled = phase === 'generating';
    for (const b of document.querySelectorAll('#messages .regenerate, #messages .edit, #chat-list button')) {
      b.disabled = busy || (phase !== 'ready' && !b.closest('#chat-list'));
    }
  }

  showError(err, where = '') {
    const message = err?.message ?? String(err);
    const errorType = err?.errorType ?? err?.name ?? 'Error';
    const shown = renderError($('chat-error'), err, where);
    this.state.error = { message, errorType, where, shown };
  }

  clearError() {
    this.state.error = null;
    delete $('chat-error').dataset.kind;
    $('chat-error').hidden = true;
    $('chat-error').replaceChildren();
  }

  // A note about the store (a removal, another tab's change) that stays until the next one.
  #storeNote(text) {
    $('store-note').textContent = text;
    $('store-note').hidden = !text;
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
    const keep = this.state.phase === 'loading' || this.state.phase === 'generating';
    select.replaceChildren(...modelOptions(this.state.models));
    const wanted = this.settings.model;
    const values = [...select.options].map((o) => o.value);
    const demo = this.state.models?.served?.find((m) => m.builtin);
    const fallback = demo ? `served:${demo.name}` : values[0];
    select.value = values.includes(wanted) && (wanted !== 'file' || this.file) ? wanted : fallback;
    if (this.firstVisit && demo) this.#useDemoSettings();
    this.firstVisit = false;
    select.disabled = keep;
    this.#sourceChanged(false);
  }

  // The demo model answers from its training text: greedy and without a thinking block, as in demo/README.md.
  #useDemoSettings() {
    this.#saveSetting('thinking', false);
    this.#saveSetting('temperature', 0);
    this.#saveSetting('maxTokens', 128);
    this.#showSettings();
  }

  // Before a download into the store: warn when the browser's storage estimate says it will not fit. The warning
  // shows once per source; pressing Load again tries anyway (estimates are rough, and space may have been freed).
  async #storageFits() {
    const need = bytesToStore($('model-select').value, this.state.models, this.file, this.settings.loadPath);
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
    const err = new Error(`free some space first (Remove from disk below, or the browser's site data), switch the ` +
      `load path to "direct" in Settings, or press Load again to try anyway: this model needs ${formatBytes(need)} ` +
      `in this browser's storage, and about ${formatBytes(Math.max(0, available))} is available.`);
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
    // a refresh (another tab's change, a finished Load) must not close a question the user is answering
    const asking = box.querySelector('li:has(.confirm-ask)')?.dataset.model;
    box.replaceChildren(el('span', { class: 'muted' }, 'Stored in this browser:'),
      storedList(stored, (name) => this.removeStored(name)));
    if (asking) box.querySelector(`li[data-model="${CSS.escape(asking)}"] button.remove`)?.click();
  }

  // Remove a stored model (Remove from disk asks first; this does it). A model another tab has loaded is refused.
  async removeStored(name) {
    this.clearError(); // a new attempt: an earlier refusal no longer applies
    const mine = this.sync.held === name;
    if (mine) await this.sync.release();
    try {
      const done = await this.sync.whileUnused(name, () => this.client.request('remove', { model: name }));
      if (!done.ran) {
        if (mine) this.sync.hold(name);
        const err = new Error(`${name} is in use in another tab of this page: load another model there or close ` +
          'it, then remove it here.');
        err.name = 'ModelInUse';
        this.showError(err, `removing ${name}`);
        return;
      }
      this.sync.announce({ kind: 'removed', name });
      if (done.value.unloaded) {
        this.#unloaded();
        this.#storeNote(`${name} was removed from this browser and unloaded`);
      } else {
        this.#storeNote(`${name} was removed from this browser`);
      }
    } catch (err) {
      if (mine && this.state.loaded) this.sync.hold(name);
      this.showError(err, `removing ${name}`);
    }
    await this.refreshModels();
  }

  #storeChanged(change) {
    if (change?.kind === 'removed') this.#storeNote(`${change.name} was removed from this browser in another tab`);
    if (this.state.phase !== 'loading') this.refreshModels();
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
    $('source-note').textContent = this.state.phase === 'loading' ? ''
      : sourceNote(kind, this.state.models, this.file, this.settings.loadPath);
  }

  useFile(file) {
    if (!file) return;
    if (!file.name.toLowerCase().endsWith('.gguf')) {
      const err = new Error(`${file.name} is not a .gguf file: choose a GGUF model file`);
      err.name = 'LocalFile';
      this.showError(err, 'local file');
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
    this.#storeNote('');
    if (!(await this.#storageFits())) return;
    const source = sourceFor($('model-select').value, $('model-url').value.trim(), this.file);
    const options = loadOptionsFrom(this.settings, this.fallbackBudgetMiB);
    const before = this.state.loaded;
    this.state.loadEvents = [];
    this.#setPhase('loading');
    $('source-note').textContent = '';
    this.progress.start();
    const name = sourceName(source);
    const pipelines = name ? rememberedPipelines(name) : null;
    if (pipelines) options.pipeline_specs = pipelines;
    try {
      const info = await this.client.request('load', { source, options }, (ev) => {
        this.state.loadEvents.push({ stage: ev.stage, step: ev.step, bytes: ev.bytes, total: ev.total,
          done: ev.done, total_steps: ev.total_steps });
        this.progress.show(ev);
      });
      this.state.loaded = info;
      rememberPipelines(info.name, info.pipeline_specs);
      this.sync.hold(folderName(info.name));
      const fromDisk = this.state.loadEvents.some((e) => e.stage === 'stored') ? ' · loaded from disk, no download' : '';
      $('model-info').textContent = `${info.name} · ${info.arch} · ${info.n_ctx} tokens context · ` +
        `${formatBytes(info.gpu_bytes)} on the GPU · experts ${info.experts} · ${info.path} path · ` +
        `loaded in ${formatSeconds(info.load_seconds)}${fromDisk}`;
      $('meter').textContent = '';
      this.progress.stop();
      $('diagnostics').open = false;
      this.#setPhase('ready');
      this.#renderMessages();
      this.client.request('reset').catch(() => {}); // a new model starts with no cached conversation
      if (info.path === 'store') {
        await this.refreshModels();
        this.sync.announce({ kind: 'stored', name: folderName(info.name) });
      }
      $('prompt').focus();
    } catch (err) {
      this.progress.stop();
      this.#setPhase('idle');
      await this.refreshModels(); // a partial download is listed; `loaded` says whether the engine kept the model
      if (before && this.state.models?.loaded === before.name) {
        this.#setPhase('ready'); // the failed Load left the working model loaded
      } else if (before) {
        this.#unloaded();
      }
      this.showError(err, 'loading the model');
    }
  }

  // The engine holds no model any more: nothing on the page may describe one.
  #unloaded() {
    this.state.loaded = null;
    this.sync.release();
    $('model-info').textContent = '';
    $('meter').textContent = '';
    this.#setPhase('idle');
    this.#sourceChanged(false);
    this.#renderMessages();
  }

  // --- the saved chats ------------------------------------------------------------------------------------------
  async refreshChats() {
    try {
      this.state.chats = await this.chats.list();
    } catch (err) {
      this.state.chats = [];
      this.showError(err, 'reading the saved chats');
    }
    renderChatList($('chat-list'), this.state.chats, this.chat.id, {
      onOpen: (id) => this.openChat(id),
      onRename: (id, title) => this.renameChat(id, title),
      onDelete: (id) => this.deleteChat(id),
    });
    this.#setPhase(this.state.phase);
  }

  async #saveChat() {
    if (!this.chat.messages.length) return;
    this.chat.updated = Date.now();
    this.chat.model = this.state.loaded?.name ?? this.chat.model;
    try {
      await this.chats.put(structuredClone(this.chat));
    } catch (err) {
      this.showError(err, 'saving the chat');
    }
    await this.refreshChats();
  }

  #useChat(chat) {
    this.chat = chat;
    this.state.conversation = chat.messages;
    this.state.chatId = chat.id;
    this.state.lastResult = null;
    this.#cancelEdit();
    this.#renderMessages();
  }

  async openChat(id) {
    if (this.state.phase === 'generating' || this.state.phase === 'loading') return;
    const chat = await this.chats.get(id);
    if (!chat) return this.refreshChats();
    this.#useChat(chat);
    if (this.state.loaded) this.client.request('reset').catch((err) => this.showError(err, 'opening the chat'));
    await this.refreshChats();
  }

  async renameChat(id, title) {
    const chat = id === this.chat.id ? this.chat : await this.chats.get(id);
    if (!chat) return;
    chat.title = title;
    if (chat.messages.length) await this.chats.put(structuredClone(chat));
    await this.refreshChats();
  }

  async deleteChat(id) {
    await this.chats.delete(id);
    if (id === this.chat.id) this.newChat();
    await this.refreshChats();
  }

  exportChat(format) {
    if (!this.chat.messages.length) return;
    if (format === 'json') download(exportName(this.chat, 'json'), toJSON(this.chat), 'application/json');
    else download(exportName(this.chat, 'md'), toMarkdown(this.chat), 'text/markdown');
  }

  // --- conversation ---------------------------------------------------------------------------------------------
  newChat(tellEngine = true) {
    if (this.state.phase === 'generating') return;
    this.#useChat(newConversation());
    this.refreshChats();
    if (tellEngine && this.state.loaded) {
      this.client.request('reset').catch((err) => this.showError(err, 'new chat'));
    }
  }

  #emptyNote() {
    const loaded = this.state.loaded;
    if (!loaded) return 'Load a model, then ask something. A .gguf file can also be dropped here.';
    const demo = this.state.models?.served?.some((m) => m.builtin && m.name === loaded.name);
    return demo ? `${loaded.name} is ready. It knows the docstrings of Python's standard library: ` +
      'ask e.g. "What does os.path.join do?"' : `${loaded.name} is ready: ask something.`;
  }

  #renderMessages() {
    const box = $('messages');
    const msgs = this.chat.messages;
    if (!msgs.length) return box.replaceChildren(el('p', { class: 'empty muted' }, this.#emptyNote()));
    const regenerate = { onRegenerate: () => this.regenerate() }; // on the newest answer only
    box.replaceChildren(...msgs.map((m, i) => (m.role === 'user'
      ? userView(m, i, { onEdit: (index) => this.edit(index) })
      : ReplyView.of(m, i, i === msgs.length - 1 ? regenerate : null).node)));
    this.#setPhase(this.state.phase);
    this.#scroll();
  }

  #scroll() {
    const box = $('messages');
    box.scrollTop = box.scrollHeight;
  }

  // Edit a sent message: its text goes back to the composer; Send replaces it and drops what followed.
  edit(index) {
    if (this.state.phase !== 'ready' || this.chat.messages[index]?.role !== 'user') return;
    this.editFrom = index;
    $('prompt').value = this.chat.messages[index].content;
    $('edit-note').hidden = false;
    for (const node of document.querySelectorAll('#messages .msg')) {
      node.classList.toggle('superseded', Number(node.dataset.index) >= index);
    }
    $('prompt').focus();
  }

  #cancelEdit() {
    this.editFrom = null;
    $('edit-note').hidden = true;
    for (const node of document.querySelectorAll('#messages .superseded')) node.classList.remove('superseded');
  }

  // Regenerate the last answer: the same conversation up to its question, asked again.
  async regenerate() {
    const msgs = this.chat.messages;
    if (this.state.phase !== 'ready' || msgs.at(-1)?.role !== 'assistant') return;
    msgs.pop();
    this.#renderMessages();
    await this.#reply();
  }

  async send() {
    const text = $('prompt').value.trim();
    if (!text || this.state.phase !== 'ready') return;
    if (this.editFrom !== null) {
      this.chat.messages.splice(this.editFrom);
      this.#cancelEdit();
      this.#renderMessages();
    }
    $('prompt').value = '';
    const msgs = this.chat.messages;
    msgs.push({ role: 'user', content: text });
    $('messages').querySelector('.empty')?.remove();
    $('messages').append(userView(msgs.at(-1), msgs.length - 1, { onEdit: (index) => this.edit(index) }));
    if (!(await this.#reply())) {
      // the turn failed: take it out of the conversation and give the text back to the composer
      msgs.pop();
      if (!$('prompt').value) $('prompt').value = text;
      $('messages').querySelector(`.msg.user[data-index="${msgs.length}"]`)?.remove();
    }
  }

  // Generate the answer to the conversation as it stands (its last message is the user's); true when it worked.
  async #reply() {
    this.clearError();
    const msgs = this.chat.messages;
    for (const b of document.querySelectorAll('#messages .regenerate')) b.remove(); // only the newest answer has one
    const reply = new ReplyView(msgs.length);
    $('messages').append(reply.node);
    this.#setPhase('generating');
    this.state.lastDeltas = 0;
    const live = new LiveRate();
    const tick = setInterval(() => this.#liveMeter(live), 250);
    let ok = false;
    try {
      const result = await this.client.request('generate', {
        messages: msgs.map(({ role, content, reasoning_content }) => (reasoning_content
          ? { role, content, reasoning_content } : { role, content })),
        thinking: this.settings.thinking,
        sampling: samplingFrom(this.settings),
        max_tokens: this.settings.maxTokens,
      }, (ev) => {
        if (ev.kind !== 'delta') return;
        this.state.lastDeltas += 1;
        live.add(ev);
        reply.add(ev.channel, ev.text);
        this.#liveMeter(live);
        this.#scroll();
      });
      this.state.lastResult = result;
      const answer = { role: 'assistant', content: result.text, stop_reason: result.stop_reason, stats: result.stats };
      if (result.thinking) answer.reasoning_content = result.thinking;
      msgs.push(answer);
      reply.finish(result, { onRegenerate: () => this.regenerate() });
      $('meter').textContent = meterText(result.stats);
      ok = true;
    } catch (err) {
      reply.fail(err);
      this.showError(err, 'generating');
      if (this.state.loaded) $('meter').textContent = '';
    } finally {
      clearInterval(tick);
      this.#setPhase(this.state.loaded ? 'ready' : 'idle');
      this.#scroll();
    }
    if (ok) await this.#saveChat();
    return ok;
  }

  #liveMeter(live) {
    this.state.liveTokens = live.tokens;
    this.state.liveTokensPerSecond = Number.isFinite(live.tokensPerSecond) ? live.tokensPerSecond : null;
    $('meter').textContent = live.text();
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

  // --- settings -------------------------------------------------------------------------------------------------
  #saveSetting(name, value) {
    this.settings[name] = value;
    this.settings = { ...this.settings, ...saveSettings(this.settings) };
  }

  #showSettings() {
    showSettings(this.settings, this.fallbackBudgetMiB);
  }

  #bind() {
    // a value the checks refuse is not saved: the form shows what is kept
    bindSettings((name, value) => {
      this.#saveSetting(name, value);
      const kept = this.settings[name] === value;
      if (!kept) this.#showSettings();
      return kept;
    });

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
    $('cancel-edit').addEventListener('click', () => { this.#cancelEdit(); $('prompt').value = ''; });
    $('export-md').addEventListener('click', () => this.exportChat('md'));
    $('export-json').addEventListener('click', () => this.exportChat('json'));

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

export function startChat(client, selftest) {
  return new Chat(client, selftest);
}
