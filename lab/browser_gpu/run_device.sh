#!/usr/bin/env bash
# On the lent GPU machine, from the repo root, once per part made by pack.sh, calls back to back (the machine keeps
# /tmp only while it stays warm between calls), each carrying DIR/run and the next DIR/part-NN:
#   bash DIR/run/run_device.sh [tab_vs_node.mjs options]
# Each call keeps the part it carries in /tmp; the call that completes the set unpacks them, starts headless Chromium
# on NVIDIA's Vulkan driver and runs tab_vs_node.mjs (the tab beside Node + Dawn). Output, in $OUT where set:
# browser-webgpu-costs.json, run.log, chromium-logs.tgz.
set -uo pipefail
run=$(cd "$(dirname "$0")" && pwd)
scratch=${WEBGPU_COSTS_DIR:-/tmp/webgpu-costs}
out=${OUT:-$scratch/out}
mkdir -p "$out"
exec > >(tee -a "$out/run.log") 2>&1

source "$run/collect_parts.sh"
[ "$parts_complete" = 1 ] || { [ "$have" -lt "$need" ] && exit 0 || exit 1; }
export LD_LIBRARY_PATH="$tree/chromium/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DAWN_NODE="$tree/node/dawn.node"
echo "Vulkan driver manifest: $icd"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "no nvidia-smi"
echo "Chromium package: $(cat "$run/chromium-version")"
missing=$(ldd "$tree/chromium/chromium-headless-shell" | grep 'not found')
[ -n "$missing" ] && echo "libraries not found: $missing"

logs="$scratch/logs"
rm -rf "$logs"; mkdir -p "$logs"
"$tree/node/node" "$run/tab_vs_node.mjs" --chromium "$tree/chromium/chromium-headless-shell" --want nvidia \
  --logs "$logs" --out "$out/browser-webgpu-costs.json" "$@"
status=$?
tar -C "$scratch" -czf "$out/chromium-logs.tgz" logs
exit $status
