"""The lab: benchmarks, GPU probes and experiment tools, kept apart from the product.

Nothing here goes into the engine wheel the page installs (diskformer/engine_wheel.py packs py_engine/ and shaders/
only). `diskformer bench`, `bench-uploads` and `policy-lab` run from here."""

# The lab's code that runs inside the engine's Pyodide (a folder of the repo): the Node runner copies it beside
# py_engine for bench runs only (diskformer/node_engine.py, run_in_node(packages=...)).
ENGINE_SIDE = "lab/engine_bench"
