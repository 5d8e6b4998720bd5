#!/usr/bin/env bash
# On the GPU machine (device tool `run`, carry .gpu-carry .gl .whl): the streamed cases of docs/performance.md, the
# miss path's stage limits measured in the same run, with the model's routing and with the routing trace.
#   bash .gpu-carry/run_streaming.sh LAYERS [DECODE]    (16 to iterate, 40 for the real depth; DECODE default 64)
# The model file and its store go to /dev/shm (the 40-layer file is 37 GB and its store as much again: more than
# the disk holds). The JSON is written to docs/results/DATE-GPU-real<L>-ARCH.json ($OUT too when set). ARCH=gemma4 in
# the environment measures gemma4 (its real file: 30 layers), the default qwen35moe.
set -u
export TMPDIR=/dev/shm
source .gpu-carry/setup_env.sh
L=${1:-16}
N=${2:-64}
real_model "$L" "$MODELS/make_tiny_$L.log"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | awk '{print tolower($2)}')  # h100, h200
NAME="$(date -u +%Y-%m-%d)-${GPU:-gpu}-real$L-${ARCH:-qwen35moe}.json"
mkdir -p docs/results
python3 -m diskformer.cli bench --model "$M" --budgets 0.25,0.10 --no-profile --decode "$N" --routing-trace \
  --store-dir "$MODELS/store$L-${ARCH:-qwen35moe}" --json-out "docs/results/$NAME" --timeout 580
if [ -n "${OUT:-}" ]; then cp "docs/results/$NAME" "$OUT/"; fi
