// The chat page end to end in headless Chromium (WebGPU on SwiftShader): pick a fixture model served by
// `diskformer serve --models fixtures/models`, load it over HTTP Range, ask the refs' ChatML question greedily and
// get llama.cpp's greedy tokens streamed back, stop a reply midway, go on for another turn (prefix reused), start a
// new chat, and reload the page with the settings kept. Plus the readable budget error and the Markdown escaping.
import { test, expect, chromium } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const STEM = 'micro-qwen3moe-f32';
const MODEL = `${STEM}.gguf`;
const QUESTION = 'Explain in one sentence what a mixture-of-experts model is.';
// the refs' ChatML prompt (index 1) is exactly this question rendered with thinking on
const REF = JSON.parse(readFileSync(join(REPO, '..', 'shared', 'fixtures', 'refs', `${STEM}.json`), 'utf8')).prompts[1];

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
// the download bar: a model of two ingest units (8 MiB each), so the progress bar has a middle
const BIG = 'tiny-qwen3moe.gguf';
const BIG_PATH = join(REPO, 'fixtures', 'models', BIG);
const SMALL_PATH = join(REPO, 'fixtures', 'models', 'micro-qwen3moe.gguf');

async function guardNetwork(context) {
  const blocked = new Set();
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (['data:', 'blob:', 'about:'].includes(u.protocol) || LOCAL_HOSTS.has(u.hostname)) return route.continue();
    blocked.add(u.href);
    return route.abort('blockedbyclient');
  });
  return blocked;
}

async function setField(page, id, value) {
  const field = page.locator(`#${id}`);
  if (typeof value === 'boolean') await field.setChecked(value);
  else if (await field.evaluate((n) => n.tagName === 'SELECT')) await field.selectOption(String(value));
  else await field.fill(String(value));
  await field.dispatchEvent('change');
}

const chatState = (page) => page.evaluate(() => window.diskformer.chat.state);

