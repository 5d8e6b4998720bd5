// The streamed miss path in the chat page: a Q8_0 fixture stored in OPFS, a GPU budget that holds only part of the
// experts, the missed records read by the pool of OPFS reader workers and the CPU expert tier on (Settings "CPU
// expert workers"): the reply completes, part of the misses were computed on the CPU, and the stats line and the
// answer's own figures show that share and the read and upload rates.
import { test, expect } from '@playwright/test';

const MODEL = 'micro-qwen35moe.gguf';

async function setField(page, id, value) {
  const field = page.locator(`#${id}`);
  if (await field.evaluate((n) => n.tagName === 'SELECT')) await field.selectOption(String(value));
  else await field.fill(String(value));
  await field.dispatchEvent('change');
}

const chatState = (page) => page.evaluate(() => window.diskformer.chat.state);

test('a chat with misses computed by the CPU expert tier shows its share and the read and upload rates',
  async ({ page }) => {
    const logs = [];
    page.on('console', (m) => logs.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => logs.push(`[pageerror] ${e.message}`));
    await page.goto('/');
    await page.evaluate(() => localStorage.clear());
    await page.reload();
    await expect(page.locator('body')).toHaveAttribute('data-phase', /^(ready|error|no-webgpu)$/);
    expect(await page.evaluate(() => window.diskformer.state.phase), logs.join('\n')).toBe('ready');
    expect(await page.evaluate(() => crossOriginIsolated)).toBe(true); // the workers share memory

    await page.locator('#settings-panel summary').click();
    await expect(page.locator('#set-cpu-workers')).toHaveValue('0'); // off unless asked for
    await setField(page, 'set-path', 'store');
    await setField(page, 'set-budget', 1); // a part of the experts fits: the rest are missed and read per layer
    await setField(page, 'set-cpu-workers', 2);
    await setField(page, 'set-ctx', 256);
    await setField(page, 'set-temperature', 0);
    await setField(page, 'set-max-tokens', 12);
    await page.locator('#model-select').selectOption(`served:${MODEL}`);
    await page.locator('#load-btn').click();
    await expect(page.locator('#chat-panel[data-state="ready"]').or(page.locator('#chat-error:visible'))).toBeVisible();
    let st = await chatState(page);
    expect(st.error?.message ?? null, logs.join('\n')).toBe(null);
    expect(st.loaded.path).toBe('store');
    expect(st.loaded.experts).toBe('streamed');

    await page.locator('#prompt').fill('What is a mixture of experts?');
    await page.locator('#prompt').press('Enter');
    await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', /^(length|stop)$/);
    st = await chatState(page);
    const s = st.lastResult.stats;
    console.log(`stats: ${JSON.stringify({ hit: s.expert_hit_rate, cpu: s.cpu_share_of_misses,
      read: s.read_bytes_per_s, upload: s.upload_bytes_per_s, workers: s.expert_read_workers })}`);
    expect(st.lastResult.token_ids.length).toBeGreaterThan(0);
    expect(s.expert_hit_rate).toBeLessThan(1);
    expect(s.expert_read_workers).toBe(4); // missed records read by the pool of OPFS readers
    expect(s.cpu_share_of_misses).toBeGreaterThan(0);
    expect(s.cpu_share_of_misses).toBeLessThanOrEqual(1);
    expect(s.read_bytes_per_s).toBeGreaterThan(0);
    const meter = page.locator('#meter');
    await expect(meter).toContainText(`CPU ${(100 * s.cpu_share_of_misses).toFixed(1)} % of misses`);
    await expect(meter).toContainText(/read [\d.]+ [KMG]?B\/s/);
    if (Number.isFinite(s.upload_bytes_per_s)) await expect(meter).toContainText(/upload [\d.]+ [KMG]?B\/s/);
    await expect(page.locator('.msg.assistant').first()).toContainText('% of misses');
  });
