# Sourced on the GPU machine from the repo root: unpack the carried toolchain into a scratch folder (idempotent).
T=${TMPDIR:-/tmp}/diskformer-gpu
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p "$T/pyodide" "$T/models"
[ -x "$T/node" ] || { xz -T4 -dc .gpu-carry/node.xz > "$T/node" && chmod +x "$T/node"; }
[ -f "$T/dawn.node" ] || xz -dc .gpu-carry/dawn.node.xz > "$T/dawn.node"
[ -f "$T/pyodide/pyodide.mjs" ] || tar xJf .gpu-carry/pyodide.tar.xz -C "$T/pyodide"
[ -d "$T/site/gguf" ] || python3 -m pip install -q --no-index --no-deps --target "$T/site" .whl/*.whl
export PYTHONPATH="$T/site:$PWD" DISKFORMER_NODE="$T/node" DISKFORMER_PYODIDE="$T/pyodide" DAWN_NODE="$T/dawn.node"
export PYTHONUNBUFFERED=1 MODELS="$T/models"

# real_model LAYERS LOG: the real-dimension file (ARCH, default qwen35moe; gemma4 too) of that many layers (default seed), made once per machine
# (lab/gpu_probes/make_tiny_parallel.py, all cores); sets M to its path; make_tiny's output goes to LOG
real_model() {
  M="$MODELS/real$1-${ARCH:-qwen35moe}.gguf"
  [ -f "$M.done" ] || { python3 lab/gpu_probes/make_tiny_parallel.py .gpu-carry/make_tiny.py -- --arch "${ARCH:-qwen35moe}" \
    --preset real --layers "$1" --out "$M" > "$2" 2>&1 && touch "$M.done"; }
}
