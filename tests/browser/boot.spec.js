// The engine boots offline: Pyodide in a module worker, micropip and the engine wheel from the local server,
// then a real WebGPU kernel (SwiftShader in headless Chromium) checked exactly.
import { test, expect, chromium } from '@playwright/test';

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

function isLocal(url) {
  const u = new URL(url);
  return ['data:', 'blob:', 'about:'].includes(u.protocol) || LOCAL_HOSTS.has(u.hostname);
}

// Abort every request that would leave this machine, for the page and its workers (context-level routing sees
// dedicated-worker requests in Chromium); record what was seen so the test can check the worker's loads went
// through this filter too.
async function guardNetwork(context) {
  const net = { seen: [], blocked: new Set() };
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (isLocal(url)) {
      net.seen.push(url);
      return route.continue();
    }
    net.blocked.add(url);
    return route.abort('blockedbyclient');
  });
  context.on('request', (request) => {
    if (!isLocal(request.url())) net.blocked.add(request.url());
  });
  return net;
}

function collectConsole(page) {
  const lines = [];
  page.on('console', (m) => lines.push(`[${m.type()}] ${m.text()}`));
  page.on('pageerror', (e) => lines.push(`[pageerror] ${e.message}`));
  return lines;
}

const settled = /^(ready|error|no-webgpu)$/;

// The kernel's expected results, computed independently of py_engine/boot.py (same inputs, plain JS numbers:
// every value is a half-integer far below 2^22, so f32 on the GPU must match exactly).
function expectedSelftest(n = 4096, a = 1.5, group = 256) {
  const out = Array.from({ length: n }, (_, i) => a * (i - n / 2) + (((i * 37) % 101) - 50));
  const partials = [];
  for (let g = 0; g < n; g += group) partials.push(out.slice(g, g + group).reduce((s, v) => s + v, 0));
  return { out, partials };
}

