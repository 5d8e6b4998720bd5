// The GPU engine in a real browser (Chromium, WebGPU on SwiftShader): every fixture model, teacher-forced along
// llama.cpp's greedy ids, scored by the fixtures' comparison protocol. F32 models run with the default f16 KV cache
// and are held to the f16-KV limits; Q8_0 models to their statistical f32-activation limits.
//
// The engine runs in the store tests' worker (web/tests/store.html: Pyodide + the engine wheel). Per step the worker
// sends back only what the protocol needs, computed there in pure Python from the raw logits: the argmax, the
// log-probabilities (over the whole vocabulary) of the 5 tokens the refs stored, the engine's own top 5, and for
// step 0 the max |engine - llama.cpp| over the full vocabulary (refs/<stem>.<i>.logits.f32, served by a route).
// The limits are then applied by diskformer/reference/protocol.py itself (tests/browser/check_protocol.py), so no
// part of the protocol is rewritten here.
import { test, expect } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const REFS = join(REPO, '..', 'shared', 'fixtures', 'refs');
const PYTHON = join(REPO, '.venv', 'bin', 'python');
const MODELS = [
  'micro-qwen3moe-f32', 'micro-qwen3moe', 'tiny-qwen3moe', 'qwen3vocab-qwen3moe',
  'micro-qwen35moe-f32', 'micro-gqa-qwen35moe-f32', 'micro-qwen35moe', 'micro-gqa-qwen35moe', 'tiny-qwen35moe',
  'wide-qwen35moe', 'qwen3vocab-qwen35moe',
];
// Which prompts run: by default all 5 of every model (~6 min on SwiftShader, 2 cores). DISKFORMER_ENGINE_PROMPTS=quick
// runs prompts 0 and 1 only of the 16 MB models (tiny-*: every token reads all weights; qwen3vocab-*: a 152k
// vocabulary), ~3 min, for quick local runs; =0,1 runs a given subset of every model.
const PROMPT_CHOICE = process.env.DISKFORMER_ENGINE_PROMPTS || 'all';
function promptsOf(stem) {
  if (PROMPT_CHOICE === 'all') return [0, 1, 2, 3, 4];
  if (PROMPT_CHOICE === 'quick') return /^(tiny|qwen3vocab)-/.test(stem) ? [0, 1] : [0, 1, 2, 3, 4];
  return PROMPT_CHOICE.split(',').map(Number);
}

const SETUP = `
import array, heapq, json, math, time
import js
from py_engine.engine.decoder import Decoder
from py_engine.gpu.device import open_gpu
from py_engine.gpu.pipelines import Pipelines

async def fetch_bytes(url):
    r = await js.fetch(url)
    if not r.ok:
        raise RuntimeError(f"GET {url}: HTTP {r.status}")
    return (await r.arrayBuffer()).to_bytes()

async def gpu_pipes():
    global GPU, PIPES
    if "GPU" not in globals():
        GPU = await open_gpu()
        PIPES = Pipelines(GPU)
    return GPU, PIPES

def step_record(logits, ref_ids):
    m = max(logits)
    lse = m + math.log(math.fsum(math.exp(v - m) for v in logits))
    best = heapq.nlargest(5, range(len(logits)), key=logits.__getitem__)  # ties: the lower id first
    return {"argmax": best[0], "lp": [float(logits[i]) - lse for i in ref_ids],
            "top": [[i, float(logits[i]) - lse] for i in best]}

async def run_model(stem, prompts, kv="f16"):
    gpu, pipes = await gpu_pipes()
    path = f"/tmp/{stem}.gguf"
    with open(path, "wb") as f:
        f.write(await fetch_bytes(f"/models/{stem}.gguf"))
    t0 = time.perf_counter()
    dec = await Decoder.open(path, gpu, pipes, kv_format=kv)
    load_ms = (time.perf_counter() - t0) * 1e3
    out = []
    t1 = time.perf_counter()
    try:
        for p in prompts:
            ref0 = array.array("f")
            ref0.frombytes(await fetch_bytes(f"/test-refs/{stem}.{p['index']}.logits.f32"))
            dec.reset()
            dec.feed(p["ids"][:-1])
            steps, row = [], await dec.step(p["ids"][-1])
            if len(ref0) != len(row):
                raise ValueError(f"{stem}: step-0 refs have {len(ref0)} logits, the engine {len(row)}")
            full = max(abs(a - b) for a, b in zip(row, ref0))
            steps.append(step_record(row, p["ref_ids"][0]))
            for s, tok in enumerate(p["teacher_force"]):
                steps.append(step_record(await dec.step(tok), p["ref_ids"][s + 1]))
            out.append({"index": p["index"], "steps": steps, "step0_full_max_abs": full})
    finally:
        dec.release()
    return {"prompts": out, "load_ms": load_ms, "run_ms": (time.perf_counter() - t1) * 1e3,
            "tokens": dec.stats["tokens"], "syncs": dec.stats["syncs"], "adapter": gpu.info.get("description")}
`;

