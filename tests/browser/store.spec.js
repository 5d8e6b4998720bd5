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
const FLIPPED_PATH = '/test-models/flipped.gguf';
const CHANGING_PATH = '/test-models/changing.gguf';

function fixtureBytes() {
  if (!existsSync(FIXTURE_PATH)) {
    throw new Error(`${FIXTURE_PATH} is missing: run .venv/bin/python ../shared/fixtures/make_models.py fixtures/models`);
  }
  return readFileSync(FIXTURE_PATH);
}

// Serve `bytes()` (read on every request, so a test can change the file between attempts) at `path` with HTTP
// Range and an ETag derived from the content, for the page and its workers.
async function serveBytes(context, path, bytes) {
  await context.route(`**${path}`, (route) => {
    const data = bytes();
    const etag = `"${createHash('sha256').update(data).digest('hex').slice(0, 16)}"`;
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

// The fixture with one byte flipped near its end (inside the last tensor's data).
function flipped(data) {
  const out = Buffer.from(data);
  out[out.length - 1000] ^= 0x5a;
  return out;
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
from py_engine.store.errors import QuotaExceeded, StoreQuotaError, StoreIntegrityError
import hashlib
URL = js.URL.new("${URL_PATH}", js.location.href).href
storage = OPFSStorage()

class Stop:
    at = None
    def is_set(self):
        return self.at is not None

class Watched:
    """A sink that reports every manifest it saves (a checkpoint) and can refuse writes past a byte budget, the
    way OPFS refuses them when the quota is spent (the real quota is far beyond a test's reach)."""
    def __init__(self, inner, on_manifest=None, budget=None):
        self.inner, self.on_manifest, self.budget = inner, on_manifest, budget
    def __getattr__(self, k):
        return getattr(self.inner, k)
    async def write(self, file, offset, data):
        if self.budget is not None:
            if len(data) > self.budget:
                raise QuotaExceeded(f"the browser refused to grow {file} (simulated quota)")
            self.budget -= len(data)
        await self.inner.write(file, offset, data)
    async def put(self, file, data):
        await self.inner.put(file, data)
        if file == "manifest.json" and self.on_manifest:
            self.on_manifest(json.loads(data))

async def manifest_of(name):
    raw = await storage.sink(name).get("manifest.json")
    return json.loads(raw) if raw is not None else None

async def store_files(name):
    """sha256 and size of every data file of a model's folder, read back from OPFS."""
    sink = storage.sink(name)
    out = {}
    for f, n in sorted((await sink.files()).items()):
        if f != "manifest.json":
            b = await sink.read(f, 0, n)
            out[f] = [len(b), hashlib.sha256(b).hexdigest()]
    return out
`;

async function reloadPage(page) {
  await page.reload(); // a new worker, a new Python: only OPFS remembers
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await page.evaluate(() => window.storeTest.boot());
}

test.describe('model store in OPFS', () => {
  test.describe.configure({ mode: 'serial' });
  const want = createHash('sha256').update(existsSync(FIXTURE_PATH) ? fixtureBytes() : Buffer.alloc(0)).digest('hex');
  let changed = false; // CHANGING_PATH serves the flipped copy once set
  let context; // one browser context for all tests: they share its OPFS, as tabs of one profile do

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    const data = fixtureBytes();
    await serveBytes(context, URL_PATH, () => data);
    await serveBytes(context, FLIPPED_PATH, () => flipped(data));
    await serveBytes(context, CHANGING_PATH, () => (changed ? flipped(data) : data));
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

  test("the token table's rows come from OPFS on demand, with the resident table's logits", async () => {
    // the store the first test left: the engine over it with the smallest pool, the table resident and then its
    // rows through a cache of 8 slots (20 distinct prompt ids: rows evicted and read from OPFS again)
    const { page, lines } = await openTestPage(context);
    const r = await py(page, SETUP + `
from py_engine.engine.store_decoder import StoreDecoder

async def run(rows):
    dec = await StoreDecoder.open_store(storage.sink("micro"), n_ctx=64, prefill_chunk=8, budget_bytes="min",
                                        embedding_rows=rows)
    try:
        out = [list(await dec.step_prompt([(i * 37 + 11) % 400 for i in range(20)]))]
        for t in (3, 7, 3):
            out.append(list(await dec.step(t)))
        return out, dec.stats["embedding"], dec.summary()["embedding_rows"]
    finally:
        dec.release()

base, _, _ = await run(0)
got, emb, cache = await run(8)
{"diff": max(abs(a - b) for ra, rb in zip(base, got) for a, b in zip(ra, rb)), "steps": len(got), "embedding": emb,
 "cache": cache}
`);
    expect(r.embedding.mode, lines.join('\n')).toBe('rows');
    expect(r.steps).toBe(4);
    expect(r.diff).toBeLessThanOrEqual(1e-6);
    expect(r.cache.misses).toBeGreaterThan(8);
    expect(r.cache.bytes_read).toBeGreaterThan(0);
  });

  test('an ingest aborted three times, reloaded each time, resumes to the same store as a clean one', async () => {
    const { page, lines } = await openTestPage(context);
    // Each attempt: abort when `stopWhen` says so, and report where the store stands.
    const attempt = (stopWhen) => py(page, SETUP + `
saves = []
stop = Stop()
start = ((await manifest_of("resumed")) or {"state": {"next_offset": 0}})["state"]["next_offset"]
def on_manifest(m):
    saves.append(m["state"]["next_offset"])
${stopWhen}
src = await HttpSource.open(URL)
sink = Watched(storage.sink("resumed"), on_manifest)
logs = []
try:
    await ingest(src, sink, chunk_bytes=100_000, checkpoint_bytes=200 << 10, progress=on_progress, abort=stop,
                 log=logs.append)
    outcome = "completed"
except IngestAborted as e:
    outcome = str(e)
sink.close()
m = await manifest_of("resumed")
ex = m["layout"]["experts"]
files = await storage.sink("resumed").files()
{"outcome": outcome, "start": start, "at": stop.at, "saves": saves, "logs": logs, "next": m["state"]["next_offset"],
 "complete": m["state"]["complete"], "checkpoints": [c["offset"] for c in m["state"]["checkpoints"]],
 "experts_bytes": files.get("experts.bin", 0), "record_size": ex["record_size"], "size": src.size}
`);
    await py(page, SETUP + 'await storage.remove("resumed") if "resumed" in await storage.models() else None');

    // 1: mid-way through the experts, between checkpoints.
    const one = await attempt(`
def on_progress(p):
    if p.done > 450_000 and stop.at is None:
        stop.at = p.done
`);
    expect(one.outcome, lines.join('\n')).toContain('stopped at byte');
    expect(one.next).toBe(one.at);
    expect(one.complete).toBe(false);
    expect(one.experts_bytes).toBeGreaterThan(0);
    expect(one.experts_bytes % one.record_size, 'stopped inside an expert record').not.toBe(0);

    // 2: right after the first checkpoint of the resumed run (the abort writes no further one).
    await reloadPage(page);
    const two = await attempt(`
def on_manifest(m):
    saves.append(m["state"]["next_offset"])
    if stop.at is None:
        stop.at = m["state"]["next_offset"]
def on_progress(p):
    pass
`);
    expect(two.outcome).toContain('stopped at byte');
    expect(two.logs.join('\n')).toContain(`resuming at byte ${one.next}`);
    expect(two.start).toBe(one.next);
    expect(two.at).toBeGreaterThan(one.next);
    expect(two.next).toBe(two.at);
    expect(two.checkpoints.at(-1)).toBe(two.at);
    expect(two.checkpoints.filter((c) => c === two.at).length).toBe(1);

    // 3: later, after at least one more checkpoint has passed, between checkpoints.
    await reloadPage(page);
    const three = await attempt(`
def on_progress(p):
    if p.done > start + 300_000 and stop.at is None:
        stop.at = p.done
`);
    expect(three.outcome).toContain('stopped at byte');
    expect(three.logs.join('\n')).toContain(`resuming at byte ${two.next}`);
    expect(three.next).toBe(three.at);
    expect(three.next).toBeLessThan(three.size);
    expect(three.saves.filter((o) => o > two.next && o < three.next).length, 'a checkpoint passed').toBeGreaterThan(0);

    await reloadPage(page);
    const last = await py(page, SETUP + `
logs = []
src = await HttpSource.open(URL)
sink = storage.sink("resumed")
man = await ingest(src, sink, log=logs.append)
sink.close()
clean = await manifest_of("micro")
{"logs": logs, "sha256": man["sha256"], "complete": is_complete(await manifest_of("resumed")),
 "same_checksums": man["checksums"] == clean["checksums"], "files": await store_files("resumed"),
 "clean_files": await store_files("micro"), "verify": (await verify(storage.sink("resumed"))).ok}
`);
    expect(last.logs.join('\n')).toContain(`resuming at byte ${three.next}`);
    expect(last.sha256).toBe(want);
    expect(last.complete).toBe(true);
    expect(last.same_checksums).toBe(true);
    expect(Object.keys(last.files).sort()).toEqual(['dense.bin', 'experts.bin', 'header.bin']);
    expect(last.files).toEqual(last.clean_files);
    expect(last.verify).toBe(true);
  });

  test('a source that changed between attempts restarts from scratch, visibly', async () => {
    const { page, lines } = await openTestPage(context);
    changed = false;
    const first = await py(page, SETUP + `
CHANGING = js.URL.new("${CHANGING_PATH}", js.location.href).href
if "changing" in await storage.models():
    await storage.remove("changing")
stop = Stop()
def on_progress(p):
    if p.done > 500_000 and stop.at is None:
        stop.at = p.done
src = await HttpSource.open(CHANGING)
sink = storage.sink("changing")
try:
    await ingest(src, sink, chunk_bytes=100_000, checkpoint_bytes=200 << 10, progress=on_progress, abort=stop)
    outcome = "completed"
except IngestAborted as e:
    outcome = str(e)
sink.close()
m = await manifest_of("changing")
{"outcome": outcome, "next": m["state"]["next_offset"], "etag": m["source"]["etag"]}
`);
    expect(first.outcome, lines.join('\n')).toContain('stopped at byte');
    changed = true; // the file on the server is replaced by one differing in a single byte (and so its ETag)
    try {
      await reloadPage(page);
      const second = await py(page, SETUP + `
CHANGING = js.URL.new("${CHANGING_PATH}", js.location.href).href
logs = []
src = await HttpSource.open(CHANGING)
sink = storage.sink("changing")
man = await ingest(src, sink, chunk_bytes=100_000, log=logs.append)
sink.close()
{"logs": logs, "etag": man["source"]["etag"], "sha256": man["sha256"], "first_ckpt": man["state"]["checkpoints"][0],
 "verify": (await verify(storage.sink("changing"))).ok, "files": await store_files("changing"),
 "clean_files": await store_files("micro")}
`);
      const log = second.logs.join('\n');
      expect(log).toContain('another source or failed: starting over');
      expect(log).not.toContain('resuming');
      expect(second.etag).not.toBe(first.etag);
      expect(second.sha256).toBe(createHash('sha256').update(flipped(fixtureBytes())).digest('hex'));
      expect(second.verify).toBe(true);
      // Only the one flipped byte separates it from the clean store: the old partial store did not survive.
      expect(second.files['header.bin']).toEqual(second.clean_files['header.bin']);
      expect(second.files).not.toEqual(second.clean_files);
    } finally {
      changed = false;
    }
  });

  test('a corrupt download with a pinned sha256 fails verification and is never complete', async () => {
    const { page } = await openTestPage(context);
    const r = await py(page, SETUP + `
FLIPPED = js.URL.new("${FLIPPED_PATH}", js.location.href).href
if "corrupt" in await storage.models():
    await storage.remove("corrupt")
sink = storage.sink("corrupt")
try:
    await ingest(await HttpSource.open(FLIPPED), sink, expected_sha256="${want}", chunk_bytes=100_000)
    err = None
except StoreIntegrityError as e:
    err = str(e)
sink.close()
m = await manifest_of("corrupt")
{"err": err, "complete": is_complete(m), "state_complete": m["state"]["complete"], "failed": m["state"]["failed"],
 "listed": [(x["name"], x["complete"]) for x in await list_models(storage) if x["name"] == "corrupt"]}
`);
    expect(r.err).toContain('the downloaded file is corrupt or not the pinned one');
    expect(r.err).toContain(`expected ${want}`);
    expect(r.err).toContain('not marked complete');
    expect(r.complete).toBe(false);
    expect(r.state_complete).toBe(false);
    expect(r.failed).toContain('sha256 of the source is');
    expect(r.listed).toEqual([['corrupt', false]]);
  });

  test('running out of storage space says so clearly, and the store resumes once space is free', async () => {
    const { page, lines } = await openTestPage(context);
    const r = await py(page, SETUP + `
if "quota" in await storage.models():
    await storage.remove("quota")
sink = Watched(storage.sink("quota"), budget=500_000)
try:
    await ingest(await HttpSource.open(URL), sink, chunk_bytes=100_000, checkpoint_bytes=200 << 10)
    err = None
except StoreQuotaError as e:
    err = str(e)
sink.close()
m = await manifest_of("quota")
{"err": err, "next": m["state"]["next_offset"], "complete": m["state"]["complete"]}
`);
    expect(r.err, lines.join('\n')).toMatch(/out of storage space: this model needs .* MiB.*resume/);
    expect(r.err).toContain('simulated quota');
    expect(r.next).toBeGreaterThan(0);
    expect(r.complete).toBe(false);
    await reloadPage(page);
    const after = await py(page, SETUP + `
logs = []
sink = storage.sink("quota")
man = await ingest(await HttpSource.open(URL), sink, log=logs.append)
sink.close()
{"logs": logs, "sha256": man["sha256"], "complete": is_complete(man), "files": await store_files("quota"),
 "clean_files": await store_files("micro")}
`);
    expect(after.logs.join('\n')).toContain(`resuming at byte ${r.next}`);
    expect(after.sha256).toBe(want);
    expect(after.complete).toBe(true);
    expect(after.files).toEqual(after.clean_files);
  });

  test('a picked File ingests too, and a second tab cannot take a model being ingested', async () => {
    const a = await openTestPage(context);
    const b = await openTestPage(context);
    const fromFile = await py(a.page, SETUP + `
blob = await (await js.fetch(URL)).blob()
picked = js.File.new([blob], "picked.gguf", js.Object.fromEntries([["lastModified", 1234]]))
src = BlobSource(picked)
sink = storage.sink("picked")
if "picked" in await storage.models():
    await storage.remove("picked")
man = await ingest(src, sink, chunk_bytes=100_000)
sink.close()
{"sha256": man["sha256"], "name": man["source"]["name"], "etag": man["source"]["etag"],
 "same_checksums": man["checksums"] == (await manifest_of("micro"))["checksums"],
 "files": await store_files("picked"), "clean_files": await store_files("micro")}
`);
    expect(fromFile.sha256).toBe(want);
    expect(fromFile.name).toBe('picked.gguf');
    expect(fromFile.same_checksums).toBe(true);
    expect(Object.keys(fromFile.files).length).toBe(3);
    expect(fromFile.files).toEqual(fromFile.clean_files); // byte for byte the store the download made

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
