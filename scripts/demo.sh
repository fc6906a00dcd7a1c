#!/usr/bin/env bash
# The README's first quick-start command: installs what is missing and builds (scripts/install.sh,
# quiet when there is nothing to do), then runs the engine demo, `qkv demo-mlp`: an MLP learns
# 3-class 2-D spirals with AdamW, warm-up + cosine LR and gradient clipping, printing the loss.
# Extra arguments go to the demo (see build/qkv demo-mlp --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh
# One OpenMP pool shared with OpenBLAS; idle threads sleep rather than spin (DESIGN.md).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
exec build/qkv demo-mlp "$@"
