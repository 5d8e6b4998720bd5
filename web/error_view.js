// Errors as a user reads them: the engine's first paragraph (what happened and what to do), without Python class
// paths or raw bytes; everything technical (the rest of the message, the traceback) in a collapsed "details".

import { el } from './format.js';

// Errors whose first paragraph is written for the user (py_engine/app/errors.py, the page's own checks).
const READABLE = new Set(['BadModelFile', 'BudgetTooSmall', 'DeviceLost', 'Busy', 'NoModelLoaded', 'StorageQuota',
  'ModelLocked', 'ModelInUse', 'ContextFullError', 'LocalFile']);

// "py_engine.app.errors.BadModelFile: text" or "BadModelFile: text" -> "text"
function withoutClass(text, errorType) {
  const m = /^([A-Za-z_][\w.]*)(?:: |:$)/.exec(text);
  if (m && (m[1] === errorType || m[1].endsWith(`.${errorType}`) || /^[a-z_]+\.[\w.]+$/.test(m[1]))) {
    return text.slice(m[0].length);
  }
  return text;
}

// Byte strings and dotted module paths read as noise to a user: they belong in the details.
const NOISE = /\bb'[^']*'|\bb"[^"]*"|\(hex [0-9a-f ]+\)|\b(?:py_engine|diskformer)\.[\w.]+/;

export function describeError(err) {
  const errorType = err?.errorType ?? err?.name ?? 'Error';
  const raw = String(err?.message ?? err ?? 'unknown error').trim();
  const text = withoutClass(raw, errorType);
  const cut = text.indexOf('\n\n');
  let summary = (cut < 0 ? text : text.slice(0, cut)).trim();
  const details = [cut < 0 ? '' : text.slice(cut + 2).trim()];
  if (!READABLE.has(errorType) && (NOISE.test(summary) || summary.length > 240 || summary.includes('\n'))) {
    details.unshift(summary);
    summary = 'something went wrong in the engine: try again, or reload the page (the details say what failed)';
  } else if (NOISE.test(summary)) {
    details.unshift(summary);
    summary = summary.replace(new RegExp(NOISE.source, 'g'), '').replace(/\s{2,}/g, ' ').trim();
  }
  if (err?.workerStack) details.push(err.workerStack);
  return { summary, details: details.filter(Boolean).join('\n\n'), errorType };
}

export function renderError(box, err, where = '') {
  const { summary, details } = describeError(err);
  box.replaceChildren(el('strong', {}, where ? `${where}: ` : ''), el('span', { class: 'error-summary' }, summary));
  if (details) {
    const d = el('details', { class: 'error-details' });
    d.append(el('summary', {}, 'details'), el('pre', {}, details));
    box.append(d);
  }
  box.hidden = false;
  return summary;
}
