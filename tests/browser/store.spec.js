// The store in a real browser: a GGUF streamed over HTTP Range (and from a File) into OPFS by Pyodide in a
// worker, verified, aborted / reloaded / resumed byte-identically, locked against a second tab, and read back
// through the reader pool (web/reader_worker.js). The fixture GGUF is served by a Playwright route with Range
// support, the way any static host serves it (fixtures/models is made by tests/conftest.py / make_models.py).
import { test, expect } from '@playwright/test';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const FIXTURE = 'micro-qwen35moe.gguf';
const FIXTURE_PATH = join(REPO, 'fixtures', 'models', FIXTURE);
const URL_PATH = `/test-models/${FIXTURE}`;

function fixtureBytes() {
  if (!existsSync(FIXTURE_PATH)) {
    throw new Error(`${FIXTURE_PATH} is missing: run .venv/bin/python ../shared/fixtures/make_models.py fixtures/models`);
  }
  return readFileSync(FIXTURE_PATH);
}

// Serve the fixture at URL_PATH with HTTP Range and an ETag, for the page and its workers.
async function serveFixture(context) {
  const data = fixtureBytes();
  const etag = `"${createHash('sha256').update(data).digest('hex').slice(0, 16)}"`;
  await context.route(`**${URL_PATH}`, (route) => {
    const range = /bytes=(\d+)-(\d+)/.exec(route.request().headers().range || '');
    if (!range) return route.fulfill({ status: 200, body: data, headers: { ETag: etag, 'Accept-Ranges': 'bytes' } });
    const a = Number(range[1]);
    const b = Math.min(Number(range[2]), data.length - 1);
    return route.fulfill({
      status: 206,
      body: data.subarray(a, b + 1),
      headers: { ETag: etag, 'Content-Range': `bytes ${a}-${b}/${data.length}`, 'Content-Type': 'application/octet-stream' },
    });
  });
}

