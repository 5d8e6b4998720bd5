// The model picker's options, what a choice means (its source, its stored folder, what a Load would download) and
// the "Stored in this browser" list. A model the host serves is listed once, as
// served, even when it is stored too (a Load then reads it from disk); only models the host does not serve are
// listed under "Stored in this browser" in the picker.

import { confirmButton, el, formatBytes } from './format.js';
import { PINNED_MODELS } from './pinned_models.js';

// The stored folder a name lands in (py_engine/app/store_load.py folder_name: '/' flattens to '__').
export const folderName = (name) => name.replaceAll('/', '__');

export function pinnedFor(kind) {
  return PINNED_MODELS.find((m) => `pinned:${m.id}` === kind) ?? null;
}

// The picker's option groups for a `models` answer.
export function modelOptions(models) {
  const served = models?.served ?? [];
  const groups = [];
  if (served.length) {
    const group = el('optgroup', { label: 'Served by this host' });
    for (const m of served) {
      const label = m.builtin ? `${m.name} (built-in demo, ${formatBytes(m.size)})` : `${m.name} (${formatBytes(m.size)})`;
      group.append(el('option', { value: `served:${m.name}` }, label));
    }
    groups.push(group);
  }
  if (PINNED_MODELS.length) {
    const group = el('optgroup', { label: 'Download (pinned hub files)' });
    for (const m of PINNED_MODELS) {
      group.append(el('option', { value: `pinned:${m.id}` }, `${m.label} (${m.size ? formatBytes(m.size) : m.size_note ?? 'size unknown'})`));
    }
    groups.push(group);
  }
  const servedFolders = new Set(served.map((m) => folderName(m.name)));
  const pinnedFolders = new Set(PINNED_MODELS.map((m) => folderName(m.file)));
  const stored = (models?.stored ?? []).filter((m) => m.complete && !servedFolders.has(m.name) && !pinnedFolders.has(m.name));
  if (stored.length) {
    const group = el('optgroup', { label: 'Stored in this browser' });
    for (const m of stored) group.append(el('option', { value: `stored:${m.name}` }, `${m.name} (${formatBytes(m.bytes)})`));
    groups.push(group);
  }
  const other = el('optgroup', { label: 'Other' });
  other.append(el('option', { value: 'url' }, 'From a URL…'), el('option', { value: 'file' }, 'Local GGUF file…'));
  groups.push(other);
  return groups;
}

// The stored models, each with its size and a Remove that asks first. onRemove(name) does the removal.
export function storedList(stored, onRemove) {
  const list = el('ul');
  for (const m of stored) {
    const total = m.source?.size;
    const partial = Number.isFinite(total) ? ` (download interrupted: ${formatBytes(m.bytes)} of ${formatBytes(total)}` +
      ' stored; Load it from the same source to resume)' : ' (incomplete: Load it from the same source to resume)';
    const li = el('li', { 'data-model': m.name, 'data-complete': String(!!m.complete) },
      `${m.name} — ${formatBytes(m.bytes)}${m.complete ? '' : partial} `);
    li.append(confirmButton({ label: 'Remove from disk', question: `Delete ${m.name} from this browser?`,
      confirmLabel: 'Remove', className: 'remove', onConfirm: () => onRemove(m.name) }));
    list.append(li);
  }
  return list;
}

// The stored folder a source would land in, if there is one.
export function storedFor(kind, models, file) {
  let name = null;
  if (kind.startsWith('served:')) name = kind.slice('served:'.length);
  else if (kind.startsWith('pinned:')) name = pinnedFor(kind)?.file;
  else if (kind === 'file' && file) name = file.name;
  if (!name) return null;
  return (models?.stored ?? []).find((m) => m.name === folderName(name)) ?? null;
}

// What a Load of the source would have to write to the store, when that is known (0: stored already).
export function bytesToStore(kind, models, file, loadPath) {
  if (loadPath !== 'store' || kind.startsWith('stored:')) return 0;
  const stored = storedFor(kind, models, file);
  if (stored?.complete) return 0;
  let size = null;
  if (kind.startsWith('served:')) size = models?.served?.find((m) => `served:${m.name}` === kind)?.size;
  else if (kind.startsWith('pinned:')) size = pinnedFor(kind)?.size;
  else if (kind === 'file') size = file?.size;
  return Number.isFinite(size) ? size - (stored?.bytes ?? 0) : null;
}

// A line under the picker: where a Load of this source will take its bytes from.
export function sourceNote(kind, models, file, loadPath) {
  if (loadPath !== 'store' || kind.startsWith('stored:')) return '';
  const stored = storedFor(kind, models, file);
  if (stored?.complete) return 'stored in this browser: Load reads it from disk, no download';
  if (stored) return 'a download of this model was interrupted: Load resumes it';
  return kind.startsWith('served:') || kind.startsWith('pinned:') ? 'Load stores it in this browser once, then reads it from disk' : '';
}

// The load request's source for the picker's choice.
export function sourceFor(kind, url, file) {
  if (kind === 'url') return { kind: 'url', url };
  if (kind === 'file') return { kind: 'file', file };
  if (kind.startsWith('stored:')) return { kind: 'stored', name: kind.slice('stored:'.length) };
  if (kind.startsWith('pinned:')) {
    const m = pinnedFor(kind);
    return m.sha256 ? { kind: 'url', url: m.url, sha256: m.sha256 } : { kind: 'url', url: m.url };
  }
  return { kind: 'served', name: kind.slice('served:'.length) };
}

// The model's name as the engine will report it (the served name, the stored folder, the file's name).
export function sourceName(source) {
  if (source.kind === 'served' || source.kind === 'stored') return source.name;
  if (source.kind === 'file') return source.file?.name ?? null;
  return null;
}
