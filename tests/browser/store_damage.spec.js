// A damaged store in the browser: a byte flipped in OPFS (an expert record, then a dense plane) is found when the
// stored model loads, the page says which file is damaged and what to do, loading it again from its source repairs
// it (only the damaged part is rewritten) and it chats again; Remove from disk takes a damaged model away.
import { test, expect } from '@playwright/test';

const MODEL = 'micro-qwen3moe.gguf';
const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

async function setField(page, id, value) {
  const field = page.locator(`#${id}`);
  if (await field.evaluate((n) => n.tagName === 'SELECT')) await field.selectOption(String(value));
  else await field.fill(String(value));
  await field.dispatchEvent('change');
}

const chatState = (page) => page.evaluate(() => window.diskformer.chat.state);

// Flip one byte of a stored file, as a failing disk (or another program) would. Run with no model loaded: the
// engine worker holds sync access handles on the files of a loaded store.
async function flipStoredByte(page, model, file, offset) {
  return page.evaluate(async ({ model, file, offset }) => {
    const root = await navigator.storage.getDirectory();
    const dir = await (await root.getDirectoryHandle('diskformer')).getDirectoryHandle(model);
    const handle = await dir.getFileHandle(file);
    const bytes = new Uint8Array(await (await handle.getFile()).slice(offset, offset + 1).arrayBuffer());
    const w = await handle.createWritable({ keepExistingData: true });
    await w.write({ type: 'write', position: offset, data: new Uint8Array([bytes[0] ^ 0x20]) });
    await w.close();
    return bytes[0];
  }, { model, file, offset });
}

async function storedManifest(page, model) {
  return page.evaluate(async (model) => {
    const root = await navigator.storage.getDirectory();
    const dir = await (await root.getDirectoryHandle('diskformer')).getDirectoryHandle(model);
    return JSON.parse(await (await (await dir.getFileHandle('manifest.json')).getFile()).text());
  }, model);
}

async function load(page, value) {
  await page.locator('#model-select').selectOption(value);
  await page.locator('#load-btn').click();
  await expect(page.locator('#chat-panel[data-state="ready"]').or(page.locator('#chat-error:visible'))).toBeVisible();
}

async function freshPage(page) {
  await page.reload(); // the worker goes, and its OPFS handles with it
  await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'idle');
}

test('a byte flipped in OPFS is found at load, named, repaired from the source or removed', async ({ browser }, testInfo) => {
  const context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (['data:', 'blob:', 'about:'].includes(u.protocol) || LOCAL_HOSTS.has(u.hostname)) return route.continue();
    return route.abort('blockedbyclient');
  });
  const page = await context.newPage();
  const logs = [];
  page.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
  try {
    await page.goto('/');
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await expect(page.locator('body')).toHaveAttribute('data-phase', /^(ready|error|no-webgpu)$/);
    expect(await page.evaluate(() => window.diskformer.state.phase), logs.join('\n')).toBe('ready');
    await page.locator('#settings-panel summary').click();
    await setField(page, 'set-path', 'store'); // the default budget holds every expert: all are read at load
    await load(page, `served:${MODEL}`);
    expect((await chatState(page)).error?.message ?? null, logs.join('\n')).toBe(null);

    const m = await storedManifest(page, MODEL);
    const ex = m.layout.experts;
    const record = (1 * ex.n_experts + 2) * ex.record_size + ex.planes.down_codes[0] + 5; // layer 1, expert 2

    // an expert record: found when the stored model loads
    await freshPage(page);
    await flipStoredByte(page, MODEL, 'experts.bin', record);
    await load(page, `served:${MODEL}`); // stored and complete: Load opens the store, no download
    const error = page.locator('#chat-error');
    await expect(error).toContainText('is damaged');
    await expect(error).toContainText('experts.bin record of layer 1, expert 2');
    await expect(error).toContainText('Remove from disk');
    expect((await storedManifest(page, MODEL)).state.damaged).toContain('layer 1, expert 2');

    // repair: load it again from its source; only the damaged part is rewritten, and it loads and chats
    await freshPage(page);
    await load(page, `served:${MODEL}`);
    expect((await chatState(page)).error?.message ?? null, logs.join('\n')).toBe(null);
    expect((await chatState(page)).loadEvents.map((e) => e.stage)).not.toContain('download');
    expect((await storedManifest(page, MODEL)).state.damaged ?? null).toBe(null);
    await page.locator('#prompt').fill('Hello');
    await page.locator('#prompt').press('Enter');
    await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', /.+/);

    // a dense plane: found too; then Remove from disk
    await freshPage(page);
    const plane = m.layout.dense.planes[1];
    await flipStoredByte(page, MODEL, 'dense.bin', plane.offset + 3);
    await load(page, `served:${MODEL}`); // stored and complete: Load opens the store, no download
    await expect(error).toContainText(`dense.bin plane ${plane.tensor}:${plane.kind}`);
    const row = page.locator(`#stored-models li[data-model="${MODEL}"]`);
    await row.getByRole('button', { name: 'Remove from disk' }).click();
    await row.getByRole('button', { name: 'Remove', exact: true }).click();
    await expect(row).toHaveCount(0);
    expect((await chatState(page)).models.stored.map((s) => s.name)).not.toContain(MODEL);
  } finally {
    await context.close();
  }
});
