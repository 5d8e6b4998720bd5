// The CPU expert tier in the browser: the page is cross-origin isolated (the host's COOP/COEP), so the pool's
// module workers share one WebAssembly memory; a request of three F32 experts over two tokens, awaited on the
// main thread (Atomics.waitAsync), matches a plain JS computation of the FFN.
import { test, expect } from '@playwright/test';

test('the CPU expert pool computes experts in Web Workers sharing memory', async ({ page }) => {
  await page.goto('/');
  const result = await page.evaluate(async () => {
    const { createExpertPool } = await import('/cpu_tier/pool.js');
    const nEmbd = 64, nFf = 32;
    const planes = {}; let off = 0;
    for (const [name, n] of [['gate_codes', 4 * nEmbd * nFf], ['up_codes', 4 * nEmbd * nFf], ['gate_scales', 0],
                             ['up_scales', 0], ['down_codes', 4 * nEmbd * nFf], ['down_scales', 0]]) {
      planes[name] = [off, n];
      off = Math.ceil((off + n) / 256) * 256;
    }
    const layout = { types: { gate: 0, up: 0, down: 0 },
                     dims: { gate: [nEmbd, nFf], up: [nEmbd, nFf], down: [nFf, nEmbd] }, planes, record_size: off };
    const pool = await createExpertPool({ layout, workers: 2, slots: 3, tokens: 2 });
    let seed = 7;
    const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 - 0.5; };
    const mats = [];
    for (let s = 0; s < 3; s++) {
      const m = {};
      for (const part of ['gate', 'up', 'down']) {
        m[part] = Float32Array.from({ length: nEmbd * nFf }, rand);
        new Float32Array(pool.record(s).buffer, pool.record(s).byteOffset + planes[`${part}_codes`][0], nEmbd * nFf)
          .set(m[part]);
      }
      mats.push(m);
    }
    const x = Float32Array.from({ length: 2 * nEmbd }, () => 2 * rand());
    const slots = [2, 0, 1], tokens = [0, 1, 1], weights = [0.6, 0.3, 0.1];
    const out = await pool.compute(x, { slots, tokens, weights });
    const want = new Float64Array(2 * nEmbd);
    slots.forEach((s, j) => {
      const xt = x.subarray(tokens[j] * nEmbd, (tokens[j] + 1) * nEmbd);
      const act = Array.from({ length: nFf }, (_, r) => {
        let g = 0, u = 0;
        for (let c = 0; c < nEmbd; c++) { g += mats[s].gate[r * nEmbd + c] * xt[c]; u += mats[s].up[r * nEmbd + c] * xt[c]; }
        return g / (1 + Math.exp(-g)) * u;
      });
      for (let r = 0; r < nEmbd; r++) {
        let y = 0;
        for (let c = 0; c < nFf; c++) y += mats[s].down[r * nFf + c] * act[c];
        want[tokens[j] * nEmbd + r] += weights[j] * y;
      }
    });
    pool.close();
    const scale = Math.max(...want.map(Math.abs));
    const err = Math.max(...Array.from(out, (v, i) => Math.abs(v - want[i]))) / scale;
    return { isolated: crossOriginIsolated, err, n: out.length };
  });
  expect(result.isolated).toBe(true);
  expect(result.n).toBe(128);
  expect(result.err).toBeLessThan(1e-5);
});
