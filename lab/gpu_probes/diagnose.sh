#!/usr/bin/env bash
# On the GPU machine (carry .gpu-carry .gl .whl), no model needed: the kernel diagnostics that say where a decode
# kernel's time goes, in one call (~1 minute), every output kept in one archive under $OUT (or the current folder):
#   bash lab/gpu_probes/diagnose.sh
# step_kernels (attention, the recurrence), matvec_anatomy (a product's parts, cold and warm weights, parameters in
# the code), grid_barrier (a persistent dispatch's barrier, stale reads, streaming phases), persistent_chain (a
# chain of products as dispatches or as one persistent dispatch), dispatch_chain (the launch and barrier floor),
# loads_across_barriers (whether a lane's loads stay in flight across a staging's barriers), l2_prefetch (a
# product's weights read into the L2 cache by extra workgroups of the dispatch before it). Pass --tiny to try it
# anywhere.
set -u
DEST=${OUT:-$PWD}
[ "${1:-}" = --tiny ] || source .gpu-carry/setup_env.sh
NODE=${DISKFORMER_NODE:-node}
work=$(mktemp -d)
for tool in loads_across_barriers l2_prefetch step_kernels matvec_anatomy grid_barrier persistent_chain dispatch_chain; do
  start=$(date +%s)
  timeout 240 "$NODE" "lab/gpu_probes/$tool.mjs" "$@" > "$work/$tool.jsonl" 2> "$work/$tool.err"
  echo "$tool rc=$? $(( $(date +%s) - start ))s"
  grep -v '^Warning' "$work/$tool.err" | tail -3
  cat "$work/$tool.jsonl"
done
tar czf "$DEST/diagnose.tgz" -C "$work" .
echo "kept: $DEST/diagnose.tgz"
