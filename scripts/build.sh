#!/usr/bin/env bash
# Rebuild the C++ core in place after editing csrc/ (serialised: one build at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
exec flock /tmp/torchneuron-build.lock .venv/bin/python -m pip install -q --no-build-isolation --no-deps -e .
