#!/usr/bin/env bash
# Makes a Python venv with pip's tensorboard, whose event-file reader tests/e2e_logging.c
# uses (through tests/tensorboard_check.py) to read the event files vitrain writes, and
# with which `DIR/bin/tensorboard --logdir runs` shows the curves:
#   scripts/tensorboard_venv.sh [DIR]     (default .venv-tensorboard; needs python3-venv
#                                          and PyPI; scripts/deps.sh --tensorboard runs it)
# Quick when DIR already has tensorboard.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.venv-tensorboard}
if [[ -x $dir/bin/python ]] && "$dir/bin/python" -c 'import tensorboard' 2>/dev/null; then
    echo "tensorboard_venv: $dir ready"
    exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "tensorboard_venv: python3-venv is missing: sudo apt-get install python3-venv (or scripts/deps.sh --tensorboard)" >&2
    exit 1
fi
[[ -x $dir/bin/python ]] || python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --upgrade pip
"$dir/bin/pip" install --quiet tensorboard
"$dir/bin/python" -c 'import tensorboard; print("tensorboard_venv: ready: tensorboard", tensorboard.__version__)'
