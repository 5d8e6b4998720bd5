#!/usr/bin/env bash
# Here: the engine as of a commit, packed for an A/B run on the GPU machine (ab.sh):
#   bash lab/gpu_probes/snapshot.sh NAME [COMMIT]      -> .gpu-carry/NAME.tar.gz (COMMIT defaults to HEAD)
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu-carry
parts=(diskformer py_engine shaders pyproject.toml)
# the bench's own code is in lab/ from the commit that moved it there (before: in diskformer/ and py_engine/)
git cat-file -e "${2:-HEAD}:lab" 2>/dev/null && parts+=(lab)
git archive --format=tar "${2:-HEAD}" "${parts[@]}" | gzip > ".gpu-carry/$1.tar.gz"
echo ".gpu-carry/$1.tar.gz: $(git rev-parse --short "${2:-HEAD}")"
