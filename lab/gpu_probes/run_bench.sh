#!/usr/bin/env bash
# On the GPU machine (device tool `run`, carry .gpu-carry .gl .whl): the figures of docs/performance.md (keep each run's
# JSON as docs/results/DATE-GPU-FILE.json).
#   bash .gpu-carry/run_bench.sh [LAYERS]      (default 8: the file llama.cpp's peer figures were measured on)
set -u
source .gpu-carry/setup_env.sh
L=${1:-8}
real_model "$L" /dev/null
python3 -m diskformer.cli bench-uploads --count 64
python3 -m diskformer.cli bench --model "$M" --budgets all
python3 -m diskformer.cli bench --model "$M" --budgets all --no-profile --decode 64 --step-by-step
python3 -m diskformer.cli bench --model "$M" --budgets 0.25,0.10 --no-profile --store-dir "$MODELS/stores"
