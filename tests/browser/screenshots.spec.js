// The main states of the page, each checked and then photographed, from the real page on the built-in demo model
// and a fixture model. In the suite the pictures go to test-results/screenshots/; with SCREENSHOTS=1 they replace
// the ones in docs/screenshots/ (referenced by docs/chat.md):
//   SCREENSHOTS=1 npx playwright test tests/browser/screenshots.spec.js
import { test, expect, chromium } from '@playwright/test';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setField } from './page_helpers.js';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const OUT = process.env.SCREENSHOTS === '1' ? join(REPO, 'docs', 'screenshots') : join(REPO, 'test-results', 'screenshots');
const DEMO = 'diskformer-demo-qwen35moe-q8_0.gguf';
const VIEWPORT = { width: 1000, height: 760 };
const PNG_MAGIC = '89504e470d0a1a0a';

// A picture of the page as it is; the file must be a real PNG of the viewport, not an empty one.
async function shot(page, name) {
  const path = join(OUT, `${name}.png`);
  await page.screenshot({ path });
  const png = readFileSync(path);
  expect(png.subarray(0, 8).toString('hex')).toBe(PNG_MAGIC);
  expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([VIEWPORT.width, VIEWPORT.height]);
  expect(png.length).toBeGreaterThan(8000);
}

test('the main states of the page, photographed', async ({ browser }, testInfo) => {
  test.setTimeout(480_000);
  mkdirSync(OUT, { recursive: true });
  const context = await browser.newContext({ baseURL: testInfo.project.use.baseURL, viewport: VIEWPORT });
  // hold back the second 8 MiB unit of a fixture model, so the progress bar can be caught halfway
  await context.route('**/models/tiny-qwen3moe.gguf', async (route) => {
    const m = /bytes=(\d+)-/.exec(route.request().headers().range ?? '');
    if (m && Number(m[1]) >= 8 << 20) await new Promise((r) => setTimeout(r, 5000));
    return route.fallback();
  });
  const page = await context.newPage();
  await page.goto('/');
  await page.evaluate(() => localStorage.clear());
  await page.reload();
  await expect(page.locator('#kernel-result')).toHaveAttribute('data-ok', 'true');
  await page.waitForFunction(() => window.diskformer.chat?.state.models);
  await expect(page.locator('#adapter-facts tr')).not.toHaveCount(0);
  await page.locator('#diagnostics').scrollIntoViewIfNeeded();
  await shot(page, 'boot-diagnostics');
  await page.evaluate(() => window.scrollTo(0, 0));
  await expect(page.locator('#model-select')).toHaveValue(`served:${DEMO}`);
  await expect(page.locator('#source-note')).toContainText('stores it in this browser once');
  await shot(page, 'model-picker');

  await page.locator('#model-select').selectOption('served:tiny-qwen3moe.gguf');
  await page.locator('#load-btn').click();
  await expect(page.locator('#load-progress[data-stage="download"]')).toBeVisible();
  await expect(page.locator('#load-text')).toContainText(/ of [\d.]+ MB/);
  await shot(page, 'download-progress');
  await expect(page.locator('#load-progress[data-stage="gpu"]')).toBeVisible();
  // the set-up's step, its count and the time so far
  await expect(page.locator('#load-text')).toContainText(/^compiling GPU kernels.* · [\d.]+ m?s$/);
  await shot(page, 'gpu-setup-progress');
  await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
  await page.locator('#model-select').selectOption(`served:${DEMO}`);
  await page.locator('#load-btn').click();
  await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
  await expect(page.locator('#model-info')).toContainText(DEMO);

  // two turns: a plain reply (thinking off, as the demo was trained), then one with thinking on, whose thinking
  // block stays collapsed (the demo model was trained without thinking, so that turn may have no answer part)
  await page.locator('#settings-panel summary').click();
  await setField(page, 'set-max-tokens', 48);
  await page.locator('#settings-panel summary').click();
  await page.locator('#prompt').fill('What does os.path.join do?');
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', /^(stop|length)$/);
  await page.locator('#settings-panel summary').click();
  await setField(page, 'set-thinking', true);
  await page.locator('#settings-panel summary').click();
  await page.locator('#prompt').fill('What is collections.Counter?');
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').nth(1)).toHaveAttribute('data-stop-reason', /^(stop|length)$/);
  await expect(page.locator('.msg.assistant .msg-stats').first()).toContainText('first token');
  await expect(page.locator('#chat-list li')).toHaveCount(1);
  await shot(page, 'chat-reply');

  // a second chat: the list of saved chats, a sent message being edited
  await page.locator('#new-chat').click();
  await page.locator('#settings-panel summary').click();
  await setField(page, 'set-thinking', false);
  await page.locator('#settings-panel summary').click();
  await page.locator('#prompt').fill('What is a Python list?');
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', /^(stop|length)$/);
  await expect(page.locator('#chat-list li')).toHaveCount(2);
  await page.locator('.msg.user .edit').click();
  await expect(page.locator('#edit-note')).toBeVisible();
  await shot(page, 'saved-chats-and-edit');
  await page.locator('#cancel-edit').click();

  // Remove from disk asks first
  const row = page.locator(`#stored-models li[data-model="tiny-qwen3moe.gguf"]`);
  await row.getByRole('button', { name: 'Remove from disk' }).click();
  await expect(row).toContainText('from this browser?');
  await shot(page, 'remove-confirmation');
  await row.getByRole('button', { name: 'Cancel' }).click();

  // an error state: a file named .gguf that is not one; the working model stays
  await page.locator('#model-file').setInputFiles({
    name: 'notes.gguf', mimeType: 'application/octet-stream', buffer: Buffer.from('plain text, not a model\n'.repeat(64)),
  });
  await page.locator('#load-btn').click();
  await expect(page.locator('#chat-error .error-summary')).toContainText('not a usable GGUF file');
  await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
  await page.evaluate(() => window.scrollTo(0, 0));
  await shot(page, 'error-bad-file');
  await context.close();

  const { executablePath, args } = testInfo.project.use.launchOptions;
  const bare = await chromium.launch({ executablePath, args: args.filter((a) => a !== '--enable-unsafe-webgpu') });
  try {
    const p = await bare.newPage({ baseURL: testInfo.project.use.baseURL, viewport: VIEWPORT });
    await p.goto('/');
    await expect(p.locator('body')).toHaveAttribute('data-phase', 'no-webgpu');
    await expect(p.locator('#notice')).toContainText('WebGPU is not available');
    await shot(p, 'no-webgpu');
  } finally {
    await bare.close();
  }
});
