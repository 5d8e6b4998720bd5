// The messages of a conversation on the page: a user message (Copy, Edit) and an assistant reply (a collapsed
// thinking block, the answer as Markdown re-rendered at most once per frame while it streams, a footer with the stop
// reason, the reply's own figures, Copy and, on the last reply, Regenerate). Model text goes through markdown.js
// (escaped, then a small subset rendered) or textContent, never raw innerHTML.

import { copyText, el } from './format.js';
import { renderMarkdown } from './markdown.js';
import { messageStatsText } from './stats_view.js';

const STOP_LABELS = {
  stop: null,
  length: 'reply length limit reached',
  abort: 'stopped',
  context_full: 'context full',
};

function bubble(role, index) {
  return el('article', { class: `msg ${role}`, 'data-role': role, 'data-index': String(index) });
}

// actions: {onEdit(index)}
export function userView(msg, index, actions) {
  const node = bubble('user', index);
  node.append(el('div', { class: 'text' }, msg.content));
  const footer = el('div', { class: 'msg-footer' });
  const copy = el('button', { type: 'button', class: 'small copy' }, 'Copy');
  copy.addEventListener('click', () => copyText(msg.content, copy));
  const edit = el('button', { type: 'button', class: 'small edit' }, 'Edit');
  edit.addEventListener('click', () => actions.onEdit(index));
  footer.append(copy, edit);
  node.append(footer);
  return node;
}

export class ReplyView {
  constructor(index) {
    this.node = bubble('assistant', index);
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
  }

  // A reply from the conversation store, shown finished.
  static of(msg, index, actions) {
    const view = new ReplyView(index);
    view.finish({ text: msg.content, thinking: msg.reasoning_content ?? '', stop_reason: msg.stop_reason ?? 'stop',
      stats: msg.stats ?? null }, actions);
    return view;
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

  // actions: {onRegenerate()} or null (no Regenerate button)
  finish(result, actions = null) {
    this.text = result.text;
    this.thinking = result.thinking ?? '';
    this.details.hidden = !this.thinking;
    this.#render();
    delete this.node.dataset.streaming;
    this.node.dataset.stopReason = result.stop_reason;
    this.footer.replaceChildren();
    const label = STOP_LABELS[result.stop_reason];
    if (label) this.footer.append(el('span', { class: `badge ${result.stop_reason}` }, label));
    if (result.message) this.footer.append(el('span', { class: 'muted' }, result.message));
    const copy = el('button', { type: 'button', class: 'small copy' }, 'Copy');
    copy.addEventListener('click', () => copyText(this.text, copy));
    this.footer.append(copy);
    if (actions?.onRegenerate) {
      const again = el('button', { type: 'button', class: 'small regenerate' }, 'Regenerate');
      again.addEventListener('click', () => actions.onRegenerate());
      this.footer.append(again);
    }
    const stats = messageStatsText(result.stats);
    if (stats) this.footer.append(el('span', { class: 'msg-stats muted' }, stats));
  }

  fail(err) {
    this.#render();
    delete this.node.dataset.streaming;
    this.node.dataset.stopReason = 'error';
    this.node.classList.add('failed');
    this.footer.append(el('span', { class: 'badge error' }, 'failed: see the message above'));
  }
}
