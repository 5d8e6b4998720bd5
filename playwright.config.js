// Browser tests: headless Debian Chromium (no Playwright-downloaded browsers), WebGPU on SwiftShader, against
// `diskformer serve` started here. The pytest wrapper (tests/browser/test_browser.py) runs this with CI=1 on a free port.
import { defineConfig } from '@playwright/test';

const PORT = Number(process.env.DISKFORMER_TEST_PORT || 8799);
const BASE_URL = `http://127.0.0.1:${PORT}`;

// The quiet flags keep Chromium from calling home; WebGPU itself needs only --enable-unsafe-webgpu.
export const QUIET_ARGS = [
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
  '--no-sandbox',
];
export const WEBGPU_ARGS = ['--enable-unsafe-webgpu'];

export default defineConfig({
  testDir: 'tests/browser',
  outputDir: 'test-results',
  workers: 1,
  fullyParallel: false,
  retries: 0,
  forbidOnly: !!process.env.CI,
  // Pyodide boots in a few seconds, slower on a busy 2-core machine; SwiftShader runs the kernels on the CPU.
  timeout: 180_000,
  expect: { timeout: 90_000 },
  reporter: [['list']],
  use: {
    browserName: 'chromium',
    baseURL: BASE_URL,
    headless: true,
    launchOptions: {
      executablePath: process.env.DISKFORMER_CHROMIUM || '/usr/bin/chromium',
      args: [...WEBGPU_ARGS, ...QUIET_ARGS],
    },
    trace: 'off',
  },
  webServer: {
    // fixtures/models: the fixture GGUFs (tests/conftest.py generates them), served at /models/ for chat.spec.js
    command: `.venv/bin/diskformer serve --port ${PORT} --models fixtures/models`,
    url: `${BASE_URL}/`,
    reuseExistingServer: !process.env.CI,
    timeout: 60_000,
    stdout: 'pipe',
    stderr: 'pipe',
  },
});
