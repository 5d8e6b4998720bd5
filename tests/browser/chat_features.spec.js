// What a chat app's users expect, in headless Chromium: chats kept across reloads and listed to reopen, rename and
// delete; Regenerate; Edit a sent message and go on from there; Copy; export as Markdown and JSON. Then two tabs
// sharing the model store: a model one tab uses cannot be removed from the other, and each tab hears of the
// other's changes to the store.
import { test, expect } from '@playwright/test';
import { readFileSync } from 'node:fs';
import { chatState, guardNetwork, load, openChat, send, setField } from './page_helpers.js';

const MODEL = 'micro-qwen3moe.gguf';
const OTHER = 'micro-qwen35moe.gguf';

async function settingsForTests(page) {
  await page.locator('#settings-panel').evaluate((d) => { d.open = true; });
  await setField(page, 'set-path', 'store');
  await setField(page, 'set-budget', 512);
  await setField(page, 'set-ctx', 256);
  await setField(page, 'set-thinking', false);
  await setField(page, 'set-temperature', 0);
  await setField(page, 'set-max-tokens', 8);
}

const chatItems = (page) => page.locator('#chat-list li');

async function downloaded(page, button) {
  const [file] = await Promise.all([page.waitForEvent('download'), page.locator(button).click()]);
  return { name: file.suggestedFilename(), text: readFileSync(await file.path(), 'utf8') };
}

test.describe('conversations', () => {
  test.describe.configure({ mode: 'serial' });
  let context;
  let page;
  let blocked;

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL,
      permissions: ['clipboard-read', 'clipboard-write'] });
    blocked = await guardNetwork(context);
    page = await context.newPage();
    await openChat(page, { fresh: true });
    await settingsForTests(page);
    await load(page, `served:${MODEL}`);
  });

  test.afterAll(async () => {
    await context?.close();
  });

  test('a chat is listed once it has a message; Regenerate answers the last question again', async () => {
    await expect(page.locator('#chat-list')).toContainText('no saved chats yet');
    await send(page, 'First question.');
    await expect(chatItems(page)).toHaveCount(1);
    await expect(chatItems(page).first()).toContainText('First question.');
    await send(page, 'Second question.');
    const before = (await chatState(page)).conversation[3].content;
    // only the newest answer offers Regenerate
    await expect(page.locator('.msg.assistant .regenerate')).toHaveCount(1);
    await expect(page.locator('.msg.assistant').nth(1).locator('.regenerate')).toHaveCount(1);
    await page.evaluate(() => { window.diskformer.chat.state.lastResult = null; });
    await page.locator('.msg.assistant .regenerate').click();
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    const st = await chatState(page);
    expect(st.lastResult).not.toBe(null); // a new reply was generated
    expect(st.conversation.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant']);
    expect(st.conversation[3].content).toBe(before); // greedy: the same answer again
    await expect(page.locator('.msg.assistant')).toHaveCount(2);
    await expect(chatItems(page)).toHaveCount(1);
  });

  test('Edit a sent message: Send replaces it and the answers after it', async () => {
    await page.locator('.msg.user').first().locator('.edit').click();
    await expect(page.locator('#prompt')).toHaveValue('First question.');
    await expect(page.locator('#edit-note')).toBeVisible();
    await page.locator('#prompt').fill('A different first question.');
    await page.locator('#prompt').press('Enter');
    await expect(page.locator('.msg.assistant').first()).toHaveAttribute('data-stop-reason', /^(length|stop)$/);
    await expect(page.locator('#chat-panel')).toHaveAttribute('data-state', 'ready');
    const st = await chatState(page);
    expect(st.conversation.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(st.conversation[0].content).toBe('A different first question.');
    await expect(page.locator('.msg')).toHaveCount(2);
    await expect(page.locator('#edit-note')).toBeHidden();
    await expect(chatItems(page)).toHaveCount(1);
    await expect(chatItems(page).first()).toContainText('A different first question.');
  });

  test('Copy puts an answer on the clipboard; Export gives Markdown and JSON', async () => {
    const answer = (await chatState(page)).conversation[1].content;
    await page.locator('.msg.assistant .copy').click();
    await expect(page.locator('.msg.assistant .copy')).toHaveText('Copied');
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(answer);

    const md = await downloaded(page, '#export-md');
    expect(md.name).toBe('a-different-first-question.md');
    expect(md.text).toContain('# A different first question.');
    expect(md.text).toContain(`Model: ${MODEL}`);
    expect(md.text).toContain('## User\n\nA different first question.');
    expect(md.text).toContain(`## Assistant\n\n${answer}`);
    const json = await downloaded(page, '#export-json');
    expect(json.name).toBe('a-different-first-question.json');
    const data = JSON.parse(json.text);
    expect(data.title).toBe('A different first question.');
    expect(data.model).toBe(MODEL);
    expect(data.messages.map((m) => [m.role, m.content])).toEqual([['user', 'A different first question.'],
      ['assistant', answer]]);
    expect(data.messages[1].stats.generated_tokens).toBeGreaterThan(0);
  });

  test('chats survive a reload: reopen, rename, delete', async () => {
    const item = chatItems(page).first();
    await item.getByRole('button', { name: 'Rename' }).click();
    await item.locator('.rename-input').fill('Renamed chat');
    await item.locator('.rename-input').press('Enter');
    await expect(chatItems(page).first().locator('.open-chat')).toHaveText('Renamed chat');

    await page.locator('#new-chat').click();
    await expect(page.locator('.msg')).toHaveCount(0);
    await expect(chatItems(page)).toHaveCount(1); // an empty chat is not saved
    await send(page, 'Another chat.');
    await expect(chatItems(page)).toHaveCount(2);
    await expect(chatItems(page).first()).toContainText('Another chat.'); // newest first

    await openChat(page);
    await expect(chatItems(page)).toHaveCount(2);
    await expect(page.locator('.msg')).toHaveCount(0); // a reload starts a new chat; the old ones are listed
    await chatItems(page).filter({ hasText: 'Renamed chat' }).locator('.open-chat').click();
    await expect(page.locator('.msg')).toHaveCount(2);
    await expect(page.locator('.msg.user')).toHaveText(/A different first question\./);
    await expect(page.locator('.msg.assistant .msg-stats')).toContainText('decode');
    expect((await chatState(page)).conversation).toHaveLength(2);

    const other = chatItems(page).filter({ hasText: 'Another chat.' });
    await other.getByRole('button', { name: 'Delete' }).click();
    await other.getByRole('button', { name: 'Delete', exact: true }).last().click();
    await expect(chatItems(page)).toHaveCount(1);
    await expect(chatItems(page).first()).toContainText('Renamed chat');
    expect([...blocked]).toEqual([]);
  });
});

