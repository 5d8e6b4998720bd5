// An ES module by URL (the CPU tier's worker pool, web/cpu_tier/pool.js), from Python in Pyodide.
(url) => import(url)
