#!/usr/bin/env bash
# Pack what `bench-tab-vs-node` needs on the lent GPU machine beside lab/browser_gpu's parts (Chromium, Node, Dawn):
#   bash lab/browser_bench/pack.sh [DEST]
# DEST (default: .tab-carry in the repo root; keep it ignored by git, as .browser-carry) gets tab.tar.xz (one device
# call: at most ~50 MiB with the repo's own files) and tab.sha256. The tar holds vendor/ (Pyodide and micropip's
# wheel, which `diskformer serve` serves to the tab and the Node runner loads), node_modules/playwright-core (the
# browser driver), wheels/ (starlette, uvicorn and their dependencies for the machine's Python 3.12; gguf for
# make_tiny.py; numpy is on the machine) and make_tiny.py. Needs pip with access to PyPI, and xz.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dest=$(mkdir -p "${1:-$root/.tab-carry}" && cd "${1:-$root/.tab-carry}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tree/vendor" "$work/tree/node_modules" "$work/tree/wheels"
cp -rL "$root/vendor/pyodide" "$root/vendor/wheels" "$work/tree/vendor/"
cp -rL "$root/node_modules/playwright-core" "$work/tree/node_modules/"
cp "$root/../shared/tools/make_tiny.py" "$work/tree/"
py="$root/.venv/bin/python"
deps=$(sed -n '/^dependencies = \[/,/^\]/p' "$root/pyproject.toml" | grep -o '"[^"]*"' | tr -d '"')
# shellcheck disable=SC2086
"$py" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform any -d "$work/tree/wheels" $deps
"$py" -m pip download -q --no-deps -d "$work/tree/wheels" gguf==0.19.0
ls "$work/tree/wheels"
rm -f "$dest/tab.tar.xz"
tar -C "$work/tree" -cf - vendor node_modules wheels make_tiny.py | xz -9 -T2 > "$dest/tab.tar.xz"
(cd "$dest" && sha256sum tab.tar.xz > tab.sha256)
ls -l "$dest"
echo "carry ${dest#$root/} in one device call (with .browser-carry/run): see lab/browser_gpu/README.md"
