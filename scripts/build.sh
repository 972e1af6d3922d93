#!/usr/bin/env bash
# Rebuild the C++ core in place after editing csrc/: incremental (ninja, ./build), one build at a
# time. The package itself was installed (editable) by scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export MAX_JOBS=${MAX_JOBS:-2} TORCH_DEVICE_BACKEND_AUTOLOAD=0
exec flock /tmp/torchneuron-build.lock .venv/bin/python setup.py -q build_ext --inplace
