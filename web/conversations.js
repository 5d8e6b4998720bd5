// Conversations kept in this browser (IndexedDB, database "diskformer-chats"), so they survive a reload:
// {id, title, created, updated, model, messages: [{role, content, reasoning_content?, stats?, stop_reason?}]}.
// Also the two export formats (Markdown, JSON).

const DB_NAME = 'diskformer-chats';
const STORE = 'conversations';

function promised(request) {
  return new Promise((resolve, reject) => {
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

export class ConversationStore {
  #db = null;

  async #open() {
    if (this.#db) return this.#db;
    const request = indexedDB.open(DB_NAME, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(STORE, { keyPath: 'id' });
    this.#db = await promised(request);
    return this.#db;
  }

  async #store(mode) {
    return (await this.#open()).transaction(STORE, mode).objectStore(STORE);
  }

  // newest first
  async list() {
    const all = await promised((await this.#store('readonly')).getAll());
    return all.sort((a, b) => b.updated - a.updated);
  }

  async get(id) {
    return (await promised((await this.#store('readonly')).get(id))) ?? null;
  }

  async put(conversation) {
    await promised((await this.#store('readwrite')).put(conversation));
    return conversation;
  }

  async delete(id) {
    await promised((await this.#store('readwrite')).delete(id));
  }
}

export function newConversation() {
  const now = Date.now();
  return { id: `chat-${now}-${Math.random().toString(36).slice(2, 8)}`, title: '', created: now, updated: now,
    model: null, messages: [] };
}

// The title a chat gets until it is renamed: the start of its first question.
export function titleFor(conversation) {
  if (conversation.title) return conversation.title;
  const first = conversation.messages.find((m) => m.role === 'user')?.content ?? '';
  const line = first.split('\n')[0].trim();
  return line ? (line.length > 48 ? `${line.slice(0, 47)}…` : line) : 'New chat';
}

export function toMarkdown(conversation) {
  const parts = [`# ${titleFor(conversation)}`, ''];
  if (conversation.model) parts.push(`Model: ${conversation.model}`, '');
  for (const m of conversation.messages) {
    parts.push(`## ${m.role === 'user' ? 'User' : m.role === 'assistant' ? 'Assistant' : 'System'}`, '');
    if (m.reasoning_content) parts.push('<details><summary>Thinking</summary>', '', m.reasoning_content, '', '</details>', '');
    parts.push(m.content, '');
  }
  return parts.join('\n');
}

export function toJSON(conversation) {
  const { id, created, updated, model, messages } = conversation;
  return JSON.stringify({ title: titleFor(conversation), id, created: new Date(created).toISOString(),
    updated: new Date(updated).toISOString(), model, messages }, null, 2);
}

export function download(filename, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

export function exportName(conversation, ext) {
  const stem = titleFor(conversation).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '').slice(0, 40);
  return `${stem || 'chat'}.${ext}`;
}
