// Small DOM and number helpers shared by the chat's modules.

export function el(tag, attrs = {}, text = null) {
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

export function formatSeconds(s) {
  if (!Number.isFinite(s)) return '—';
  if (s < 1) return `${(s * 1000).toFixed(0)} ms`;
  if (s < 90) return `${s.toFixed(1)} s`;
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

export function formatRate(tokensPerSecond) {
  return Number.isFinite(tokensPerSecond) ? `${tokensPerSecond.toFixed(1)} tok/s` : '— tok/s';
}

// A button that asks before it acts: the first click shows "<question> [confirm] [Cancel]" in its place.
export function confirmButton({ label, question, confirmLabel, className = '', onConfirm }) {
  const wrap = el('span', { class: 'confirmable' });
  const button = el('button', { type: 'button', class: `small ${className}`.trim() }, label);
  wrap.append(button);
  button.addEventListener('click', () => {
    const yes = el('button', { type: 'button', class: 'small confirm danger' }, confirmLabel);
    const no = el('button', { type: 'button', class: 'small cancel' }, 'Cancel');
    const ask = el('span', { class: 'confirm-ask' }, `${question} `);
    ask.append(yes, no);
    button.hidden = true;
    wrap.append(ask);
    no.addEventListener('click', () => { ask.remove(); button.hidden = false; });
    yes.addEventListener('click', () => { ask.remove(); button.hidden = false; onConfirm(); });
  });
  return wrap;
}

// Text onto the clipboard; without clipboard permission (an insecure context, a headless browser) through a selection.
export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = el('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  if (button) {
    const label = button.textContent;
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = label; }, 1500);
  }
}
