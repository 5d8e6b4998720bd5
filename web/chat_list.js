// The list of past chats (newest first): open one, rename it (inline), delete it (after a confirmation).

import { confirmButton, el } from './format.js';
import { titleFor } from './conversations.js';

// handlers: {onOpen(id), onRename(id, title), onDelete(id)}
export function renderChatList(box, conversations, currentId, handlers) {
  const list = el('ul', { class: 'chat-list-items' });
  for (const c of conversations) {
    const li = el('li', { 'data-chat': c.id });
    if (c.id === currentId) li.classList.add('current');
    const open = el('button', { type: 'button', class: 'open-chat', title: 'Open this chat' }, titleFor(c));
    open.addEventListener('click', () => handlers.onOpen(c.id));
    const rename = el('button', { type: 'button', class: 'small rename' }, 'Rename');
    rename.addEventListener('click', () => {
      const input = el('input', { type: 'text', class: 'rename-input', 'aria-label': 'New name' });
      input.value = titleFor(c);
      let finished = false; // Enter, then the blur it causes: one rename
      const done = (save) => {
        if (finished) return;
        finished = true;
        if (save && input.value.trim()) handlers.onRename(c.id, input.value.trim());
        else input.replaceWith(open);
      };
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') done(true);
        if (e.key === 'Escape') done(false);
      });
      input.addEventListener('blur', () => done(true), { once: true });
      open.replaceWith(input);
      input.focus();
      input.select();
    });
    li.append(open, rename, confirmButton({ label: 'Delete', question: 'Delete this chat?', confirmLabel: 'Delete',
      className: 'delete-chat', onConfirm: () => handlers.onDelete(c.id) }));
    list.append(li);
  }
  box.replaceChildren(el('h3', {}, 'Chats'), conversations.length ? list : el('p', { class: 'muted small' }, 'no saved chats yet'));
}
