// Runs the Python engine (py_engine) in Pyodide inside Node, with WebGPU from Dawn (npm `webgpu`).
//
//   node diskformer/node/run_engine.mjs (--entry MODULE:FUNCTION | --code FILE.py) [--args JSON]
//        [--mount HOSTDIR]... [--package DIR]... [--engine-root DIR] [--shaders DIR]
//
// The entry function is called with the decoded --args object (a dict); a coroutine is awaited. Its result is
// printed on stdout as one line `RESULT <json>`; everything Python prints goes to stderr. A Python exception
// prints its traceback on stderr and exits with status 1; a set-up failure (no Pyodide, no Dawn, no adapter) exits 2.
//
// Paths: Pyodide from $DISKFORMER_PYODIDE, else node_modules/pyodide or vendor/pyodide of the repo; Dawn from
// $DAWN_NODE, else node_modules/webgpu/dist/linux-x64/dawn.node. The engine tree is copied into Pyodide's memory
// file system at /engine/py_engine with the shaders at /engine/py_engine/shaders, the layout of the installed
// wheel in the browser. Each --mount HOSTDIR is mounted (NODEFS) at the same absolute path, so model paths are
// the same inside and outside. Each --package DIR (a folder of the engine root holding Python code that is not the
// engine's, e.g. lab/engine_bench for the bench) is copied to /engine/DIR with its .py and .wgsl files and the
// __init__.py of the folders above it, so it imports under the same name as on the host (lab.engine_bench).
import { createRequire } from 'module';
import fs from 'fs';
import path from 'path';
import { fileURLToPath } from 'url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');

function fail(code, msg) {
  process.stderr.write(`run_engine: ${msg}\n`);
  process.exit(code);
}

function parseArgs(argv) {
  const o = { mounts: [], packages: [], args: '{}' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) fail(2, `${a} needs a value`);
      return argv[++i];
    };
    if (a === '--entry') o.entry = val();
    else if (a === '--code') o.code = val();
    else if (a === '--args') o.args = val();
    else if (a === '--args-file') o.args = fs.readFileSync(val(), 'utf8');
    else if (a === '--mount') o.mounts.push(path.resolve(val()));
    else if (a === '--package') o.packages.push(val());
    else if (a === '--engine-root') o.engineRoot = path.resolve(val());
    else if (a === '--shaders') o.shaders = path.resolve(val());
    else fail(2, `unknown argument ${a}`);
  }
  if (!o.entry === !o.code) fail(2, 'give exactly one of --entry MODULE:FUNCTION or --code FILE.py');
  try { JSON.parse(o.args); } catch (e) { fail(2, `--args is not JSON: ${e.message}`); }
  return o;
}

function firstExisting(cands, what) {
  for (const c of cands) if (c && fs.existsSync(c)) return c;
  fail(2, `${what} not found; looked in: ${cands.filter(Boolean).join(', ')}`);
}

// Copy a host directory tree into Pyodide's FS (skipping caches), so the engine sees plain files like in a wheel.
function copyTree(FS, src, dst, keep) {
  FS.mkdirTree(dst);
  for (const ent of fs.readdirSync(src, { withFileTypes: true })) {
    if (ent.name === '__pycache__' || ent.name.startsWith('.')) continue;
    const s = path.join(src, ent.name), d = `${dst}/${ent.name}`;
    if (ent.isDirectory()) copyTree(FS, s, d, keep);
    else if (ent.isFile() && keep(ent.name)) FS.writeFile(d, fs.readFileSync(s));
  }
}

const opts = parseArgs(process.argv.slice(2));
const engineRoot = opts.engineRoot || repo;
const pyEngineDir = path.join(engineRoot, 'py_engine');
if (!fs.existsSync(pyEngineDir)) fail(2, `no py_engine/ in ${engineRoot}`);
const shadersDir = opts.shaders || firstExisting(
  [path.join(pyEngineDir, 'shaders'), path.join(engineRoot, 'shaders')], 'shaders/');
