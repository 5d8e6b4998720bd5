// The figures of a reply: the live line while it streams (tokens so far and tokens/s), the stats line after it,
// and the per-message line under each answer (prefill, decode, first token, hit rate, bytes read,
// the CPU's share of misses and the read and upload rates).

import { formatBytes, formatRate, formatSeconds } from './format.js';

// Live tokens/s from the delta events' n_cached (the tokens in the model's context): the first delta comes right
// after the prefill, so the rate is over the decode only.
export class LiveRate {
  constructor(started = performance.now()) {
    this.started = started;
    this.first = null; // {at, n_cached} of the first delta
    this.last = null;
    this.pieces = 0;
  }

  add(ev, now = performance.now()) {
    this.pieces += 1;
    if (!Number.isFinite(ev.n_cached)) return;
    if (!this.first) this.first = { at: now, n_cached: ev.n_cached };
    this.last = { at: now, n_cached: ev.n_cached };
  }

  get tokens() {
    return this.first ? this.last.n_cached - this.first.n_cached + 1 : 0;
  }

  get tokensPerSecond() {
    if (!this.first || this.last.at <= this.first.at) return NaN;
    return (this.last.n_cached - this.first.n_cached) / ((this.last.at - this.first.at) / 1000);
  }

  text(now = performance.now()) {
    const parts = [`generating… ${this.tokens} tokens in ${formatSeconds((now - this.started) / 1000)}`,
      formatRate(this.tokensPerSecond)];
    if (this.first) parts.push(`first token ${formatSeconds((this.first.at - this.started) / 1000)}`);
    return parts.join(' · ');
  }
}

function hitRate(s) {
  if (Number.isFinite(s.expert_hit_rate)) return `${(100 * s.expert_hit_rate).toFixed(1)} % hit`;
  return s.experts === 'resident' ? 'all resident' : '—';
}

// The miss path's figures when experts stream: the share of misses computed on the CPU (with the CPU tier on) and
// the rates of the record reads and the GPU uploads; and the token rows' hit rate when they come on demand.
function streamedParts(s) {
  const parts = [];
  if (Number.isFinite(s.cpu_share_of_misses)) parts.push(`CPU ${(100 * s.cpu_share_of_misses).toFixed(1)} % of misses`);
  if (Number.isFinite(s.read_bytes_per_s)) parts.push(`read ${formatBytes(s.read_bytes_per_s)}/s`);
  if (Number.isFinite(s.upload_bytes_per_s)) parts.push(`upload ${formatBytes(s.upload_bytes_per_s)}/s`);
  // the token table's rows on demand (a tight GPU budget): how often a token's row was already in the cache
  if (Number.isFinite(s.embedding_row_hit_rate)) {
    parts.push(`token rows ${(100 * s.embedding_row_hit_rate).toFixed(1)} % hit`);
  }
  return parts;
}

// The stats line under the chat: the last reply on the loaded model.
export function meterText(s) {
  if (!s) return '';
  return [
    `decode ${Number.isFinite(s.decode_tokens_per_s) ? s.decode_tokens_per_s.toFixed(1) : '—'} tok/s`,
    `first token ${formatSeconds(s.first_token_seconds)}`,
    `prefill ${s.prefilled_tokens} tok${s.reused_tokens ? ` (${s.reused_tokens} reused)` : ''}`,
    `GPU ${formatBytes(s.gpu_bytes)}`,
    `experts ${hitRate(s)}`,
    `read/token ${Number.isFinite(s.bytes_read_per_token) ? formatBytes(s.bytes_read_per_token) : '—'}`,
    ...streamedParts(s),
    `context ${s.n_cached}/${s.n_ctx}`,
  ].join(' · ');
}

// One answer's own figures, kept with it in the conversation store.
export function messageStatsText(s) {
  if (!s) return '';
  const prefillRate = Number.isFinite(s.prefill_tokens_per_s) ? ` at ${s.prefill_tokens_per_s.toFixed(1)} tok/s` : '';
  const parts = [
    `prefill ${s.prefilled_tokens} tok${prefillRate}${s.reused_tokens ? ` (${s.reused_tokens} reused)` : ''}`,
    `decode ${s.generated_tokens} tok at ${formatRate(s.decode_tokens_per_s)}`,
    `first token ${formatSeconds(s.first_token_seconds)}`,
    `experts ${hitRate(s)}`,
  ];
  if (Number.isFinite(s.bytes_read_per_token)) parts.push(`${formatBytes(s.bytes_read_per_token)} read/token`);
  parts.push(...streamedParts(s));
  return parts.join(' · ');
}
