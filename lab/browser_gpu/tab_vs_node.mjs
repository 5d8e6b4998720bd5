// WebGPU's basic costs in a headless Chromium tab beside Node + Dawn, on the same machine in the same run.
//   node tab_vs_node.mjs --chromium PATH [--flag-sets vulkan,vulkan-min,default] [--want nvidia|gpu|any]
//                        [--small] [--out FILE] [--logs DIR]
//   node tab_vs_node.mjs --node-only [--small]          (Node + Dawn alone: one JSON line; DAWN_NODE=path/dawn.node)
// Chromium is started once per flag set (DevTools protocol over --remote-debugging-pipe, no other dependency) until
// one gives the adapter asked for (--want: a vendor name, `gpu` for any non-fallback adapter, `any` for the first
// adapter at all); the page (bench.html + webgpu_costs.mjs, served from this folder on 127.0.0.1) runs the same
// measurements there as Node runs here. Prints each attempt's adapter, then a table tab | Node | tab/Node; --out
// writes everything as JSON (every attempt's flags, GPU facts, adapter and the end of Chromium's log).
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { measureCosts } from './webgpu_costs.mjs';
import { BASE_FLAGS, DEFAULT_ORDER, FLAG_SETS, flagSets, gpuFacts, wanted } from './chromium_flags.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
// the last occurrence wins, so a wrapper's defaults can be overridden by options after them
const option = (name, fallback) => { const i = argv.lastIndexOf(name); return i >= 0 ? argv[i + 1] : fallback; };
const small = argv.includes('--small');

// ---- Node + Dawn ------------------------------------------------------------------------------------------------

async function nodeOnly() {
  const require = createRequire(import.meta.url);
  const dawn = require(process.env.DAWN_NODE || 'webgpu');
  Object.assign(globalThis, dawn.globals);
  const result = await measureCosts(dawn.create([]), { small });
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
}

function runNode() {
  const script = fileURLToPath(import.meta.url);
  const out = execFileSync(process.execPath, [script, '--node-only', ...(small ? ['--small'] : [])],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 300_000 });
  return JSON.parse(out.trim().split('\n').pop());
}

// ---- the page's server ------------------------------------------------------------------------------------------