function refsFor(stem) {
  const refs = JSON.parse(readFileSync(join(REFS, `${stem}.json`), 'utf8'));
  const chosen = promptsOf(stem);
  return refs.prompts.filter((p) => chosen.includes(p.index)).map((p) => ({
    index: p.index, ids: p.prompt_ids, teacher_force: p.greedy_ids.slice(0, -1),
    ref_ids: p.steps.map((s) => s.top.map((t) => t[0])),
  }));
}

test.describe('GPU engine against llama.cpp (fixtures protocol)', () => {
  test.describe.configure({ mode: 'serial' });
  let context;
  let page;
  const lines = [];
  const outDir = mkdtempSync(join(tmpdir(), 'engine-protocol-'));

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    await context.route('**/test-refs/*', (route) => {
      const name = decodeURIComponent(new URL(route.request().url()).pathname.split('/').pop());
      if (!/^[\w.-]+\.logits\.f32$/.test(name) || !existsSync(join(REFS, name))) return route.fulfill({ status: 404 });
      return route.fulfill({ status: 200, body: readFileSync(join(REFS, name)), contentType: 'application/octet-stream' });
    });
    page = await context.newPage();
    page.on('console', (m) => lines.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
    await page.goto('/tests/store.html');
    await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
    await page.evaluate(() => window.storeTest.boot());
    await page.evaluate((c) => window.storeTest.py(c), SETUP);
  });

  test.afterAll(async () => {
    await context?.close();
  });

  for (const stem of MODELS) {
    test(`${stem} passes the protocol teacher-forced (f16 KV cache)`, async () => {
      test.setTimeout(600_000);   // tiny-qwen35moe: ~4 min on 2 busy cores
      const prompts = refsFor(stem);
      const code = `json.dumps(await run_model(${JSON.stringify(stem)}, json.loads(${JSON.stringify(JSON.stringify(prompts))})))`;
      const result = JSON.parse(await page.evaluate((c) => window.storeTest.py(c), code));
      const file = join(outDir, `${stem}.json`);
      writeFileSync(file, JSON.stringify({ stem, kv: 'f16', ...result }));
      // check_protocol.py applies refs/tolerances.json with protocol.check_limits; it exits 1 on FAIL
      let report;
      try {
        report = execFileSync(PYTHON, [join(REPO, 'tests', 'browser', 'check_protocol.py'), file], { encoding: 'utf8' });
      } catch (err) {
        throw new Error(`${stem}: ${err.stdout || ''}${err.stderr || ''}\n${lines.slice(-20).join('\n')}`);
      }
      console.log(`${report.trim()} | load ${result.load_ms.toFixed(0)} ms, ${result.tokens} tokens in `
        + `${(result.run_ms / 1e3).toFixed(1)} s, ${result.syncs} syncs (${result.adapter})`);
      expect(result.prompts.length).toBe(prompts.length);
    });
  }

  test('a lost device is reported by the chat API as an error the page can show (code device-lost)', async () => {
    // The chat session (py_engine/app) loads a model, its WebGPU device is destroyed under it (what a driver reset
    // or an out-of-memory kill does), and the next request fails with DeviceLost naming the reason and the remedy.
    const [type, message] = await page.evaluate((c) => window.storeTest.py(c), `
import asyncio
from py_engine.app import requests as app
info = await app.SESSION.load({"kind": "served", "name": "micro-qwen3moe.gguf"}, {"path": "direct", "n_ctx": 64})
app.SESSION.gpu.device.destroy()
for _ in range(50):  # device.lost resolves on a later turn of the event loop
    if app.SESSION.lost is not None:
        break
    await asyncio.sleep(0.02)
try:
    await app.SESSION.generate([{"role": "user", "content": "hello"}], max_tokens=2)
    err = ["no error", ""]
except Exception as e:
    err = [type(e).__name__, str(e)]
err
`);
    expect(type, message).toBe('DeviceLost');
    expect(message).toMatch(/^the GPU device was lost \(destroyed: .*\); press Load to start the model again$/);
    // the worker turns a Python exception (Pyodide's PythonError: .type, the traceback as .message) into the
    // response the page reads; web/protocol.js gives DeviceLost the code the page reacts to
    const response = await page.evaluate(async ([t, m]) => {
      const { errorResponse } = await import('/protocol.js');
      const err = { type: t, message: `Traceback (most recent call last):\n  File "<exec>", line 1\n${t}: ${m}` };
      return errorResponse(7, err);
    }, [type, message]);
    expect(response).toMatchObject({ type: 'error', id: 7, code: 'device-lost', errorType: 'DeviceLost',
      message: `DeviceLost: ${message}` });
  });
});
