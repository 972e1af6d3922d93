#!/usr/bin/env bash
# Set up a fresh machine: a venv in .venv with torch 2.13.0 (CPU), the HF stack
# and TorchNeuron built from this checkout. Idempotent: a second run is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
# torch first and pinned: any other version would pull a multi-GB CUDA build.
$VPY -m pip install -q "torch==2.13.0" setuptools wheel ninja
# The extension builds against the torch just installed (no build isolation).
$VPY -m pip install -q --no-build-isolation -e ".[hf,test]"
if $VPY -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('torch_xla') is None)"; then
  echo "error: torch-xla is installed in .venv; it switches Transformers/Accelerate to the legacy XLA path. pip uninstall torch-xla" >&2
  exit 1
fi
