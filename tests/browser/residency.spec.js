// Residency in a real browser (Chromium, WebGPU on SwiftShader, real OPFS), Pyodide in a worker:
//  (a) a fixture model ingested over HTTP Range into OPFS, its experts paged by the ExpertStreamer into a small
//      pool of real GPU buffers (split over several buffers) through the staging ring, records read by the reader
//      pool; after every demand and every token each resident slot is read back and compared with experts.bin.
//  (b) the row cache: a row table written to OPFS, lookups -> slots -> shaders/row_gather.wgsl over rows split
//      into planes -> read back; every word is checked, and an absent row comes back zero and counted.
// The fixture is served by a Playwright route with Range support, as in store.spec.js.
import { test, expect } from '@playwright/test';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const FIXTURE = 'micro-qwen3moe.gguf';
const FIXTURE_PATH = join(REPO, 'fixtures', 'models', FIXTURE);
const URL_PATH = `/test-models/${FIXTURE}`;

async function serveFixture(context) {
  if (!existsSync(FIXTURE_PATH)) {
    throw new Error(`${FIXTURE_PATH} is missing: run .venv/bin/python ../shared/fixtures/make_models.py fixtures/models`);
  }
  const data = readFileSync(FIXTURE_PATH);
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

const py = (page, code) => page.evaluate((c) => window.storeTest.py(c), code);

const SETUP = `
import asyncio, random, struct
import js
from py_engine.store.opfs import OPFSStorage, ingest_model
from py_engine.store.sources import HttpSource
from py_engine.store.reader_pool import ReaderPool
from py_engine.gpu.device import open_gpu
from py_engine.gpu.buffers import Readback, storage_buffer, write_buffer
from py_engine.gpu.commands import DispatchList, track_errors, check_errors
from py_engine.gpu.staging_ring import StagingRing
from py_engine.residency import ExpertStreamer, SlotPoolLayout, StreamerTuning
from py_engine.residency.row_table import RowTable, write_row_table
from py_engine.residency.row_cache import GpuRowCache
storage = OPFSStorage()
gpu = await open_gpu()
track_errors(gpu)
rb = Readback(gpu)
`;

const STREAMER = `
await storage.remove("resid")
man = await ingest_model(await HttpSource.open(js.URL.new("${URL_PATH}", js.location.href).href), "resid",
                         chunk_bytes=200_000)
ex = man["layout"]["experts"]
L, E, REC = len(ex["layers"]), ex["n_experts"], ex["record_size"]
experts_bin = await storage.sink("resid").read("experts.bin", 0, L * E * REC)
assert len(experts_bin) == L * E * REC, len(experts_bin)
SLOTS = 6
layout = SlotPoolLayout(REC, SLOTS, 2 * ((REC + 255) // 256 * 256))  # 2 slots per buffer: 3 buffers
bufs = [storage_buffer(gpu, layout.buffer_bytes(b), f"pool.{b}") for b in range(layout.buffer_count)]
ring = StagingRing(gpu, REC, 3)

class Uploader:
    def upload(self, slot, data):
        b, off = layout.locate(slot)
        return ring.upload(bufs[b], off, data)

readers = await ReaderPool.open("resid", n_workers=2)

class Reader:
    async def read_record(self, layer, expert):
        return await readers.read_js((layer * E + expert) * REC, REC)

xs = ExpertStreamer(layers=L, experts=E, slots=SLOTS, reader=Reader(), uploader=Uploader(), record_bytes=REC,
                    tuning=StreamerTuning(max_inflight=3))

def record(layer, expert):
    k = layer * E + expert
    return experts_bin[k * REC:(k + 1) * REC]

async def slot_holds(slot, layer, expert):
    b, off = layout.locate(slot)  # the readback copy is queued behind every upload submitted so far
    return await rb.read(bufs[b], off, REC) == record(layer, expert)

async def check_resident():
    bad, n = [], 0
    for s in range(SLOTS):
        k = xs.slot_key(s)
        if k is not None:
            n += 1
            if not await slot_holds(s, *k):
                bad.append([s, *k])
    return n, bad

rng = random.Random(5)
checked, bad = 0, []
for token in range(5):
    for layer in range(L):
        ids = rng.sample(range(E), 2)
        pending = xs.ensure(layer, ids)
        if layer + 1 < L:
            xs.prefetch(layer + 1, rng.sample(range(E), 3))
        slots = await pending
        for e, s in zip(ids, slots):  # pinned: nothing can move them while we look
            checked += 1
            if not await slot_holds(s, layer, e):
                bad.append(["demand", token, layer, e, s])
        xs.release(set(slots))
    xs.advance_token()
    n, wrong = await check_resident()
    checked += n
    bad += [["token", token] + w for w in wrong]
while xs.inflight:
    await asyncio.sleep(0.01)
n, wrong = await check_resident()
checked += n
bad += [["final"] + w for w in wrong]
await readers.close()
check_errors(gpu, "the streamer run")
st = xs.stats()
{"layers": L, "experts": E, "record": REC, "buffers": layout.buffer_count, "checked": checked, "bad": bad,
 "resident_final": n, "ring_uploads": ring.uploads,
 "stats": {k: st[k] for k in ("hits", "late_hits", "misses", "evictions", "prefetch_issued", "prefetch_used")}}
`;

const ROW_CACHE = `
ROWS, COLS, N = 300, 40, 12
ROW = COLS * 4
def row(r):
    return struct.pack(f"<{COLS}I", *[(r * 1000 + c) ^ 0x5A5A0000 for c in range(COLS)])
await storage.remove("rowtables")
sink = storage.sink("rowtables")
await write_row_table(sink, "emb", b"".join(row(r) for r in range(ROWS)), ROW, "u32")
sink.close()
table = await RowTable.open(storage.sink("rowtables"), "emb")
rc = GpuRowCache(gpu, table, slots=16, max_binding_bytes=5 * ROW)  # planes of 5, 5, 5 and 1 rows
ids_buf = storage_buffer(gpu, 4 * N, "ids")
out = storage_buffer(gpu, N * ROW, "gathered")
status = storage_buffer(gpu, 16, "gather_status")
write_buffer(gpu, status, 0, bytes(16))

async def gather(ids):
    write_buffer(gpu, ids_buf, 0, struct.pack(f"<{N}I", *ids))
    rc.flush_map()
    rc.gather_ops(DispatchList(), ids_buf, N, out, status).submit(gpu)
    return await rb.read(out, 0, N * ROW), struct.unpack("<I", await rb.read(status, 0, 4))[0]

rng = random.Random(11)
bad, words = [], 0
hot = rng.sample(range(ROWS), 10)
for it in range(10):
    ids = [rng.choice(hot) if rng.random() < 0.5 else rng.randrange(ROWS) for _ in range(N)]
    slots = await rc.cache.lookup(ids)
    got, misses = await gather(ids)
    rc.cache.release(set(slots))
    words += N * COLS
    if misses:
        bad.append(["misses", it, misses])
    for i, r in enumerate(ids):
        if got[i * ROW:(i + 1) * ROW] != row(r):
            bad.append(["row", it, i, r, slots[i]])
resident = [r for r in range(ROWS) if rc.cache.slot_of(r) >= 0]
absent = [r for r in range(ROWS) if rc.cache.slot_of(r) < 0][:3]
mixed = (resident * N)[:N - 3] + absent
got, misses = await gather(mixed)
for i, r in enumerate(mixed):
    want = row(r) if r in resident else bytes(ROW)
    if got[i * ROW:(i + 1) * ROW] != want:
        bad.append(["mixed", i, r])
check_errors(gpu, "the row cache run")
{"bad": bad, "words": words, "planes": len(rc.planes), "absent_counted": misses, "stats": rc.cache.stats,
 "reads": table.reads, "uploads": rc.uploads.uploads}
`;

test('expert streamer over real GPU buffers and the row cache gather, checked byte for byte', async ({ browser }, testInfo) => {
  test.setTimeout(150_000);
  const context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
  try {
    await serveFixture(context);
    const page = await context.newPage();
    const lines = [];
    page.on('console', (m) => lines.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
    await page.goto('/tests/residency.html');
    await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
    await page.evaluate(() => window.storeTest.boot());
    await py(page, SETUP + '"ready"');

    const a = await py(page, STREAMER);
    expect(a.bad, lines.join('\n')).toEqual([]);
    expect(a.buffers).toBe(3);
    expect([a.layers, a.experts]).toEqual([4, 8]);
    expect(a.checked).toBeGreaterThan(40 + 5 * 3);
    expect(a.resident_final).toBe(6);
    expect(a.stats.misses).toBeGreaterThan(6);
    expect(a.stats.evictions).toBeGreaterThan(0);
    expect(a.stats.prefetch_issued).toBeGreaterThan(0);
    expect(a.ring_uploads).toBe(a.stats.misses + a.stats.prefetch_issued);
    console.log(`streamer: ${JSON.stringify(a.stats)}, ${a.checked} slot readbacks`);

    const b = await py(page, ROW_CACHE);
    expect(b.bad, lines.join('\n')).toEqual([]);
    expect(b.planes).toBe(4);
    expect(b.words).toBe(10 * 12 * 40);
    expect(b.absent_counted).toBe(3);
    expect(b.stats.hits).toBeGreaterThan(0);
    expect(b.stats.evictions).toBeGreaterThan(0);
    expect(b.uploads).toBe(b.stats.misses);
    expect(b.reads).toBeLessThanOrEqual(b.stats.misses);
    console.log(`row cache: ${JSON.stringify(b.stats)}, ${b.reads} batched reads`);
  } finally {
    await context.close();
  }
});
