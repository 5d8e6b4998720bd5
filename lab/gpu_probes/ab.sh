#!/usr/bin/env bash
# On the GPU machine (carry .gpu-carry .gl .whl): engine snapshots (snapshot.sh) on one real-dimension file, each
# profiled once, then PAIRS rounds of unprofiled decode runs, the snapshots in turn (on a shared GPU host only
# ratios measured in one run mean anything; the back-to-back replay figure is the steadiest).
#   bash .gpu-carry/ab.sh LAYERS A B [PAIRS] [C ...]       e.g. bash .gpu-carry/ab.sh 8 old new 2
# (a number among the names is PAIRS, default 2).
# Outputs go to $OUT (the device tool's folder) when set, else to the current folder, and are then packed into one
# archive there, ab.tgz (the device tool brings back only a few files per call).
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 ))s]"; }
L=$1; shift; PAIRS=2; NAMES=(); DEST=${OUT:-$PWD}
for a in "$@"; do if [[ $a =~ ^[0-9]+$ ]]; then PAIRS=$a; else NAMES+=("$a"); fi; done
source .gpu-carry/setup_env.sh
for n in "${NAMES[@]}"; do rm -rf "$T/ab-$n" && mkdir -p "$T/ab-$n" && tar xzf ".gpu-carry/$n.tar.gz" -C "$T/ab-$n"; done
real_model "$L" "$DEST/gen.log"
echo "$(el) model ready: $M"
bench() {  # snapshot, output name, extra bench flags
  (cd "$T/ab-$1" && PYTHONPATH="$T/site:$T/ab-$1" timeout 60 python3 -m diskformer.cli bench --model "$M" \
     --budgets all "${@:3}" > "$DEST/$2.txt" 2>&1)
  local rc=$?
  echo "$(el) $2 rc=$rc"; grep -E "decode tok/s|replays|never submitted|prefill tok/s|busy|each step|in-pass" "$DEST/$2.txt" | grep -v '^{'
}
for n in "${NAMES[@]}"; do bench "$n" "prof_$n" --json-out "$DEST/prof_$n.json"; done
for r in $(seq "$PAIRS"); do for n in "${NAMES[@]}"; do bench "$n" "ab${r}_$n" --no-profile --decode 128; done; done
(cd "$DEST" && tar czf ab.tgz --remove-files prof_*.txt prof_*.json ab[0-9]*_*.txt $( [ -f gen.log ] && echo gen.log ))
echo "$(el) kept: $DEST/ab.tgz"
