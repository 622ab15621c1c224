#!/usr/bin/env bash
# Installs the Debian packages vitrain needs, only those missing. Idempotent; quick
# (no apt at all) when everything is present. Uses sudo only when not root.
#   scripts/deps.sh           build + run + test dependencies
#   scripts/deps.sh --torch   also python3-torch (only to regenerate test fixtures)
#   scripts/deps.sh --fuzz    also clang, libFuzzer and LLVM's OpenMP (make fuzz)
#   scripts/deps.sh --slurm   also Slurm and munge (tests/e2e_slurm.c starts a one-node
#                             Slurm; without them it skips)
set -euo pipefail
pkgs=(gcc make pkg-config libcjson-dev libstb-dev libpng-dev zlib1g-dev libsimde-dev
      libopenmpi-dev openmpi-bin dataset-fashion-mnist python3-matplotlib python3-numpy
      iproute2)
for opt in "$@"; do
    case $opt in
    --torch) pkgs+=(python3-torch) ;;
    --fuzz) pkgs+=(clang libclang-rt-dev libomp-dev) ;;
    --slurm) pkgs+=(slurmctld slurmd slurm-client munge) ;;
    *) echo "deps: unknown option $opt (--torch, --fuzz, --slurm)" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "deps: all present (${pkgs[*]})"
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
