#!/usr/bin/env bash
# On the lent GPU machine, from the repo root, once per part made by pack.sh, calls back to back (the machine keeps
# /tmp only while it stays warm between calls), each carrying DIR/run and the next DIR/part-NN:
#   bash DIR/run/run_device.sh [tab_vs_node.mjs options]
# Each call keeps the part it carries in /tmp; the call that completes the set unpacks them, starts headless Chromium
# on NVIDIA's Vulkan driver and runs tab_vs_node.mjs (the tab beside Node + Dawn). Output, in $OUT where set:
# browser-webgpu-costs.json, run.log, chromium-logs.tgz.
set -uo pipefail
run=$(cd "$(dirname "$0")" && pwd)
carry=$(dirname "$run")
scratch=${WEBGPU_COSTS_DIR:-/tmp/webgpu-costs}
out=${OUT:-$scratch/out}
mkdir -p "$scratch/parts" "$out"
exec > >(tee -a "$out/run.log") 2>&1

for part in "$carry"/part-*; do [ -e "$part" ] && cp "$part" "$scratch/parts/"; done
have=0; need=0
while read -r sum name; do
  need=$((need + 1))
  [ -e "$scratch/parts/$name" ] && echo "$sum  $scratch/parts/$name" | sha256sum -c --status && have=$((have + 1))
done < "$run/parts.sha256"
if [ "$have" -lt "$need" ]; then
  # what the machine has that the run will rely on, while the rest of the parts travel
  ldd --version | head -1; nvidia-smi -L; ls /usr/local/nvidia/share/vulkan/icd.d/ 2>&1; df -h /dev/shm /tmp | tail -2
  for lib in libvulkan.so.1 libGLdispatch.so.0 libX11.so.6 libglib-2.0.so.0 libnss3.so libstdc++.so.6; do
    echo "$lib: $(ldconfig -p | grep -m1 "$lib" | sed 's/.*=> //')"
  done
  echo "this machine has $have of the $need parts in $scratch/parts; send the call with the next part now"
  echo "(the machine must stay warm between these calls; if it was given back, start again with part-00)"
  exit 0
fi

tree="$scratch/tree"
if [ ! -x "$tree/chromium/chromium-headless-shell" ]; then
  mkdir -p "$tree"
  (cd "$scratch/parts" && cat $(cut -d' ' -f3 "$run/parts.sha256")) | xz -dc -T0 | tar -C "$tree" -xf - || {
    echo "unpacking the parts failed"; exit 1; }
fi

# NVIDIA's Vulkan driver manifest: where the image mounts the driver, else the usual places
icd=
for candidate in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
  /etc/vulkan/icd.d/nvidia_icd.json; do
  [ -e "$candidate" ] && { icd=$candidate; break; }
done
if [ -n "$icd" ]; then
  export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
else
  icd="none found (the loader's defaults)"
fi
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
