#!/usr/bin/env bash
# Makes a Python venv with pip's torch, timm, safetensors and numpy, the versions the
# committed timm fixtures were made with, to regenerate them or compare against timm:
#   scripts/timm_venv.sh [DIR]        (default .venv-timm; needs python3-venv and PyPI)
#   DIR/bin/python scripts/make_timm_fixtures.py
# `make test` runs without it (the fixtures are committed; timm_convert.py needs numpy only)
# but uses it when present: tests/e2e_timm.c then builds a timm model of every name
# `timm_convert.py names` lists and compares the converted model's logits (.ci/run makes it).
set -euo pipefail
dir=${1:-.venv-timm}
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "timm_venv: python3-venv is missing: sudo apt-get install python3-venv" >&2
    exit 1
fi
[[ -x $dir/bin/python ]] || python3 -m venv "$dir"
"$dir/bin/pip" install --quiet --upgrade pip
"$dir/bin/pip" install --quiet torch timm==1.0.31 safetensors==0.8.0 numpy
"$dir/bin/python" -c 'import timm, torch, safetensors, numpy; print("timm_venv: ready:", "timm", timm.__version__, "torch", torch.__version__, "safetensors", safetensors.__version__, "numpy", numpy.__version__)'