async function openTestPage(context) {
  const page = await context.newPage();
  const lines = [];
  page.on('console', (m) => lines.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
  await page.goto('/tests/store.html');
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await page.evaluate(() => window.storeTest.boot());
  return { page, lines };
}

const py = (page, code) => page.evaluate((c) => window.storeTest.py(c), code);

const SETUP = `
import asyncio, zlib, json
import js
from py_engine.store import ingest, verify, list_models, is_complete, IngestAborted
from py_engine.store.opfs import OPFSStorage, storage_report, model_lock, ModelLocked, ingest_model
from py_engine.store.sources import HttpSource, BlobSource
from py_engine.store.reader_pool import ReaderPool, measure
from py_engine.store.manifest import store_bytes
URL = js.URL.new("${URL_PATH}", js.location.href).href
storage = OPFSStorage()
`;

test.describe('model store in OPFS', () => {
  test.describe.configure({ mode: 'serial' });
  const want = createHash('sha256').update(existsSync(FIXTURE_PATH) ? fixtureBytes() : Buffer.alloc(0)).digest('hex');
  let context; // one browser context for all tests: they share its OPFS, as tabs of one profile do

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    await serveFixture(context);
  });

  test.afterAll(async () => {
    await context?.close();
  });

  test('ingests over HTTP Range, verifies, lists, and serves records through the reader pool', async () => {
    const { page, lines } = await openTestPage(context);
    await py(page, SETUP + 'for m in await storage.models(): await storage.remove(m)');
    const r = await py(page, `
src = await HttpSource.open(URL)
seen = []
man = await ingest_model(src, "micro", expected_sha256="${want}", chunk_bytes=100_000, checkpoint_bytes=200 << 10,
                         progress=lambda p: seen.append(p.to_dict()))
rep = await verify(storage.sink("micro"))
report = await storage_report(store_bytes(man))
ex = man["layout"]["experts"]
pool = await ReaderPool.open("micro", n_workers=3)
k = len(ex["planes"])
bad = []
for r in range(len(ex["layers"]) * ex["n_experts"]):
    rec = await pool.read(r * ex["record_size"], ex["record_size"])
    for j, (name, (off, n)) in enumerate(ex["planes"].items()):
        if zlib.crc32(rec[off:off + n]) != man["checksums"]["records"][r * k + j]:
            bad.append((r, name))
figures = await measure(pool, ex["record_size"], len(ex["layers"]) * ex["n_experts"], samples=16, bursts=4)
await pool.close()
{"sha256": man["sha256"], "complete": is_complete(man), "verify": rep.to_dict(), "bad": bad,
 "models": await list_models(storage), "report": report, "figures": figures, "progress": seen[-1],
 "n_progress": len(seen), "size": src.size}
`);
    expect(r.verify.ok, lines.join('\n')).toBe(true);
    expect(r.sha256).toBe(want);
    expect(r.complete).toBe(true);
    expect(r.bad).toEqual([]);
    expect(r.n_progress).toBeGreaterThan(5);
    expect(r.progress.done).toBe(r.size);
    expect(r.models.map((m) => [m.name, m.complete, m.architecture])).toEqual([['micro', true, 'qwen35moe']]);
    expect(r.models[0].bytes).toBeGreaterThan(r.size);
    expect(r.report.needed).toBeGreaterThan(r.size);
    expect(r.report.quota).toBeGreaterThan(r.report.needed);
    expect(r.report.fits).toBe(true);
    expect(typeof r.report.persisted).toBe('boolean');
    for (const k of ['sequential_mb_s', 'random_p50_ms', 'random_p90_ms', 'random_mb_s', 'burst8_p50_ms', 'burst8_mb_s']) {
      expect(r.figures[k], k).toBeGreaterThanOrEqual(0);
    }
    expect(r.figures.random_p90_ms).toBeGreaterThanOrEqual(r.figures.random_p50_ms);
    console.log(`store figures: ${JSON.stringify(r.figures)}; storage: ${JSON.stringify(r.report)}`);
  });

  test('an aborted ingest survives a reload and resumes to the same store', async () => {
    let { page, lines } = await openTestPage(context);
    const first = await py(page, SETUP + `
class Stop:
    at = None
    def is_set(self):
        return self.at is not None
stop = Stop()
def on_progress(p):
    if p.done > 600_000 and stop.at is None:
        stop.at = p.done
src = await HttpSource.open(URL)
sink = storage.sink("resumed")
try:
    await ingest(src, sink, chunk_bytes=100_000, checkpoint_bytes=200 << 10, progress=on_progress, abort=stop)
    outcome = "completed"
except IngestAborted as e:
    outcome = str(e)
sink.close()
m = json.loads(await storage.sink("resumed").get("manifest.json"))
{"outcome": outcome, "next": m["state"]["next_offset"], "complete": m["state"]["complete"], "at": stop.at}
`);
    expect(first.outcome, lines.join('\n')).toContain('stopped at byte');
    expect(first.next).toBe(first.at);
    expect(first.complete).toBe(false);

    await page.reload(); // a new worker, a new Python: only OPFS remembers
    await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
    await page.evaluate(() => window.storeTest.boot());
    const second = await py(page, SETUP + `
logs = []
src = await HttpSource.open(URL)
sink = storage.sink("resumed")
man = await ingest(src, sink, log=logs.append)
sink.close()
clean = json.loads(await storage.sink("micro").get("manifest.json"))
files = {}
sizes = await storage.sink("resumed").files()
for name in ("header.bin", "dense.bin", "experts.bin"):
    a = await storage.sink("resumed").read(name, 0, sizes[name])
    b = await storage.sink("micro").read(name, 0, sizes[name] + 1)
    files[name] = [len(a), a == b]
{"logs": logs, "sha256": man["sha256"], "same_checksums": man["checksums"] == clean["checksums"],
 "files": files, "verify": (await verify(storage.sink("resumed"))).ok}
`);
    expect(second.logs.join('\n')).toContain(`resuming at byte ${first.next}`);
    expect(second.sha256).toBe(want);
    expect(second.same_checksums).toBe(true);
    for (const [name, [n, same]] of Object.entries(second.files)) {
      expect(n, name).toBeGreaterThan(0);
      expect(same, `${name} identical to the clean ingest`).toBe(true);
    }
    expect(second.verify).toBe(true);
  });

  test('a picked File ingests too, and a second tab cannot take a model being ingested', async () => {
    const a = await openTestPage(context);
    const b = await openTestPage(context);
    const fromFile = await py(a.page, SETUP + `
blob = await (await js.fetch(URL)).blob()
picked = js.File.new([blob], "picked.gguf", js.Object.fromEntries([["lastModified", 1234]]))
src = BlobSource(picked)
sink = storage.sink("picked")
man = await ingest(src, sink, chunk_bytes=100_000)
sink.close()
{"sha256": man["sha256"], "name": man["source"]["name"], "etag": man["source"]["etag"]}
`);
    expect(fromFile.sha256).toBe(want);
    expect(fromFile.name).toBe('picked.gguf');

    // Tab A holds the lock of model "busy" for a while; tab B's attempt fails at once with a clear message.
    await py(a.page, SETUP + `
held = asyncio.Event()
async def hold():
    async with model_lock("busy"):
        held.set()
        await asyncio.sleep(3)
task = asyncio.ensure_future(hold())
await held.wait()
`);
    const other = await py(b.page, SETUP + `
try:
    async with model_lock("busy"):
        msg = "acquired"
except ModelLocked as e:
    msg = str(e)
msg
`);
    expect(other).toContain('is being downloaded in another tab');
    const refused = await py(b.page, `
try:
    await ingest_model(await HttpSource.open(URL), "busy")
    msg = "ingested"
except ModelLocked as e:
    msg = str(e)
msg
`);
    expect(refused).toContain('is being downloaded in another tab');
    await py(a.page, 'await task');
    const after = await py(b.page, `
async with model_lock("busy"):
    msg = "acquired"
msg
`);
    expect(after).toBe('acquired');
  });
});
