// The screenshots in docs/screenshots/ (referenced by docs/chat.md), made from the real page on the built-in demo
// model and a fixture model. Only with SCREENSHOTS=1 (otherwise skipped): it writes into the repository.
//   SCREENSHOTS=1 npx playwright test tests/browser/screenshots.spec.js
import { test, expect, chromium } from '@playwright/test';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const OUT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'screenshots');
const DEMO = 'diskformer-demo-qwen35moe-q8_0.gguf';
const VIEWPORT = { width: 1000, height: 720 };

test.skip(process.env.SCREENSHOTS !== '1', 'set SCREENSHOTS=1 to write docs/screenshots/');

const shot = (page, name) => page.screenshot({ path: join(OUT, `${name}.png`) });

async function setField(page, id, value) {
  const field = page.locator(`#${id}`);
  if (typeof value === 'boolean') await field.setChecked(value);
  else if (await field.evaluate((n) => n.tagName === 'SELECT')) await field.selectOption(String(value));
  else await field.fill(String(value));
  await field.dispatchEvent('change');
}

test('screenshots of the main states', async ({ browser }, testInfo) => {
  test.setTimeout(300_000);
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
  await page.locator('#diagnostics').scrollIntoViewIfNeeded();
  await shot(page, 'boot-diagnostics');
  await page.evaluate(() => window.scrollTo(0, 0));
  await expect(page.locator('#model-select')).toHaveValue(`served:${DEMO}`);
  await shot(page, 'model-picker');

  await page.locator('#model-select').selectOption('served:tiny-qwen3moe.gguf');
  await page.locator('#load-btn').click();
  await expect(page.locator('#load-progress[data-stage="download"]')).toBeVisible();
  await shot(page, 'download-progress');
  await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
  await page.locator('#model-select').selectOption(`served:${DEMO}`);
  await page.locator('#load-btn').click();
  await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
  await expect(page.locator('#model-info')).toContainText(DEMO);

  // two turns: a plain reply (thinking off, as the demo was trained), then one with thinking on, whose thinking
  // block stays collapsed (the demo model was trained without thinking, so that turn may have no answer part)
  await page.locator('#prompt').fill('What does os.path.join do?');
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', /^(stop|length)$/);
  await page.locator('#settings-panel summary').click();
  await setField(page, 'set-thinking', true);
  await setField(page, 'set-max-tokens', 48);
  await page.locator('#settings-panel summary').click();
  await page.locator('#prompt').fill('What is collections.Counter?');
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').nth(1)).toHaveAttribute('data-stop-reason', /^(stop|length)$/);
  await shot(page, 'chat-reply');

  // an error state: a file named .gguf that is not one
  await page.locator('#model-file').setInputFiles({
    name: 'notes.gguf', mimeType: 'application/octet-stream', buffer: Buffer.from('plain text, not a model\n'.repeat(64)),
  });
  await page.locator('#load-btn').click();
  await expect(page.locator('#chat-error')).toContainText('not a usable GGUF file');
  await shot(page, 'error-bad-file');
  await context.close();

  const { executablePath, args } = testInfo.project.use.launchOptions;
  const bare = await chromium.launch({ executablePath, args: args.filter((a) => a !== '--enable-unsafe-webgpu') });
  try {
    const p = await bare.newPage({ baseURL: testInfo.project.use.baseURL, viewport: VIEWPORT });
    await p.goto('/');
    await expect(p.locator('body')).toHaveAttribute('data-phase', 'no-webgpu');
    await shot(p, 'no-webgpu');
  } finally {
    await bare.close();
  }
});
