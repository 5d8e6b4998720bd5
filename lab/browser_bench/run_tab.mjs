// The engine's bench in a headless Chromium tab, driven by Playwright (playwright-core; NODE_PATH may point at the
// node_modules holding it): started by lab/browser_bench/tab.py with the bench page's server already up.
//   node run_tab.mjs --url ORIGIN --chromium PATH --payload FILE [--profile DIR] [--flag-sets a,b] [--want gpu]
//                    [--timeout S]
// Chromium starts with one flag set after another (lab/browser_gpu/chromium_flags.mjs) until one gives the adapter
// asked for (--want: a vendor name, `gpu` for any non-fallback adapter, `any`); the page (/lab-bench/bench.html)
// then runs the bench in its worker with FILE's payload ({model_url, folder, args}). --profile keeps Chromium's
// profile (and so the tab's OPFS store) between runs. Prints the page's log on stderr, then one line
// `RESULT {json}`: {chromium_version, flag_set, flags, adapter, gpu, attempts, bench}.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { BASE_FLAGS, DEFAULT_ORDER, FLAG_SETS, flagSets, gpuFacts, wanted } from '../browser_gpu/chromium_flags.mjs';

const argv = process.argv.slice(2);
const option = (name, fallback) => { const i = argv.lastIndexOf(name); return i >= 0 ? argv[i + 1] : fallback; };

function playwright() {
  try {
    return createRequire(import.meta.url)('playwright-core');
  } catch {
    throw new Error('playwright-core is not installed here: run npm install, or set NODE_PATH to the node_modules '
      + 'folder that holds it');
  }
}

// Playwright starts the browser headless itself and talks to it over its own pipe
const launchFlags = (name) => [...BASE_FLAGS.filter((f) => f !== '--headless'), ...FLAG_SETS[name]];

async function attempt(chromium, setup, name) {
  const record = { name, flags: launchFlags(name) };
  const profile = setup.profile || fs.mkdtempSync(path.join(os.tmpdir(), 'diskformer-tab-bench-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: setup.chromium, headless: true, args: record.flags, timeout: 60_000 });
  try {
    const page = context.pages()[0] || await context.newPage();
    page.on('console', (m) => process.stderr.write(`[tab] ${m.text()}\n`));
    page.on('pageerror', (e) => process.stderr.write(`[tab error] ${e.message}\n`));
    // the browser target answers SystemInfo (a page's session does not); a persistent context may not offer it
    const browser = context.browser();
    const cdp = browser ? await browser.newBrowserCDPSession() : await context.newCDPSession(page);
    record.version = (await cdp.send('Browser.getVersion')).product;
    try {
      record.gpu = gpuFacts(await cdp.send('SystemInfo.getInfo'));
    } catch (error) {
      record.gpu = { error: error.message };
    }
    await page.goto(`${setup.url}/lab-bench/bench.html`);
    await page.waitForSelector('body[data-ready="true"]', { state: 'attached', timeout: 60_000 });
    record.probe = await page.evaluate(() => window.probeAdapter());
    if (wanted(record.probe, setup.want)) {
      const run = page.evaluate((payload) => window.runBench(payload), setup.payload);
      const timeout = new Promise((_, reject) => setTimeout(
        () => reject(new Error(`the tab's bench took more than ${setup.timeoutS} s`)), setup.timeoutS * 1000));
      record.bench = JSON.parse(await Promise.race([run, timeout]));
    }
  } catch (error) {
    record.error = error.message;
  } finally {
    await context.close().catch(() => {});
    if (!setup.profile) fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
  }
  return record;
}

function adapterLine(probe) {
  if (!probe) return 'no adapter answer';
  if (probe.error) return probe.error;
  const a = probe.adapter;
  return [a.vendor, a.architecture, a.device, a.description, a.isFallbackAdapter ? '(fallback)' : '']
    .filter(Boolean).join(' | ');
}

async function main() {
  const setup = {
    url: option('--url'), chromium: option('--chromium'), profile: option('--profile'), want: option('--want', 'gpu'),
    timeoutS: Number(option('--timeout', '3600')),
    payload: JSON.parse(fs.readFileSync(option('--payload'), 'utf8')),
  };
  if (!setup.url || !setup.chromium) throw new Error('give --url ORIGIN and --chromium PATH');
  const { chromium } = playwright();
  const attempts = [];
  let measured = null;
  for (const name of flagSets(option('--flag-sets', DEFAULT_ORDER))) {
    const record = await attempt(chromium, setup, name);
    attempts.push(record);
    process.stderr.write(`[${name}] ${record.version || ''}: ${record.error || adapterLine(record.probe)}\n`);
    if (record.bench || record.error && record.probe && wanted(record.probe, setup.want)) { measured = record; break; }
  }
  const summary = attempts.map(({ bench, ...rest }) => rest);
  const out = measured ? {
    chromium_version: measured.version, flag_set: measured.name, flags: measured.flags, adapter: measured.probe,
    gpu: measured.gpu, attempts: summary, bench: measured.bench ?? null, error: measured.error ?? null,
  } : { attempts: summary, bench: null,
    error: `no flag set gave the adapter asked for (--want ${setup.want}): ${attempts.map((a) => `${a.name}: ${a.error || adapterLine(a.probe)}`).join('; ')}` };
  process.stdout.write(`RESULT ${JSON.stringify(out)}\n`);
}

main().then(() => process.exit(0), (error) => { process.stderr.write(`${error.message}\n`); process.exit(2); });
