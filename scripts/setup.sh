#!/usr/bin/env bash
# Set up everything diskformer needs on a fresh Debian 12 machine (idempotent; re-running skips what is there).
#   system: Debian chromium (browser tests), Mesa lavapipe from bookworm-backports (WebGPU through Dawn on the CPU)
#   python: .venv with the host, the reference model and the test tools
#   npm:    Pyodide, Dawn (webgpu), Playwright; Pyodide and micropip's wheel are vendored under vendor/
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ] || ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
  say "installing system packages (chromium, lavapipe)"
  export DEBIAN_FRONTEND=noninteractive
  if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo 'deb http://deb.debian.org/debian bookworm-backports main' | $SUDO tee /etc/apt/sources.list.d/backports.list >/dev/null
  fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq chromium >/dev/null
  # bookworm's own Mesa 22 lavapipe is rejected by Dawn; 25.x from backports works
  $SUDO apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers libvulkan1 >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import diskformer, numpy, gguf, pytest, hypothesis, starlette, uvicorn, httpx' 2>/dev/null \
   || [ pyproject.toml -nt .venv/.installed ]; then
  say "installing Python packages"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test]'
  touch .venv/.installed
fi

if [ ! -d node_modules/pyodide ] || [ ! -d node_modules/webgpu ] || [ package.json -nt node_modules/.installed ]; then
  say "installing npm packages"
  npm install --no-audit --no-fund --loglevel=error
  touch node_modules/.installed
fi

# The CPU expert tier's kernel: expert_ffn.wasm is committed; rebuild it when its WAT source is newer (npm wabt).
if [ -d node_modules/wabt ] && [ web/cpu_tier/expert_ffn.wat -nt web/cpu_tier/expert_ffn.wasm ]; then
  say "assembling the CPU expert kernel"
  node scripts/build_cpu_tier.mjs
fi

# Vendor the Pyodide runtime (served under /pyodide/, never fetched from a CDN) and micropip's wheel.
if [ ! -f vendor/pyodide/pyodide.mjs ] || [ node_modules/.installed -nt vendor/pyodide/pyodide.mjs ]; then
  say "vendoring Pyodide"
  rm -rf vendor/pyodide && mkdir -p vendor/pyodide
  cp -r node_modules/pyodide/. vendor/pyodide/
fi
MICROPIP=micropip-0.11.1-py3-none-any.whl
if [ ! -f "vendor/wheels/$MICROPIP" ]; then
  say "vendoring micropip"
  mkdir -p vendor/wheels
  .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.13 \
      micropip==0.11.1 -d vendor/wheels
fi
say "ready"
