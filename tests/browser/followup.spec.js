// Follow-ups on a model with recurrent layers (qwen35moe's Gated DeltaNet), in headless Chromium: four turns, where
// each follow-up goes back to the state kept at the last answer's header (a checkpoint of the recurrent state) and
// prefills only the new turn, so the time to the first token does not grow with the conversation. The prefilled
// token counts are the check; the times per turn are reported (SwiftShader's times vary with the machine's load).
import { test, expect } from '@playwright/test';
import { guardNetwork, load, openChat, send, setField } from './page_helpers.js';

const MODEL = 'micro-qwen35moe.gguf';
const MAX_TOKENS = 8;
// the generation prompt after the last header (<|im_start|>assistant\n<think>\n\n</think>\n\n) is a few tokens: a
// follow-up keeps everything before the previous turn's header
const HEADER_TOKENS = 12;

test('follow-ups prefill only the new turn; the first token does not wait longer as the chat grows', async ({ browser }, testInfo) => {
  test.setTimeout(600_000);
  const context = await browser.newContext({ baseURL: testInfo.project.use.baseURL });
  const blocked = await guardNetwork(context);
  const page = await context.newPage();
  await openChat(page, { fresh: true });
  await page.locator('#settings-panel').evaluate((d) => { d.open = true; });
  await setField(page, 'set-path', 'store');
  await setField(page, 'set-budget', 512);
  await setField(page, 'set-ctx', 512);
  await setField(page, 'set-thinking', false);
  await setField(page, 'set-temperature', 0);
  await setField(page, 'set-max-tokens', MAX_TOKENS);
  await load(page, `served:${MODEL}`);

  const turns = [];
  for (const question of ['Explain what a mixture-of-experts model is.', 'And then what?', 'And then what?',
    'And then what?']) {
    const st = await send(page, question);
    const s = st.lastResult.stats;
    turns.push({ prompt: s.prompt_tokens, reused: s.reused_tokens, prefilled: s.prefilled_tokens,
                 restored: s.restored_checkpoint, reset: s.cache_reset, answer: s.generated_tokens,
                 firstTokenS: s.first_token_seconds, prefillS: s.prefill_seconds });
  }
  const report = turns.map((t, i) => `turn ${i + 1}: ${t.prompt} prompt tokens, ${t.prefilled} prefilled, `
    + `${t.reused} reused, prefill ${t.prefillS.toFixed(2)} s, first token ${t.firstTokenS.toFixed(2)} s`).join('\n');
  console.log(report);
  testInfo.annotations.push({ type: 'time to first token', description: report });

  expect(turns[0].reused).toBe(0);
  for (let i = 1; i < turns.length; i++) {
    const [before, t] = [turns[i - 1], turns[i]];
    // back to the checkpoint at the last answer's header: nothing reset, the whole earlier conversation kept
    expect(t.reset).toBe(false);
    expect(t.restored).toBe(t.reused);
    expect(t.reused).toBeGreaterThanOrEqual(before.prompt - HEADER_TOKENS);
    expect(t.reused).toBeLessThan(before.prompt);
    expect(t.prefilled).toBe(t.prompt - t.reused);
  }
  // the same question after an answer of at most MAX_TOKENS: the same work, however long the chat has grown
  const last = turns[turns.length - 1];
  expect(last.prompt).toBeGreaterThan(turns[1].prompt);
  expect(Math.abs(last.prefilled - turns[1].prefilled)).toBeLessThanOrEqual(MAX_TOKENS);
  expect(last.prefilled).toBeLessThan(last.prompt / 2);
  // the meter says how many tokens came from the checkpoint
  await expect(page.locator('.msg.assistant').last().locator('.msg-stats')).toContainText('reused');
  expect([...blocked]).toEqual([]);
  await context.close();
});
