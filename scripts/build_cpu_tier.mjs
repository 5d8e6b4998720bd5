// Assemble the CPU expert tier's kernel, web/cpu_tier/expert_ffn.wat, into expert_ffn.wasm beside it (npm `wabt`).
//   node scripts/build_cpu_tier.mjs            write the .wasm
//   node scripts/build_cpu_tier.mjs --check    exit 1 when the committed .wasm differs from a fresh build
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const dir = new URL('../web/cpu_tier/', import.meta.url);
const watPath = new URL('expert_ffn.wat', dir);
const wasmPath = new URL('expert_ffn.wasm', dir);

let wabtInit;
try {
  wabtInit = require('wabt');
} catch {
  console.error('the npm package wabt is missing: run scripts/setup.sh (it installs the devDependencies)');
  process.exit(2);
}
const wabt = await wabtInit();
const features = { simd: true, threads: true };  // SIMD128; a shared memory (the workers' common heap)
const mod = wabt.parseWat('expert_ffn.wat', readFileSync(watPath, 'utf8'), features);
mod.resolveNames();
mod.validate(features);
const bytes = Buffer.from(mod.toBinary({ log: false, write_debug_names: false }).buffer);
mod.destroy();

if (process.argv.includes('--check')) {
  const same = existsSync(wasmPath) && Buffer.compare(readFileSync(wasmPath), bytes) === 0;
  console.log(same ? 'expert_ffn.wasm is up to date' : 'expert_ffn.wasm differs from expert_ffn.wat: rebuild it');
  process.exit(same ? 0 : 1);
}
writeFileSync(wasmPath, bytes);
console.log(`expert_ffn.wasm: ${bytes.length} bytes`);