test.describe('two tabs share the model store', () => {
  test.describe.configure({ mode: 'serial' });
  let context;
  let a;
  let b;

  test.beforeAll(async ({ browser }, testInfo) => {
    context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
    await guardNetwork(context);
    a = await context.newPage();
    await openChat(a, { fresh: true });
    await settingsForTests(a);
    b = await context.newPage();
    await openChat(b);
  });

  test.afterAll(async () => {
    await context?.close();
  });

  test('5. a model in use in one tab is not removed from another; each tab hears of the other\'s changes', async () => {
    test.setTimeout(300_000);
    await load(a, `served:${OTHER}`); // stored by tab A
    // tab B's list shows it without a reload
    const rowB = b.locator(`#stored-models li[data-model="${OTHER}"]`);
    await expect(rowB).toHaveAttribute('data-complete', 'true');

    await rowB.getByRole('button', { name: 'Remove from disk' }).click();
    await rowB.getByRole('button', { name: 'Remove', exact: true }).click();
    await expect(b.locator('#chat-error .error-summary')).toContainText('in use in another tab');
    await expect(rowB).toHaveCount(1);
    await expect(b.locator('#chat-error')).not.toContainText('ModelInUse');
    // tab A still answers from it
    await send(a, 'Are you still there?');
    expect((await chatState(a)).loaded.name).toBe(OTHER);

    // once tab A loads another model, tab B may remove it, and tab A hears of it
    await load(a, `served:${MODEL}`);
    await rowB.getByRole('button', { name: 'Remove from disk' }).click();
    await rowB.getByRole('button', { name: 'Remove', exact: true }).click();
    await expect(b.locator('#store-note:visible').or(b.locator('#chat-error:visible'))).toBeVisible();
    expect((await chatState(b)).error?.message ?? null).toBe(null);
    await expect(rowB).toHaveCount(0);
    await expect(a.locator(`#stored-models li[data-model="${OTHER}"]`)).toHaveCount(0);
    await expect(a.locator('#store-note')).toHaveText(`${OTHER} was removed from this browser in another tab`);
    expect((await chatState(a)).models.stored.map((m) => m.name)).not.toContain(OTHER);
  });
});
