// Chromium's flag sets for WebGPU on the GPU machine, and what to keep of its GPU facts: shared by tab_vs_node.mjs
// (WebGPU's basic costs) and lab/browser_bench/run_tab.mjs (the engine's bench in a tab).

// Flags every attempt gets: no sandbox (the GPU machine runs as root), WebGPU on with its adapter's full facts,
// and the quiet flags the CPU machines' browser tests use.
export const BASE_FLAGS = ['--headless', '--no-sandbox', '--enable-unsafe-webgpu', '--enable-webgpu-developer-features',
  '--no-first-run', '--no-default-browser-check', '--disable-background-networking', '--disable-component-update',
  '--disable-sync', '--disable-quic', '--mute-audio', '--enable-logging=stderr'];
export const FLAG_SETS = {
  // Vulkan for Chromium's GPU process and ANGLE, no window surface (there is no display), the GPU blocklist ignored
  vulkan: ['--enable-features=Vulkan', '--use-vulkan=native', '--use-angle=vulkan', '--disable-vulkan-surface',
    '--ignore-gpu-blocklist', '--enable-gpu'],
  // the smallest set known to give headless Chrome an NVIDIA adapter on Linux
  'vulkan-min': ['--enable-features=Vulkan', '--use-angle=vulkan', '--disable-vulkan-surface'],
  // as 'vulkan', with Dawn's adapter forced to the default (non-SwiftShader) one and GL through ANGLE
  'vulkan-angle-gl': ['--enable-features=Vulkan', '--use-vulkan=native', '--use-gl=angle', '--use-angle=vulkan',
    '--disable-vulkan-surface', '--ignore-gpu-blocklist', '--enable-gpu', '--use-webgpu-adapter=default'],
  // what the CPU machines use: WebGPU on SwiftShader
  default: [],
};
export const DEFAULT_ORDER = 'vulkan,vulkan-min,vulkan-angle-gl,default';

// the flag set names in `list` ("a,b"), each checked
export function flagSets(list) {
  const names = list.split(',').filter(Boolean);
  for (const name of names) {
    if (!FLAG_SETS[name]) throw new Error(`no flag set "${name}"; known: ${Object.keys(FLAG_SETS).join(', ')}`);
  }
  return names;
}

// Chromium's GPU facts (DevTools SystemInfo.getInfo, what chrome://gpu shows), the driver's and ANGLE's lines kept
export function gpuFacts(info) {
  const gpu = info.gpu || {};
  const aux = gpu.auxAttributes || {};
  const keep = {};
  for (const [key, value] of Object.entries(aux)) {
    if (/vulkan|gl_?renderer|gl_?vendor|gl_?version|driver|angle|display|gpu|skia|webgpu/i.test(key)) keep[key] = value;
  }
  return { devices: gpu.devices, featureStatus: gpu.featureStatus, auxAttributes: keep,
    driverBugWorkarounds: (gpu.driverBugWorkarounds || []).length };
}

// whether an adapter probe ({adapter} or {error}) is the one asked for: a vendor name, `gpu` for any non-fallback
// adapter, `any` for the first adapter at all
export function wanted(probe, want) {
  if (!probe || probe.error) return false;
  if (want === 'any') return true;
  if (probe.adapter.isFallbackAdapter) return false;
  if (want === 'gpu') return true;
  return JSON.stringify(probe.adapter).toLowerCase().includes(want.toLowerCase());
}
