// Safe Markdown for model output: every character of the text is HTML-escaped first, then a small subset is turned
// into markup — paragraphs, fenced code blocks, inline code, **bold**, *italic* / _italic_, lists, and links whose
// href is an absolute http(s) or mailto URL. Nothing from the text ever reaches innerHTML unescaped: the only tags
// in the output are the ones written here, and attribute values are escaped too.
//
// It renders half-written text as well (a reply streams in): an unclosed ``` fence shows as a code block to the end.

const ESCAPES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

const SAFE_PROTOCOLS = new Set(['http:', 'https:', 'mailto:']);

// The URL itself when it is absolute and http(s)/mailto, else null (javascript:, data:, relative paths, junk).
export function safeHref(url) {
  try {
    const parsed = new URL(url);
    return SAFE_PROTOCOLS.has(parsed.protocol) ? parsed.href : null;
  } catch {
    return null;
  }
}

// Bold and italic over text that is already escaped (so the captured groups hold no markup of their own).
function emphasis(escaped) {
  return escaped
    .replace(/\*\*(?=\S)([^*]*?\S)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^*\w])\*(?=\S)([^*\n]*?\S)\*(?![*\w])/g, '$1<em>$2</em>')
    .replace(/(^|[^_\w])_(?=\S)([^_\n]*?\S)_(?![_\w])/g, '$1<em>$2</em>');
}

const LINK = /\[([^\]\n]+)\]\(([^()\s]+)\)/g;

function linksAndEmphasis(raw) {
  let out = '';
  let last = 0;
  for (const m of raw.matchAll(LINK)) {
    out += emphasis(escapeHtml(raw.slice(last, m.index)));
    const href = safeHref(m[2]);
    out += href
      ? `<a href="${escapeHtml(href)}" target="_blank" rel="noopener noreferrer nofollow">${emphasis(escapeHtml(m[1]))}</a>`
      : emphasis(escapeHtml(m[0]));
    last = m.index + m[0].length;
  }
  return out + emphasis(escapeHtml(raw.slice(last)));
}

// One line's inline markup: code spans first (their content is shown literally), then links and emphasis.
export function renderInline(raw) {
  let out = '';
  let last = 0;
  for (const m of raw.matchAll(/`([^`\n]+)`/g)) {
    out += linksAndEmphasis(raw.slice(last, m.index));
    out += `<code>${escapeHtml(m[1])}</code>`;
    last = m.index + m[0].length;
  }
  return out + linksAndEmphasis(raw.slice(last));
}

const FENCE = /^\s*```\s*([\w+#.-]*)\s*$/;
const ITEM = /^\s*(?:([-*+])|(\d{1,9})[.)])\s+(.*)$/;

export function renderMarkdown(text) {
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  const html = [];
  let para = [];
  let list = null; // {ordered, start, items: [raw]}

  const flushPara = () => {
    if (para.length) html.push(`<p>${para.map(renderInline).join('<br>')}</p>`);
    para = [];
  };
  const flushList = () => {
    if (!list) return;
    const items = list.items.map((it) => `<li>${renderInline(it)}</li>`).join('');
    html.push(list.ordered ? `<ol${list.start !== 1 ? ` start="${list.start}"` : ''}>${items}</ol>` : `<ul>${items}</ul>`);
    list = null;
  };

  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(FENCE);
    if (fence) {
      flushPara();
      flushList();
      const body = [];
      i++;
      while (i < lines.length && !/^\s*```\s*$/.test(lines[i])) body.push(lines[i++]);
      const lang = fence[1] ? ` class="language-${escapeHtml(fence[1])}"` : '';
      html.push(`<pre><code${lang}>${escapeHtml(body.join('\n'))}</code></pre>`);
      continue;
    }
    const item = line.match(ITEM);
    if (item) {
      flushPara();
      const ordered = item[2] !== undefined;
      if (list && list.ordered !== ordered) flushList();
      if (!list) list = { ordered, start: ordered ? Number(item[2]) : 1, items: [] };
      list.items.push(item[3]);
      continue;
    }
    if (!line.trim()) {
      flushPara();
      flushList();
      continue;
    }
    if (list && /^\s{2,}\S/.test(line)) { // an indented line continues the last item
      list.items[list.items.length - 1] += ` ${line.trim()}`;
      continue;
    }
    flushList();
    para.push(line);
  }
  flushPara();
  flushList();
  return html.join('\n');
}
