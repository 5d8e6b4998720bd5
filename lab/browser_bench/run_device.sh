#!/usr/bin/env bash
# On the lent GPU machine, from the repo root: the engine's bench in a Chromium tab beside Node + Dawn on the 8-layer
# real-dimension qwen35moe (`diskformer bench-tab-vs-node`), in device calls back to back (the machine keeps /tmp and
# /dev/shm only while it stays warm), each carrying .browser-carry/run and what it brings:
#   bash lab/browser_bench/run_device.sh [STEP] [bench options]
# STEP: "collect" (default: keep what the call carries: a part of .browser-carry, or .tab-carry's tar), "model"
# (unpack, then generate the model file with make_tiny.py: --arch qwen35moe --preset real --layers 8), "node" (the
# Node bench), "tab" (the tab bench, then the comparison), "both" (node, then tab, in one call). Every step after
# "collect" first collects what its call carries and unpacks what is complete. Output in $OUT: tab-vs-node/
# (node.json, tab.json, compare.json), run.log. Options after STEP go to `bench-tab-vs-node` (its defaults: budgets
# all,0.25,0.10, prompt 512, decode 128; e.g. --decode 64 --no-profile for a shorter call).
set -uo pipefail
root=$(pwd)
step=${1:-collect}
[ $# -gt 0 ] && shift
run="$root/.browser-carry/run"
scratch=${WEBGPU_COSTS_DIR:-/tmp/webgpu-costs}  # lab/browser_gpu/run_device.sh's: its parts serve both
out=${OUT:-$scratch/out}
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1
[ -f "$run/parts.sha256" ] || { echo "no .browser-carry/run here: carry it in every call (lab/browser_gpu/README.md)"; exit 1; }

source "$run/collect_parts.sh"
tab="$scratch/tab"
if [ -f .tab-carry/tab.tar.xz ]; then
  (cd .tab-carry && sha256sum -c --status tab.sha256) || { echo ".tab-carry/tab.tar.xz is damaged: pack it again"; exit 1; }
  rm -rf "$tab"; mkdir -p "$tab"
  xz -dc -T0 .tab-carry/tab.tar.xz | tar -C "$tab" -xf - || { echo "unpacking .tab-carry failed"; exit 1; }
fi
if [ "$step" = collect ] || [ "$parts_complete" != 1 ] || [ ! -d "$tab/vendor" ]; then
  [ -d "$tab/vendor" ] && echo ".tab-carry: unpacked" || echo ".tab-carry: not here yet (send it in a call of its own)"
  [ "$step" = collect ] && exit 0
  echo "step $step needs every part and .tab-carry on this machine first"; exit 1
fi

# the server serves vendor/ of the repo root (Pyodide, micropip); the Node runner loads Pyodide from there too
[ -d vendor/pyodide ] || cp -r "$tab/vendor" "$root/vendor"
[ -d "$tab/site/starlette" ] || python3 -m pip install -q --no-index --no-deps --target "$tab/site" "$tab"/wheels/*.whl
export PYTHONPATH="$tab/site:$root" PYTHONUNBUFFERED=1 TMPDIR=/dev/shm
# Node (the Node bench's runner and the tab's driver) and the Chromium it starts load the carried libraries; Python
# keeps the machine's own
cat > "$scratch/node.sh" <<NODE
#!/bin/sh
LD_LIBRARY_PATH="$tree/chromium/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$tree/node/node" "\$@"
NODE
chmod +x "$scratch/node.sh"
export DISKFORMER_NODE="$scratch/node.sh" DAWN_NODE="$tree/node/dawn.node" NODE_PATH="$tab/node_modules"
echo "Vulkan driver manifest: $icd"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "no nvidia-smi"
echo "Chromium package: $(cat "$run/chromium-version")"

models=/dev/shm/diskformer-tab/models
mkdir -p "$models"
M=${TAB_BENCH_MODEL:-$models/real8-qwen35moe.gguf}  # TAB_BENCH_MODEL: another file (a check of these steps)
if [ ! -f "$M.done" ] && [ -z "${TAB_BENCH_MODEL:-}" ]; then
  python3 lab/gpu_probes/make_tiny_parallel.py "$tab/make_tiny.py" -- --arch qwen35moe --preset real --layers 8 \
    --out "$M" > "$models/make_tiny.log" 2>&1 && touch "$M.done" || { tail -5 "$models/make_tiny.log"; exit 1; }
fi
ls -l "$M"
[ "$step" = model ] && exit 0

case "$step" in
  node|tab) runs=$step ;;
  both) runs=node,tab ;;
  *) echo "unknown step $step: collect, model, node, tab or both"; exit 2 ;;
esac
python3 -m diskformer.cli bench-tab-vs-node --runs "$runs" --out-dir "$scratch/tab-vs-node" --model "$M" \
  --store-dir "$models/store8" --chromium "$tree/chromium/chromium-headless-shell" --want nvidia \
  --tab-profile /dev/shm/diskformer-tab/profile --timeout 560 "$@"
status=$?
cp -r "$scratch/tab-vs-node" "$out/"
exit $status
