// The README's first run: `diskformer serve` with nothing downloaded serves the built-in demo model (demo/), the
// page preselects it on a first visit, one Load stores it in this browser (OPFS) and a question from
// demo/README.md gets a streamed reply made of real words. A later visit loads it from the store, downloading
// nothing. No request leaves 127.0.0.1.
import { test, expect } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DEMO = 'diskformer-demo-qwen35moe-q8_0.gguf';
const WORDS = new Set(readFileSync(join(REPO, 'demo', 'training-words.txt'), 'utf8').split(/\s+/).filter(Boolean)
  .map((w) => w.toLowerCase()));
// two of the five fixed prompts of demo/README.md
const PROMPTS = ['What does os.path.join do?', 'What is collections.Counter?'];
const REPLY_BOUND_MS = 120_000; // SwiftShader on a busy 2-core machine; a real GPU answers in well under a second
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

function realWordShare(text) {
  const words = text.match(/[A-Za-z]+/g) ?? [];
  return { words: words.length, known: words.filter((w) => WORDS.has(w.toLowerCase())).length };
}

const chatState = (page) => page.evaluate(() => window.diskformer.chat.state);

test.describe('the built-in demo model', () => {
  test.describe.configure({ mode: 'serial' });
  let context;
  let page;
  const blocked = new Set();
  const logs = [];

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    await context.route('**/*', (route) => {
      const u = new URL(route.request().url());
      if (['data:', 'blob:', 'about:'].includes(u.protocol) || LOCAL_HOSTS.has(u.hostname)) return route.continue();
      blocked.add(u.href);
      return route.abort('blockedbyclient');
    });
    page = await context.newPage();
    page.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`[pageerror] ${e.message}`));
  });

  test.afterAll(async () => {
    await context?.close();
  });

  test('a first visit preselects the demo; one Load stores it; a fixed prompt gets real words', async () => {
    await page.goto('/');
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await expect(page.locator('body')).toHaveAttribute('data-phase', /^(ready|error|no-webgpu)$/);
    expect(await page.evaluate(() => window.diskformer.state.phase), logs.join('\n')).toBe('ready');
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    // the demo is served although the host was only given --models fixtures/models: it is built in
    await page.waitForFunction(() => window.diskformer.chat.state.models !== null);
    const served = (await chatState(page)).models.served;
    expect(served.filter((m) => m.builtin).map((m) => m.name)).toEqual([DEMO]);
    await expect(page.locator('#model-select')).toHaveValue(`served:${DEMO}`);
    await expect(page.locator('#model-select option:checked')).toContainText('built-in demo');
    await expect(page.locator('#set-thinking')).not.toBeChecked(); // the demo's settings: no thinking, greedy
    await expect(page.locator('#set-temperature')).toHaveValue('0');
    await expect(page.locator('#set-path')).toHaveValue('store');
    await expect(page.locator('#load-btn')).toBeEnabled();

    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    let st = await chatState(page);
    expect(st.loaded.name).toBe(DEMO);
    expect(st.loaded.arch).toBe('qwen35moe');
    expect(st.loaded.path).toBe('store');
    const stored = st.loadEvents.filter((e) => e.stage === 'download').at(-1);
    expect(stored.bytes).toBe(served.find((m) => m.name === DEMO).size);
    await expect(page.locator('.messages .empty')).toContainText('os.path.join');

    const started = Date.now();
    await page.locator('#prompt').fill(PROMPTS[0]);
    await page.locator('#prompt').press('Enter');
    const reply = page.locator('.msg.assistant').first();
    await expect(reply).toHaveAttribute('data-stop-reason', /^(stop|length)$/, { timeout: REPLY_BOUND_MS });
    const elapsed = Date.now() - started;
    st = await chatState(page);
    expect(st.lastDeltas).toBeGreaterThan(1); // it streamed
    const text = st.lastResult.text;
    const share = realWordShare(text);
    expect(share.words, text).toBeGreaterThanOrEqual(5);
    expect(share.known / share.words, text).toBeGreaterThanOrEqual(0.9);
    await expect(reply.locator('.answer')).toContainText(text.split(/\s+/)[0]);
    expect(elapsed).toBeLessThan(REPLY_BOUND_MS);
    console.log(`demo reply in ${elapsed} ms (${share.known}/${share.words} real words): ${text}`);
  });

  test('a later visit loads the demo from the store without downloading it', async () => {
    await page.reload();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await page.waitForFunction(() => window.diskformer.chat.state.models !== null);
    await expect(page.locator('#model-select')).toHaveValue(`served:${DEMO}`);
    await expect(page.locator('#source-note')).toContainText('no download');
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    const st = await chatState(page);
    const stages = st.loadEvents.map((e) => e.stage);
    expect(stages).toContain('stored');
    expect(stages).not.toContain('download');
    await expect(page.locator('#model-info')).toContainText('loaded from disk');

    await page.locator('#prompt').fill(PROMPTS[1]);
    await page.locator('#prompt').press('Enter');
    await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', /^(stop|length)$/,
      { timeout: REPLY_BOUND_MS });
    const text = (await chatState(page)).lastResult.text;
    const share = realWordShare(text);
    expect(share.words, text).toBeGreaterThanOrEqual(3);
    expect(share.known / share.words, text).toBeGreaterThanOrEqual(0.9);
    expect([...blocked]).toEqual([]);
  });
});