test.describe('chat page', () => {
  test.describe.configure({ mode: 'serial' });
  let context;
  let page;
  let blocked;
  const logs = [];

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    blocked = await guardNetwork(context);
    page = await context.newPage();
    page.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`[pageerror] ${e.message}`));
  });

  test.afterAll(async () => {
    await context?.close();
  });

  test('boots, lists the served models, refuses a budget that is too small', async () => {
    await page.goto('/');
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await expect(page.locator('body')).toHaveAttribute('data-phase', /^(ready|error|no-webgpu)$/);
    expect(await page.evaluate(() => window.diskformer.state.phase), logs.join('\n')).toBe('ready');
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await expect(page.locator(`#model-select option[value="served:${MODEL}"]`)).toHaveCount(1);
    const models = (await chatState(page)).models;
    expect(models.served.map((m) => m.name)).toContain('micro-qwen3moe.gguf');
    await expect(page.locator('#diagnostics')).toHaveAttribute('open', '');

    await page.locator('#settings-panel summary').click();
    await setField(page, 'set-path', 'direct'); // the whole file into memory, every expert resident
    await setField(page, 'set-budget', 1);
    await page.locator('#model-select').selectOption(`served:${MODEL}`);
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-error')).toContainText('GPU budget too small');
    await expect(page.locator('#chat-error')).toContainText('raise the budget');
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
  });

  test('loads the model with progress and streams llama.cpp\'s greedy reply', async () => {
    await setField(page, 'set-budget', 512);
    await setField(page, 'set-ctx', 256);
    await setField(page, 'set-kv', 'f32'); // the refs' configuration: the engine matches llama.cpp to ~1e-5
    await setField(page, 'set-thinking', true);
    await setField(page, 'set-temperature', 0);
    await setField(page, 'set-max-tokens', 32);
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    await expect(page.locator('#chat-error')).toBeHidden();
    const st = await chatState(page);
    expect(st.loaded.name).toBe(MODEL);
    expect(st.loaded.n_ctx).toBe(256);
    expect(st.loaded.kv).toBe('f32');
    const stages = st.loadEvents.map((e) => e.stage);
    expect(stages[0]).toBe('header');
    expect(stages.at(-1)).toBe('ready');
    const last = st.loadEvents.filter((e) => e.stage === 'download').at(-1);
    expect(last.bytes).toBe(last.total);
    expect(last.total).toBe(models_size(st, MODEL));
    await expect(page.locator('#model-info')).toContainText(MODEL);
    await expect(page.locator('#diagnostics')).not.toHaveAttribute('open', '');

    await page.locator('#prompt').fill(QUESTION);
    await page.locator('#prompt').press('Enter');
    const reply = page.locator('.msg.assistant').first();
    await expect(reply).toHaveAttribute('data-stop-reason', 'length');
    const after = await chatState(page);
    expect(after.lastResult.token_ids).toEqual(REF.greedy_ids);
    expect(after.lastResult.stop_reason).toBe('length');
    expect(after.lastDeltas).toBeGreaterThan(1);
    expect(after.lastResult.stats.decode_tokens_per_s).toBeGreaterThan(0);
    await expect(page.locator('.msg.user .text').first()).toHaveText(QUESTION);
    await expect(reply.locator('.answer')).not.toBeEmpty();
    await expect(page.locator('#meter')).toContainText('tok/s');
    await expect(page.locator('#meter')).toContainText('first token');
    await expect(reply.locator('.copy')).toBeVisible();
  });

  test('stops a reply midway, keeps it, and goes on with the next turn', async () => {
    await setField(page, 'set-max-tokens', 200);
    await page.locator('#prompt').fill('Say more about the experts.');
    await page.locator('#send-btn').click();
    await expect(page.locator('#stop-btn')).toBeVisible();
    await page.waitForFunction(() => window.diskformer.chat.state.lastDeltas >= 3);
    await page.locator('#stop-btn').click();
    const stopped = page.locator('.msg.assistant').nth(1);
    await expect(stopped).toHaveAttribute('data-stop-reason', 'abort');
    await expect(stopped.locator('.badge')).toHaveText('stopped');
    let st = await chatState(page);
    const n = st.lastResult.token_ids.length;
    expect(n).toBeGreaterThanOrEqual(3);
    expect(n).toBeLessThan(200);
    expect(st.conversation.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(st.conversation[3].content).toBe(st.lastResult.text);

    await setField(page, 'set-max-tokens', 8);
    await page.locator('#prompt').fill('Thanks. One more word?');
    await page.locator('#prompt').press('Enter');
    await expect(page.locator('.msg.assistant').nth(2)).toHaveAttribute('data-stop-reason', /^(length|stop)$/);
    st = await chatState(page);
    expect(st.conversation).toHaveLength(6);
    expect(st.lastResult.stats.reused_tokens).toBeGreaterThan(REF.prompt_ids.length);

    await page.locator('#new-chat').click();
    await expect(page.locator('.msg')).toHaveCount(0);
    expect((await chatState(page)).conversation).toEqual([]);
  });

  test('a reload keeps the settings and the model choice', async () => {
    await page.reload();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await expect(page.locator('#model-select')).toHaveValue(`served:${MODEL}`);
    await expect(page.locator('#set-kv')).toHaveValue('f32');
    await expect(page.locator('#set-ctx')).toHaveValue('256');
    await expect(page.locator('#set-temperature')).toHaveValue('0');
    await expect(page.locator('#set-max-tokens')).toHaveValue('8');
    await expect(page.locator('#set-budget')).toHaveValue('512');
    await expect(page.locator('#set-thinking')).toBeChecked();
  });

  test('the store path: ingest into OPFS, experts streamed, reload from the store, remove', async () => {
    await page.locator('#settings-panel summary').click();
    await setField(page, 'set-path', 'store');
    await setField(page, 'set-budget', 3); // about half the experts fit: the rest are paged from OPFS per layer
    await setField(page, 'set-max-tokens', 32);
    await page.locator('#model-select').selectOption(`served:${MODEL}`);
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel[data-state="ready"]').or(page.locator('#chat-error:visible'))).toBeVisible();
    expect((await chatState(page)).error?.message ?? null).toBe(null);
    let st = await chatState(page);
    expect(st.loaded.path).toBe('store');
    expect(st.loaded.experts).toBe('streamed');
    const stored = st.loadEvents.filter((e) => e.stage === 'download').at(-1);
    expect(stored.bytes).toBe(models_size(st, MODEL));
    // the upload counts the dense planes only: a partial pool takes its experts as tokens need them
    const uploaded = st.loadEvents.filter((e) => e.stage === 'gpu' && e.step === 'weights' && e.bytes !== undefined);
    expect(uploaded.at(-1)).toMatchObject({ bytes: st.loaded.gpu_setup.weights_bytes,
      total: st.loaded.gpu_setup.weights_bytes });

    await page.locator('#prompt').fill(QUESTION);
    await page.locator('#prompt').press('Enter');
    await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', 'length');
    st = await chatState(page);
    expect(st.lastResult.token_ids).toEqual(REF.greedy_ids);
    expect(st.lastResult.stats.bytes_read_per_token).toBeGreaterThan(0);
    expect(st.lastResult.stats.expert_read_workers).toBe(4); // missed records read by the pool of OPFS readers
    await expect(page.locator('#meter')).toContainText('% hit');
    // a served model that is stored is listed once, as served: its Load reads it from disk
    await expect(page.locator(`#model-select option[value="stored:${MODEL}"]`)).toHaveCount(0);
    await expect(page.locator(`#stored-models li[data-model="${MODEL}"]`)).toHaveAttribute('data-complete', 'true');

    await page.reload();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await expect(page.locator('#set-path')).toHaveValue('store');
    await page.locator('#model-select').selectOption(`served:${MODEL}`);
    await expect(page.locator('#source-note')).toContainText('no download');
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    st = await chatState(page);
    expect(st.loadEvents.map((e) => e.stage)).not.toContain('download');
    expect(st.loadEvents.map((e) => e.stage)).toContain('stored');
    expect(st.loaded.name).toBe(MODEL);

    await page.locator(`#stored-models li[data-model="${MODEL}"] button.remove`).click();
    await page.locator(`#stored-models li[data-model="${MODEL}"] button.confirm`).click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await expect(page.locator(`#model-select option[value="stored:${MODEL}"]`)).toHaveCount(0);
    await expect(page.locator('#stored-models')).toBeHidden();
  });

  test('model text is escaped before its Markdown is rendered', async () => {
    const html = await page.evaluate(async () => {
      const { renderMarkdown } = await import('/markdown.js');
      return renderMarkdown('<img src=x onerror="alert(1)"> **b** `<i>` [x](javascript:alert(1)) [y](https://a.example/)');
    });
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<i>');
    expect(html).not.toContain('href="javascript');
    expect(html).toContain('&lt;img src=x onerror=&quot;alert(1)&quot;&gt;');
    expect(html).toContain('<strong>b</strong>');
    expect(html).toContain('<a href="https://a.example/"');
    expect([...blocked]).toEqual([]);
  });
});