function serve() {
  const types = { '.html': 'text/html', '.mjs': 'text/javascript' };
  const server = http.createServer((req, res) => {
    const name = path.basename(new URL(req.url, 'http://x').pathname) || 'bench.html';
    const file = path.join(HERE, name);
    if (!types[path.extname(name)] || !fs.existsSync(file)) { res.writeHead(404); res.end(); return; }
    // cross-origin isolation: the tab's performance.now() then resolves 5 µs instead of 100 µs
    res.writeHead(200, { 'Content-Type': types[path.extname(name)], 'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp', 'Cache-Control': 'no-store' });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// ---- Chromium over the DevTools protocol (a pipe: fd 3 in, fd 4 out, messages ended by a NUL byte) -------------

class DevTools {
  constructor(input, output) {
    this.input = input; this.nextId = 1; this.waiting = new Map(); this.pending = Buffer.alloc(0); this.console = [];
    output.on('data', (chunk) => {
      this.pending = Buffer.concat([this.pending, chunk]);
      let end;
      while ((end = this.pending.indexOf(0)) >= 0) {
        const message = JSON.parse(this.pending.subarray(0, end).toString('utf8'));
        this.pending = this.pending.subarray(end + 1);
        this.receive(message);
      }
    });
  }

  receive(message) {
    const call = this.waiting.get(message.id);
    if (call) {
      this.waiting.delete(message.id); clearTimeout(call.timer);
      if (message.error) call.reject(new Error(`${call.method}: ${message.error.message}`));
      else call.resolve(message.result);
    } else if (message.method === 'Runtime.consoleAPICalled') {
      this.console.push(message.params.args.map((a) => a.value ?? a.description).join(' '));
    } else if (message.method === 'Runtime.exceptionThrown') {
      this.console.push(`exception: ${message.params.exceptionDetails.exception?.description}`);
    }
  }

  send(method, params = {}, sessionId = undefined, timeoutMs = 60_000) {
    const id = this.nextId++;
    this.input.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${method}: no answer in ${timeoutMs / 1000} s`));
      }, timeoutMs);
      this.waiting.set(id, { resolve, reject, method, timer });
    });
  }

  closed(why) {
    for (const call of this.waiting.values()) {
      clearTimeout(call.timer);
      call.reject(new Error(`${call.method}: ${why}`));
    }
    this.waiting.clear();
  }
}

async function evaluate(devtools, sessionId, expression, timeoutMs) {
  const answer = await devtools.send('Runtime.evaluate', { expression, awaitPromise: true, returnByValue: true },
    sessionId, timeoutMs);
  if (answer.exceptionDetails) {
    throw new Error(answer.exceptionDetails.exception?.description || answer.exceptionDetails.text);
  }
  return answer.result.value;
}

// the page's module has loaded; until the page has an execution context at all, evaluate is refused, so ask again
async function pageReady(devtools, sessionId) {
  const ready = `new Promise((ok) => {
    const wait = () => window.benchReady ? ok(true) : setTimeout(wait, 50); wait(); })`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      return await evaluate(devtools, sessionId, ready, 30_000);
    } catch (error) {
      if (Date.now() > deadline || !/execution context/i.test(error.message)) throw error;
      await new Promise((ok) => setTimeout(ok, 100));
    }
  }
}

const logTail = (file, lines = 40) => fs.existsSync(file)
  ? fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).slice(-lines) : [];

// a straggling child may still write into the profile for a moment; a leftover temp folder is not a failure
function removeProfile(profile) {
  try {
    fs.rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
  } catch (error) {
    console.warn(`could not remove the browser profile ${profile}: ${error.code || error.message}`);
  }
}

// one Chromium start with one flag set: version, GPU facts, the adapter; the measurements too when `measure` says so
async function attempt(setup, name, flags, measure) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'webgpu-costs-profile-'));
  const logFile = path.join(setup.logs, `chromium-${name}.log`);
  const log = fs.openSync(logFile, 'w');
  const args = [...BASE_FLAGS, ...flags, `--user-data-dir=${profile}`, '--remote-debugging-pipe', 'about:blank'];
  // its own process group, so that the GPU, zygote and crash-handler children die with it
  const child = spawn(setup.chromium, args, { stdio: ['ignore', log, log, 'pipe', 'pipe'], detached: true });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const devtools = new DevTools(child.stdio[3], child.stdio[4]);
  child.on('exit', (code, signal) => devtools.closed(`Chromium exited (${code ?? signal}); its log: ${logFile}`));
  child.on('error', (error) => devtools.closed(`Chromium did not start: ${error.message}`));
  const record = { name, flags: [...BASE_FLAGS, ...flags] };
  try {
    record.version = (await devtools.send('Browser.getVersion')).product;
    try {
      record.gpu = gpuFacts(await devtools.send('SystemInfo.getInfo', {}, undefined, 30_000));
    } catch (error) {
      record.gpu = { error: error.message };
    }
    const { targetId } = await devtools.send('Target.createTarget', { url: setup.url });
    const { sessionId } = await devtools.send('Target.attachToTarget', { targetId, flatten: true });
    await devtools.send('Runtime.enable', {}, sessionId);
    await pageReady(devtools, sessionId);
    record.probe = await evaluate(devtools, sessionId, 'window.probeAdapter()', 60_000);
    if (measure(record.probe)) {
      const call = `window.measureCosts(${JSON.stringify({ small })})`;
      record.result = await evaluate(devtools, sessionId, call, 180_000);
    }
  } catch (error) {
    record.error = error.message;
  } finally {
    devtools.console.length && (record.console = devtools.console.slice(-20));
    try { await devtools.send('Browser.close', {}, undefined, 5_000); } catch { /* already gone */ }
    try { process.kill(-child.pid, 'SIGKILL'); } catch { child.kill('SIGKILL'); }
    await exited;
    fs.closeSync(log);
    removeProfile(profile);
    record.log_tail = logTail(logFile);
  }
  return record;
}

function describe(probe) {
  if (!probe) return 'no adapter answer';
  if (probe.error) return probe.error;
  const a = probe.adapter;
  return [a.vendor, a.architecture, a.device, a.description, a.isFallbackAdapter ? '(fallback)' : '']
    .filter(Boolean).join(' | ');
}

function table(tab, node) {
  const rows = ['| figure | tab | Node | tab/Node |', '|---|---:|---:|---:|'];
  const ratios = {};
  for (const [key, value] of Object.entries(tab)) {
    if (typeof value !== 'number' || key.endsWith('_bytes')) continue;
    const other = node?.[key];
    const ratio = typeof other === 'number' && other !== 0 ? value / other : null;
    if (ratio !== null) ratios[key] = Number(ratio.toFixed(2));
    rows.push(`| ${key} | ${value} | ${other ?? '-'} | ${ratio === null ? '-' : ratio.toFixed(2)} |`);
  }
  return { text: rows.join('\n'), ratios };
}

async function main() {
  const chromium = option('--chromium');
  if (!chromium) throw new Error('give the browser to start: --chromium path/to/chromium-headless-shell');
  const logs = option('--logs', fs.mkdtempSync(path.join(os.tmpdir(), 'webgpu-costs-logs-')));
  fs.mkdirSync(logs, { recursive: true });
  const want = option('--want', 'gpu');
  const sets = flagSets(option('--flag-sets', DEFAULT_ORDER));

  const node = runNode();
  console.log(`Node + Dawn adapter: ${describe(node)}`);
  const server = await serve();
  const setup = { chromium, logs, url: `http://127.0.0.1:${server.address().port}/bench.html` };
  const attempts = [];
  let measured = null;
  for (const name of sets) {
    const record = await attempt(setup, name, FLAG_SETS[name], (probe) => wanted(probe, want));
    attempts.push(record);
    console.log(`[${name}] ${record.version || ''}: ${record.error || describe(record.probe)}`);
    if (record.result && !record.result.error) { measured = record; break; }
  }
  server.close();

  const report = { when: new Date().toISOString(), host: os.hostname(), cpus: os.cpus().length, want, node, attempts };
  if (measured) {
    const { text, ratios } = table(measured.result.figures, node.figures);
    Object.assign(report, { chromium_version: measured.version, flags: measured.flags, tab: measured.result, ratios });
    console.log(`\ntab: ${describe(measured.result)} (${measured.version}, flag set "${measured.name}")`);
    console.log(`Node: ${describe(node)}\n\n${text}\n`);
    console.log(`checks: tab ${JSON.stringify(measured.result.checks)}; Node ${JSON.stringify(node.checks)}`);
  } else {
    console.log(`\nno flag set gave the adapter asked for (--want ${want}); each attempt's log is in ${logs}`);
    for (const record of attempts) console.log(`--- ${record.name}\n${(record.log_tail || []).slice(-15).join('\n')}`);
  }
  const out = option('--out');
  if (out) fs.writeFileSync(out, JSON.stringify(report, null, 1));
  process.exit(measured ? 0 : 3);
}

if (argv.includes('--node-only')) await nodeOnly();
else await main();
