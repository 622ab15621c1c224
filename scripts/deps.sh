#!/usr/bin/env bash
# Installs the Debian packages vitrain needs, only those missing. Idempotent; quick
# (no apt at all) when everything is present. Uses sudo only when not root.
#   scripts/deps.sh           build + run + test dependencies
#   scripts/deps.sh --torch   also python3-torch (only to regenerate test fixtures)
#   scripts/deps.sh --fuzz    also clang, libFuzzer and LLVM's OpenMP (make fuzz)
#   scripts/deps.sh --tensorboard   also python3-venv, then pip's tensorboard in
#                             .venv-tensorboard (scripts/tensorboard_venv.sh; its reader
#                             checks our event files in tests/e2e_logging.c)
# Options combine (scripts/deps.sh --fuzz --tensorboard).
set -euo pipefail
pkgs=(gcc make pkg-config libcjson-dev libstb-dev libpng-dev zlib1g-dev libsimde-dev
      libopenmpi-dev openmpi-bin dataset-fashion-mnist python3-matplotlib python3-numpy
      python3-venv)
tensorboard=0
for opt in "$@"; do
    case $opt in
    --torch) pkgs+=(python3-torch) ;;
    --fuzz) pkgs+=(clang libclang-rt-dev libomp-dev) ;;
    --tensorboard) tensorboard=1 ;;
    *) echo "deps: unknown option '$opt' (expected --torch, --fuzz or --tensorboard)" >&2; exit 2 ;;
    esac
done
venv() { if ((tensorboard)); then "$(dirname "$0")/tensorboard_venv.sh"; fi; }

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "deps: all present (${pkgs[*]})"
    venv
    exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
venv