const pyodideDir = firstExisting([
  process.env.DISKFORMER_PYODIDE, path.join(repo, 'node_modules', 'pyodide'), path.join(repo, 'vendor', 'pyodide'),
], 'Pyodide (set DISKFORMER_PYODIDE)');
const dawnPath = firstExisting([
  process.env.DAWN_NODE, path.join(repo, 'node_modules', 'webgpu', 'dist', 'linux-x64', 'dawn.node'),
], 'dawn.node (set DAWN_NODE)');

// Order matters: Pyodide must start before Dawn's globals are installed (they break its start-up).
const { loadPyodide } = await import(path.join(pyodideDir, 'pyodide.mjs'));
const py = await loadPyodide({ indexURL: pyodideDir + path.sep });
py.setStdout({ batched: (s) => process.stderr.write(s + '\n') });
py.setStderr({ batched: (s) => process.stderr.write(s + '\n') });
let dawn;
try {
  dawn = require(dawnPath);
} catch (e) {
  fail(2, `cannot load Dawn from ${dawnPath}: ${e.message}`);
}
Object.assign(globalThis, dawn.globals);
globalThis.navigator = { gpu: dawn.create((process.env.DAWN_OPTS || '').split(',').filter(Boolean)) };

const FS = py.FS;
copyTree(FS, pyEngineDir, '/engine/py_engine', (n) => !n.endsWith('.pyc'));
copyTree(FS, shadersDir, '/engine/py_engine/shaders', (n) => n.endsWith('.wgsl'));
for (const p of opts.packages) {
  const src = path.resolve(engineRoot, p);
  const rel = path.relative(engineRoot, src);
  if (!rel || rel.startsWith('..') || path.isAbsolute(rel) || !fs.existsSync(src) || !fs.statSync(src).isDirectory()) {
    fail(2, `--package ${p}: no such folder inside ${engineRoot}`);
  }
  const parts = rel.split(path.sep);
  for (let i = 1; i < parts.length; i++) {  // the enclosing packages, so the dotted name imports
    const dir = parts.slice(0, i);
    const init = path.join(engineRoot, ...dir, '__init__.py');
    FS.mkdirTree(`/engine/${dir.join('/')}`);
    if (fs.existsSync(init)) FS.writeFile(`/engine/${dir.join('/')}/__init__.py`, fs.readFileSync(init));
  }
  copyTree(FS, src, `/engine/${parts.join('/')}`, (n) => n.endsWith('.py') || n.endsWith('.wgsl'));
}
for (const m of opts.mounts) {
  if (!fs.existsSync(m)) fail(2, `--mount ${m}: no such directory`);
  FS.mkdirTree(m);
  FS.mount(py.FS.filesystems.NODEFS, { root: m }, m);
}

globalThis.__dfArgs = opts.args;
let runner;
if (opts.entry) {
  const [mod, fn] = opts.entry.split(':');
  if (!mod || !fn) fail(2, `--entry wants MODULE:FUNCTION, got ${opts.entry}`);
  runner = `
import importlib, inspect, json, sys, js
sys.path.insert(0, "/engine")
_fn = getattr(importlib.import_module(${JSON.stringify(mod)}), ${JSON.stringify(fn)})
_res = _fn(json.loads(js.__dfArgs))
if inspect.isawaitable(_res):
    _res = await _res
json.dumps(_res)
`;
} else {
  const code = fs.readFileSync(opts.code, 'utf8');
  // A code file defines `main(args)` (sync or async) and is run as a module named __engine_code__.
  globalThis.__dfCode = code;
  runner = `
import inspect, json, sys, types, js
sys.path.insert(0, "/engine")
_m = types.ModuleType("__engine_code__")
exec(compile(js.__dfCode, ${JSON.stringify(opts.code)}, "exec"), _m.__dict__)
if not hasattr(_m, "main"):
    raise SystemExit("the code file defines no main(args)")
_res = _m.main(json.loads(js.__dfArgs))
if inspect.isawaitable(_res):
    _res = await _res
json.dumps(_res)
`;
}

try {
  const out = await py.runPythonAsync(runner);
  // exit only once the whole line is flushed (a large result must not be cut off by process.exit)
  process.stdout.write(`RESULT ${out}\n`, () => process.exit(0));
} catch (e) {
  // PythonError.message holds the full traceback.
  process.stderr.write(`${e.message || e}\n`);
  process.exit(1);
}