test.describe('the model store and local files', () => {
  test.describe.configure({ mode: 'serial' });
  let context;
  let page;
  let blocked;
  const ranges = []; // [start, end] of every Range request for BIG (the worker's requests included)
  let cutAt = null; // while set: requests for BIG at or past this offset fail, as a dropped connection would

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    blocked = await guardNetwork(context);
    await context.route(`**/models/${BIG}`, (route) => {
      const m = /bytes=(\d+)-(\d*)/.exec(route.request().headers().range ?? '');
      const start = m ? Number(m[1]) : 0;
      if (cutAt !== null && start >= cutAt) return route.abort('connectionreset');
      ranges.push([start, m && m[2] ? Number(m[2]) : Infinity]);
      return route.fallback();
    });
    page = await context.newPage();
    await page.goto('/');
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await page.waitForFunction(() => window.diskformer.chat.state.models !== null);
    // clean store: a model left by an earlier run would skip the download
    for (const m of (await chatState(page)).models.stored) {
      await page.evaluate((name) => window.diskformer.chat.removeStored(name), m.name);
    }
    await page.locator('#settings-panel summary').click();
    await setField(page, 'set-path', 'store');
    await setField(page, 'set-budget', 512);
    await setField(page, 'set-ctx', 256);
    await setField(page, 'set-thinking', false);
    await setField(page, 'set-temperature', 0);
    await setField(page, 'set-max-tokens', 8);
  });

  test.afterAll(async () => {
    await context?.close();
  });

  const requestedBytes = () => ranges.reduce((n, [a, b]) => n + (Number.isFinite(b) ? b - a + 1 : 0), 0);

  async function send(text, stopReason = /^(length|stop)$/) {
    const n = await page.locator('.msg.assistant').count();
    await page.locator('#prompt').fill(text);
    await page.locator('#prompt').press('Enter');
    await expect(page.locator('.msg.assistant').nth(n)).toHaveAttribute('data-stop-reason', stopReason);
    return chatState(page);
  }

  test('an interrupted download says so and the next Load resumes it; the bar shows bytes and rate', async () => {
    const size = models_size(await chatState(page), BIG);
    await page.locator('#model-select').selectOption(`served:${BIG}`);
    await expect(page.locator('#source-note')).toContainText('stores it in this browser once');
    // every state the bar and its text go through, over both loads
    await page.evaluate(() => {
      window.seenBar = [];
      const bar = document.getElementById('load-bar');
      const text = document.getElementById('load-text');
      new MutationObserver(() => window.seenBar.push({ value: bar.getAttribute('value'), text: text.textContent }))
        .observe(document.getElementById('load-progress'), { subtree: true, attributes: true, childList: true, characterData: true });
    });
    cutAt = 8 << 20; // the second 8 MiB unit never arrives
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-error')).toBeVisible();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    const partial = page.locator(`#stored-models li[data-model="${BIG}"]`);
    await expect(partial).toHaveAttribute('data-complete', 'false');
    await expect(partial).toContainText('download interrupted');
    await expect(partial).toContainText('resume');
    await expect(page.locator('#source-note')).toContainText('interrupted: Load resumes it');
    await expect(page.locator(`#model-select option[value="stored:${BIG}"]`)).toHaveCount(0);

    cutAt = null;
    ranges.length = 0;
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel[data-state="ready"]').or(page.locator('#chat-error:visible'))).toBeVisible();
    expect((await chatState(page)).error?.message ?? null).toBe(null);
    const st = await chatState(page);
    expect(st.loaded.name).toBe(BIG);
    // the resume re-checks what the first attempt stored ('verify'), then downloads the rest
    const moving = st.loadEvents.filter((e) => e.stage === 'download' || e.stage === 'verify');
    expect(moving.map((e) => e.stage), JSON.stringify(st.loadEvents)).toContain('verify');
    expect(moving.some((e) => e.bytes > 0 && e.bytes < size), JSON.stringify(st.loadEvents)).toBe(true);
    expect(moving.at(-1)).toMatchObject({ stage: 'download', bytes: size, total: size });
    const seen = await page.evaluate(() => window.seenBar);
    const values = seen.filter((s) => s.value !== null).map((s) => Number(s.value)); // null: indeterminate
    expect(values.some((v) => v > 0 && v < 1), JSON.stringify(seen)).toBe(true); // it moved through the middle
    expect(values.at(-1)).toBe(1);
    expect(seen.some((s) => / of [\d.]+ MB/.test(s.text) && /[\d.]+ MB\/s/.test(s.text)), JSON.stringify(seen)).toBe(true);
    expect(requestedBytes()).toBeLessThan(size); // resumed: the first 8 MiB were not fetched again
    expect(requestedBytes()).toBeGreaterThan(size - (8 << 20));
    await expect(page.locator(`#stored-models li[data-model="${BIG}"]`)).toHaveAttribute('data-complete', 'true');
  });

  test('two turns, a reply stopped midway, then a reload loads it again without a second download', async () => {
    let st = await send('Hello there.');
    st = await send('And a second question?');
    expect(st.conversation.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(st.lastResult.stats.reused_tokens).toBeGreaterThan(0);

    await setField(page, 'set-max-tokens', 200);
    await page.locator('#prompt').fill('Now talk for a long time.');
    await page.locator('#send-btn').click();
    await page.waitForFunction(() => window.diskformer.chat.state.lastDeltas >= 2);
    await page.locator('#stop-btn').click();
    await expect(page.locator('.msg.assistant').nth(2)).toHaveAttribute('data-stop-reason', 'abort');
    st = await chatState(page);
    expect(st.lastResult.token_ids.length).toBeLessThan(200);
    await setField(page, 'set-max-tokens', 8);

    await page.reload();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await page.waitForFunction(() => window.diskformer.chat.state.models !== null);
    await expect(page.locator('#model-select')).toHaveValue(`served:${BIG}`); // the same one-click source
    await expect(page.locator('#source-note')).toContainText('no download');
    const size = models_size(await chatState(page), BIG);
    ranges.length = 0;
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    st = await chatState(page);
    expect(st.loadEvents.map((e) => e.stage)).toContain('stored');
    expect(st.loadEvents.map((e) => e.stage)).not.toContain('download');
    await expect(page.locator('#model-info')).toContainText('loaded from disk');
    expect(requestedBytes()).toBeLessThan(size / 4); // the header only: no second ingest
    st = await send('Hello again.');
    expect(st.conversation).toHaveLength(2);
  });

  test('Remove from disk takes it off the stored list', async () => {
    const row = page.locator(`#stored-models li[data-model="${BIG}"]`);
    await expect(row).toContainText('MB');
    await row.getByRole('button', { name: 'Remove from disk' }).click();
    await row.getByRole('button', { name: 'Remove', exact: true }).click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    await expect(row).toHaveCount(0);
    expect((await chatState(page)).models.stored.map((m) => m.name)).not.toContain(BIG);
  });

  test('a storage estimate too small for the model warns before anything is downloaded', async () => {
    await page.evaluate(() => {
      navigator.storage.estimate = async () => ({ quota: 1_000_000, usage: 400_000 });
    });
    ranges.length = 0;
    await page.locator('#model-select').selectOption(`served:${BIG}`);
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-error')).toHaveAttribute('data-kind', 'quota');
    await expect(page.locator('#chat-error')).toContainText('needs 15.6 MB');
    await expect(page.locator('#chat-error')).toContainText('600.0 KB');
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
    expect(ranges).toEqual([]);
    await page.reload(); // the real estimate again
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
  });

  test('a local GGUF: picked with the file input or dropped on the chat; a non-GGUF is refused clearly', async () => {
    await page.waitForFunction(() => window.diskformer.chat.state.models !== null);
    await page.locator('#settings-panel').evaluate((d) => { d.open = true; });
    await setField(page, 'set-path', 'direct');
    await page.locator('#model-file').setInputFiles(SMALL_PATH);
    await expect(page.locator('#model-select')).toHaveValue('file');
    await expect(page.locator('#file-name')).toHaveText('micro-qwen3moe.gguf');
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    expect((await chatState(page)).loaded.name).toBe('micro-qwen3moe.gguf');
    await send('Hi.');

    // drag and drop: a File in a DataTransfer, dropped on the chat panel
    await page.evaluate(async () => {
      const blob = await (await fetch('/models/micro-qwen35moe.gguf')).blob();
      const dt = new DataTransfer();
      dt.items.add(new File([blob], 'micro-qwen35moe.gguf'));
      const panel = document.getElementById('chat-panel');
      panel.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
      panel.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    });
    await expect(page.locator('#model-select')).toHaveValue('file');
    await expect(page.locator('#file-name')).toHaveText('micro-qwen35moe.gguf');

    // a file that is not a .gguf at all, then one named .gguf that is not a GGUF inside
    await page.locator('#model-file').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('hello') });
    await expect(page.locator('#chat-error')).toContainText('notes.txt is not a .gguf file');
    await page.locator('#model-file').setInputFiles({
      name: 'fake.gguf', mimeType: 'application/octet-stream', buffer: Buffer.from('this is plain text, not a model\n'.repeat(64)),
    });
    await expect(page.locator('#file-name')).toHaveText('fake.gguf');
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-error')).toContainText('not a usable GGUF file');
    // the model that was loaded stays loaded
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    expect((await chatState(page)).loaded.name).toBe('micro-qwen3moe.gguf');
    expect((await chatState(page)).error.errorType).toBe('BadModelFile');
    await expect(page.locator('#chat-error .error-summary')).not.toContainText('BadModelFile');
    expect([...blocked]).toEqual([]);
  });
});

test('the chat page without WebGPU says so instead of offering a model', async ({}, testInfo) => {
  const { executablePath, args } = testInfo.project.use.launchOptions;
  const browser = await chromium.launch({ executablePath, args: args.filter((a) => a !== '--enable-unsafe-webgpu') });
  try {
    const page = await browser.newPage({ baseURL: testInfo.project.use.baseURL });
    await page.goto('/');
    await expect(page.locator('body')).toHaveAttribute('data-phase', /^(no-webgpu|ready|error)$/);
    expect(await page.evaluate(() => document.body.dataset.phase)).toBe('no-webgpu');
    await expect(page.locator('#notice')).toBeVisible();
    await expect(page.locator('#notice')).toContainText('WebGPU is not available in this browser');
    await expect(page.locator('#notice')).toContainText('--enable-unsafe-webgpu');
    await expect(page.locator('#load-btn')).toBeDisabled();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'starting');
  } finally {
    await browser.close();
  }
});

function models_size(state, name) {
  return state.models.served.find((m) => m.name === name).size;
}
