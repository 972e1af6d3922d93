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
# What the installed environment was made from: when it has not changed since the last setup, the pip
# steps are skipped and only the C++ core is brought up to date (scripts/build.sh: incremental, seconds
# when csrc/ is unchanged). pip's editable install would rebuild the whole extension every time (minutes).
STAMP=.venv/.torchneuron-setup
want="$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1) $(readlink -f .)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && $VPY -c "import torch_neuronx" 2>/dev/null; then
  bash scripts/build.sh
else
  rm -f "$STAMP"
  # torch first and pinned: any other version would pull a multi-GB CUDA build.
  $VPY -m pip install -q "torch==2.13.0" setuptools wheel ninja
  # The package and its dependencies, editable; the extension is built next, in place, against the torch
  # just installed (no build isolation): the same incremental build as every later scripts/build.sh.
  TORCHNEURON_EXTENSION_BUILT_IN_PLACE=1 $VPY -m pip install -q --no-build-isolation -e ".[hf,test]"
  bash scripts/build.sh
  echo "$want" > "$STAMP"
fi
# `import nki` before torch (docs/nki.md): the .pth that installs the NKI alias finder at interpreter start. A wheel
# installs it (setup.py data_files); setuptools' editable wheels leave data files out, so put it in place here.
cp torch_neuronx/nki/torch_neuronx_nki.pth "$($VPY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/"
if $VPY -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('torch_xla') is None)"; then
  echo "error: torch-xla is installed in .venv; it switches Transformers/Accelerate to the legacy XLA path. pip uninstall torch-xla" >&2
  exit 1
fi