test.describe('engine worker with WebGPU', () => {
  test.describe.configure({ mode: 'serial' });
  let context;
  let page;
  let net;
  let consoleLines;

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    net = await guardNetwork(context);
    page = await context.newPage();
    consoleLines = collectConsole(page);
  });

  test.afterAll(async () => {
    await context?.close();
  });

  test('boots offline and passes the kernel check exactly', async () => {
    await page.goto('/');
    await expect(page.locator('body')).toHaveAttribute('data-phase', settled);
    const state = await page.evaluate(() => window.diskformer.state);
    expect(state.phase, `${JSON.stringify(state.error, null, 1)}\n${consoleLines.join('\n')}`).toBe('ready');

    // Boot facts: the wheel really came from this server, the page is cross-origin isolated.
    expect(state.info.crossOriginIsolated).toBe(true);
    expect(state.info.pythonVersion).toMatch(/^3\.\d+\.\d+$/);
    expect(state.info.engineVersion).toBe('0.1.0');
    expect(state.info.wheel.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(state.info.wheel.bytes).toBeGreaterThan(1000);

    // The kernel: every output and every workgroup sum exact.
    const k = state.selftest.kernel;
    const want = expectedSelftest(k.n, k.a);
    expect([k.n, k.a, k.workgroups]).toEqual([4096, 1.5, 16]);
    expect(k.partial_sums).toEqual(want.partials);
    for (const [i, v] of Object.entries(k.samples)) expect(v, `y[${i}]`).toBe(want.out[Number(i)]);
    expect(k.output_mismatches).toBe(0);
    expect(k.partial_sum_mismatches).toBe(0);
    expect(k.ok).toBe(true);

    // Adapter facts: the device got the adapter's limits, nothing below WebGPU's defaults; no shader-f16 needed.
    const { adapter, limits, features } = state.selftest;
    expect(typeof adapter.isFallbackAdapter).toBe('boolean');
    expect(limits.maxStorageBufferBindingSize).toBeGreaterThanOrEqual(128 * 1024 * 1024);
    expect(limits.maxStorageBuffersPerShaderStage).toBeGreaterThanOrEqual(8);
    expect(Array.isArray(features)).toBe(true);

    // ... and the page shows them.
    const facts = page.locator('#adapter-facts');
    for (const row of ['vendor', 'architecture', 'description', 'fallback adapter', 'subgroup sizes', 'features',
      'maxStorageBufferBindingSize', 'maxBufferSize']) {
      await expect(facts.locator(`tr[data-fact="${row}"]`)).toBeVisible();
    }
    await expect(facts.locator('tr[data-fact="vendor"] td')).toHaveText(adapter.vendor || '—');
    await expect(page.locator('#kernel-result')).toHaveAttribute('data-ok', 'true');
    await expect(page.locator('#kernel-result')).toContainText('passed: 4096 outputs');
    await expect(page.locator('#status')).toHaveText('ready');
    await expect(page.locator('#notice')).toBeHidden();

    // Offline: nothing left the machine, and the worker's own loads did pass through the filter.
    expect([...net.blocked]).toEqual([]);
    const paths = net.seen.map((u) => new URL(u).pathname);
    for (const p of ['/worker.js', '/pyodide/pyodide.asm.wasm', '/pyodide/python_stdlib.zip',
      '/wheels/micropip-0.11.1-py3-none-any.whl', '/api/engine']) {
      expect(paths, `request for ${p}`).toContain(p);
    }
    expect(paths.some((p) => p.startsWith('/wheels/py_engine-'))).toBe(true);
  });

  test('a Python exception in the worker reaches the page as a readable error', async () => {
    const err = await page.evaluate(async () => {
      try {
        await window.diskformer.request('no_such_request', {});
        return null;
      } catch (e) {
        return { name: e.name, message: e.message, errorType: e.errorType, stack: e.workerStack };
      }
    });
    expect(err, 'the request should have failed').not.toBeNull();
    expect(err.errorType).toBe('ValueError');
    // the list also names the chat app's requests (py_engine/app/requests.py)
    expect(err.message).toMatch(/^ValueError: the engine has no request type 'no_such_request' \(it handles: boot, .*\bselftest\b.*\)$/);
    expect(err.stack).toContain('Traceback (most recent call last)');
    expect(err.stack).toContain('py_engine/boot.py');
    await expect(page.locator('#notice')).toBeVisible();
    await expect(page.locator('#notice')).toContainText("no request type 'no_such_request'");

    // The worker survives the error: the next request still runs on the GPU.
    const again = await page.evaluate(() => window.diskformer.request('selftest'));
    expect(again.kernel.ok).toBe(true);
    expect([...net.blocked]).toEqual([]);
  });
});

test('without WebGPU (no --enable-unsafe-webgpu, or no navigator.gpu) the page says so', async ({}, testInfo) => {
  const { executablePath, args } = testInfo.project.use.launchOptions;
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    args: args.filter((a) => a !== '--enable-unsafe-webgpu'),
  });
  try {
    const context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    const net = await guardNetwork(context);
    const page = await context.newPage();
    const consoleLines = collectConsole(page);
    await page.goto('/');
    await expect(page.locator('body')).toHaveAttribute('data-phase', settled);
    expect(await page.evaluate(() => document.body.dataset.phase), consoleLines.join('\n')).toBe('no-webgpu');
    await expect(page.locator('#notice')).toContainText(
      'WebGPU is not available in this browser. Use Chrome/Chromium 113+ (on Linux start it with --enable-unsafe-webgpu');
    await expect(page.locator('#status')).toHaveText('no WebGPU');
    await expect(page.locator('#kernel-result')).toHaveText('not run: no WebGPU adapter');
    expect([...net.blocked]).toEqual([]);

    // A browser with no navigator.gpu at all: the page says so at once, without starting the worker.
    const bare = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    const bareNet = await guardNetwork(bare);
    await bare.addInitScript(() => { delete Navigator.prototype.gpu; });
    const barePage = await bare.newPage();
    await barePage.goto('/');
    await expect(barePage.locator('body')).toHaveAttribute('data-phase', 'no-webgpu');
    await expect(barePage.locator('#notice')).toContainText('navigator.gpu is missing on this page');
    expect(bareNet.seen.map((u) => new URL(u).pathname)).not.toContain('/worker.js');
    expect([...bareNet.blocked]).toEqual([]);
  } finally {
    await browser.close();
  }
});
