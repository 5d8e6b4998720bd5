// The bench in the engine's worker: the page's own boot (web/pyodide_boot.js: the vendored Pyodide and the engine
// wheel from this origin), the lab's engine side (lab/engine_bench, /lab-bench/src/) copied into Pyodide's file
// system, the model ingested from the host's Range responses into a store in OPFS (resumed or reused when it is
// already there), then lab.engine_bench.entry.run on that store. Posts {type: 'log'}, then {type: 'done', result}
// (the entry's result with the ingest's figures, as a JSON string) or {type: 'error', error}.
import { fetchOk, installEngine, loadLocalPyodide, loadMicropip } from '/pyodide_boot.js';

const LAB_ROOT = '/lab-src';
const log = (line) => self.postMessage({ type: 'log', line });

async function boot() {
  const t0 = performance.now();
  const pyodide = await loadLocalPyodide({ stdout: log, stderr: log });
  const micropip = await loadMicropip(pyodide);
  await installEngine(pyodide, micropip);
  micropip.destroy();
  const files = await (await fetchOk('/lab-bench/src.json')).json();
  for (const file of files) {
    const text = await (await fetchOk(`/lab-bench/src/${file}`)).text();
    pyodide.FS.mkdirTree(`${LAB_ROOT}/${file.split('/').slice(0, -1).join('/')}`);
    pyodide.FS.writeFile(`${LAB_ROOT}/${file}`, text);
  }
  log(`Pyodide ${pyodide.version}, the engine and ${files.length} lab files in ${Math.round(performance.now() - t0)} ms`);
  return pyodide;
}

const RUN = `
import json, sys, time
import js
sys.path.insert(0, ${JSON.stringify(LAB_ROOT)})
from py_engine.store.manifest import store_bytes
from py_engine.store.opfs import ingest_model
from py_engine.store.sources import HttpSource
from lab.engine_bench.entry import run

async def bench(payload, log):
    payload = json.loads(payload)
    url = js.URL.new(payload["model_url"], js.location.href).href
    moved, last = {}, [0.0]

    def progress(p):
        moved[p.phase] = p.done
        if time.perf_counter() - last[0] > 5 or p.done == p.total:
            last[0] = time.perf_counter()
            log(f"store: {p.phase} {p.done / 1e6:,.0f} of {p.total / 1e6:,.0f} MB")

    t0 = time.perf_counter()
    src = await HttpSource.open(url)
    manifest = await ingest_model(src, payload["folder"], progress=progress)
    ingest_s = time.perf_counter() - t0
    args = dict(payload["args"], store="opfs:" + payload["folder"], resident_from_store=True)
    out = await run(args)
    # bytes that came over HTTP this time (0: the store was complete already and reused)
    fetched = moved.get("ingest", 0)
    out["ingest"] = {"folder": payload["folder"], "reused": not moved, "s": round(ingest_s, 3),
                     "source_bytes": src.size, "store_bytes": store_bytes(manifest), "moved_bytes": moved,
                     "MBps": fetched / ingest_s / 1e6 if fetched and ingest_s else None}
    return json.dumps(out)
bench
`;

self.onmessage = async ({ data }) => {
  try {
    const pyodide = await boot();
    const bench = pyodide.runPython(RUN);
    const result = await bench(JSON.stringify(data), log);
    bench.destroy();
    self.postMessage({ type: 'done', result });
  } catch (error) {
    self.postMessage({ type: 'error', error: String(error?.message ?? error) });
  }
};
