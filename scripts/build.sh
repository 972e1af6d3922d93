#!/usr/bin/env bash
# Rebuild the C++ core in place after editing csrc/: incremental (ninja, ./build), one build at a
# time. The package itself was installed (editable) by scripts/setup.sh.
# TORCHNEURON_SANITIZE=1: build it with ASan + UBSan instead, into build/sanitize only (objects in
# build/sanitize/temp*, an importable copy of the package in build/sanitize/lib); the in-place build is
# untouched. scripts/sanitize.sh runs the tests against that copy.
set -euo pipefail
cd "$(dirname "$0")/.."
export MAX_JOBS=${MAX_JOBS:-2} TORCH_DEVICE_BACKEND_AUTOLOAD=0
if [ "${TORCHNEURON_SANITIZE:-0}" != "0" ]; then
  lib=build/sanitize/lib
  # The Python sources as they are now, then the sanitized extension next to them.
  rm -rf "$lib/torch_neuronx.tmp" && mkdir -p "$lib" && cp -r torch_neuronx "$lib/torch_neuronx.tmp"
  find "$lib/torch_neuronx.tmp" \( -name '_C*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
  [ -d "$lib/torch_neuronx" ] && find "$lib/torch_neuronx" -maxdepth 1 -name '_C*.so' -exec mv {} "$lib/torch_neuronx.tmp/" \;
  rm -rf "$lib/torch_neuronx" && mv "$lib/torch_neuronx.tmp" "$lib/torch_neuronx"
  exec flock /tmp/torchneuron-build.lock .venv/bin/python setup.py -q build_ext --build-lib "$lib"
fi
exec flock /tmp/torchneuron-build.lock .venv/bin/python setup.py -q build_ext --inplace
