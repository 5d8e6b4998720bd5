// The gate's browser side: headless Chromium opens the chat page, loads the model once through the page's
// window.diskformer.request, then asks each conversation greedily and reports the reply's token ids.
// Usage: node gate_driver.mjs JOB.json   (JOB: {site, timeout_s, source, options, conversations: [{messages,
// thinking, max_tokens}]}). The outcome is one JSON line on stdout: {status: 'ok' | 'error' | 'timeout', stage,
// message, results: [{token_ids, stop_reason, text, stats} | {error}], boot, load, log}. Progress goes to stderr.
import { chromium } from '@playwright/test';
import { readFileSync } from 'node:fs';

// Chromium must not call home; WebGPU itself needs only --enable-unsafe-webgpu (software: SwiftShader).
const ARGS = ['--enable-unsafe-webgpu', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--disable-quic', '--no-first-run', '--no-sandbox'];

const job = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const deadline = Date.now() + job.timeout_s * 1000;
const left = () => Math.max(1, deadline - Date.now());
const log = [];
const say = (msg) => process.stderr.write(`gate: ${msg}\n`);

class Timeout extends Error {}

// Every wait is bounded by what is left of the whole run's time.
function bounded(promise, what) {
  let timer;
  const expire = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Timeout(`the run's time (--timeout) ran out while ${what}`)), left());
  });
  return Promise.race([promise, expire]).finally(() => clearTimeout(timer));
}

const request = (page, type, payload) => page.evaluate(
  ([t, p]) => window.diskformer.request(t, p), [type, payload]);

const out = { status: 'ok', stage: null, message: '', results: [], boot: null, load: null, log };
let browser = null;
let stage = 'launch';
try {
  browser = await bounded(chromium.launch({
    headless: true, executablePath: process.env.DISKFORMER_CHROMIUM || '/usr/bin/chromium', args: ARGS,
  }), 'starting Chromium');
  const page = await browser.newPage();
  page.on('console', (m) => log.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => log.push(`[pageerror] ${e.message}`));

  stage = 'open';
  say(`opening ${job.site}`);
  await bounded(page.goto(job.site, { timeout: left() }), `opening ${job.site}`);
  stage = 'boot';
  await bounded(page.waitForFunction(
    () => ['ready', 'error', 'no-webgpu'].includes(window.diskformer?.state?.phase), null, { timeout: left() }),
  'waiting for the page to boot the engine');
  const state = await page.evaluate(() => window.diskformer.state);
  if (state.phase !== 'ready') {
    throw new Error(`the page did not become ready (phase ${state.phase}): ${state.error?.message ?? ''}`);
  }
  out.boot = { pyodide: state.info?.pyodideVersion, engine: state.info?.engineVersion,
    adapter: state.selftest?.adapter?.description || state.selftest?.adapter?.vendor || null };

  stage = 'load';
  say(`loading ${JSON.stringify(job.source)}`);
  out.load = await bounded(request(page, 'load', { source: job.source, options: job.options }), 'loading the model');

  stage = 'generate';
  for (const [i, conv] of job.conversations.entries()) {
    say(`conversation ${i}: generating ${conv.max_tokens} tokens greedily`);
    try {
      await bounded(request(page, 'reset', {}), 'starting a new chat');
      const r = await bounded(request(page, 'generate', {
        messages: conv.messages, thinking: conv.thinking, sampling: { temperature: 0 }, max_tokens: conv.max_tokens,
      }), `generating conversation ${i}`);
      out.results.push({ token_ids: r.token_ids ?? r.ids, stop_reason: r.stop_reason, text: r.text,
        thinking: r.thinking, stats: r.stats });
    } catch (err) {
      if (err instanceof Timeout) throw err;
      out.results.push({ error: String(err?.message ?? err).split('\n')[0].replace(/^page\.evaluate: /, '') });
    }
  }
} catch (err) {
  out.status = err instanceof Timeout ? 'timeout' : 'error';
  out.stage = stage;
  // Playwright appends a coloured call log; the first lines say what went wrong
  out.message = String(err?.message ?? err).replace(/\u001b\[[0-9;]*m/g, '').split('\nCall log')[0]
    .split('\n').slice(0, 6).join('\n').trim();
} finally {
  out.log = log.slice(-40);
  process.stdout.write(`${JSON.stringify(out)}\n`);
  await browser?.close().catch(() => {});
}
