// Helpers shared by the chat page's specs.
import { expect } from '@playwright/test';

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

// Every request that would leave this machine is refused and recorded.
export async function guardNetwork(context) {
  const blocked = new Set();
  await context.route('**/*', (route) => {
    const u = new URL(route.request().url());
    if (['data:', 'blob:', 'about:'].includes(u.protocol) || LOCAL_HOSTS.has(u.hostname)) return route.continue();
    blocked.add(u.href);
    return route.abort('blockedbyclient');
  });
  return blocked;
}

export async function setField(page, id, value) {
  const field = page.locator(`#${id}`);
  if (typeof value === 'boolean') await field.setChecked(value);
  else if (await field.evaluate((n) => n.tagName === 'SELECT')) await field.selectOption(String(value));
  else await field.fill(String(value));
  await field.dispatchEvent('change');
}

export const chatState = (page) => page.evaluate(() => window.diskformer.chat.state);

// A booted page with the chat started and the model list read.
export async function openChat(page, { fresh = false } = {}) {
  await page.goto('/');
  if (fresh) {
    await page.evaluate(() => localStorage.clear());
    await page.reload();
  }
  await expect(page.locator('#kernel-result')).toHaveAttribute('data-ok', 'true');
  await page.waitForFunction(() => window.diskformer.chat?.state.models !== null);
}

// Load a served or stored model and wait until it is the loaded one (a page that was ready with another model is
// ready at once, before the Load has even started).
export async function load(page, kind) {
  const name = kind.slice(kind.indexOf(':') + 1);
  await page.locator('#model-select').selectOption(kind);
  await page.locator('#load-btn').click();
  await page.waitForFunction((want) => {
    const st = window.diskformer.chat.state;
    return st.phase !== 'loading' && (st.loaded?.name === want || st.error !== null);
  }, name, { timeout: 120_000 });
  expect((await chatState(page)).error?.message ?? null).toBe(null);
  await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
}

export async function send(page, text, stopReason = /^(length|stop)$/) {
  const n = await page.locator('.msg.assistant').count();
  await page.locator('#prompt').fill(text);
  await page.locator('#prompt').press('Enter');
  await expect(page.locator('.msg.assistant').nth(n)).toHaveAttribute('data-stop-reason', stopReason);
  return chatState(page);
}
