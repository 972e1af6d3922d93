#!/usr/bin/env bash
# Set up (if needed) and run the main demo: a tiny Llama trained on `neuron`, loss next to CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/train_demo.py "$@"
