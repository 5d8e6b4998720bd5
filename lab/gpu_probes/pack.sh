#!/usr/bin/env bash
# Pack what the lent GPU machine needs (it has no Node, npm or internet) into ignored folders of the repo:
#   .gpu-carry/  node, dawn.node, Pyodide (xz), make_tiny.py, this folder's scripts
#   .gl/         the Vulkan loader AND the glvnd libraries: NVIDIA's Vulkan ICD (libGLX_nvidia) needs
#                libGLdispatch, and without it Dawn finds no adapter
#   .whl/        the gguf wheel for make_tiny.py (numpy is on the machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu-carry .gl .whl
xz -T2 -c "$(command -v node)" > .gpu-carry/node.xz
xz -c node_modules/webgpu/dist/linux-x64/dawn.node > .gpu-carry/dawn.node.xz
tar cJf .gpu-carry/pyodide.tar.xz -C node_modules/pyodide .
cp ../shared/tools/make_tiny.py lab/gpu_probes/setup_env.sh lab/gpu_probes/run_bench.sh lab/gpu_probes/run_streaming.sh \
  lab/gpu_probes/ab.sh .gpu-carry/
lists=$(mktemp -d); mkdir -p "$lists/partial"
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$lists"
apt-get $o update -qq
(cd .gl && apt-get $o download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2)
.venv/bin/python -m pip download -q --no-deps -d .whl gguf==0.19.0
du -sh .gpu-carry .gl .whl
