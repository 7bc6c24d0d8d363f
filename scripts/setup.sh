#!/usr/bin/env bash
# Installs the Debian packages OctoPipe needs (idempotent, quiet when already installed), then
# configures and builds build/. Usage: scripts/setup.sh [--no-build] [--target T]...
# (--target builds only the named CMake targets, e.g. octoplan for the demo; default: everything)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config libcli11-dev libyaml-cpp-dev libfmt-dev nlohmann-json3-dev
          catch2 libopenmpi-dev openmpi-bin libopenblas-dev python3 python3-yaml librsvg2-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Optional: Slurm and munge for test/slurm, which starts its own single-node cluster (generated
# config, own ports) to submit scripts/slurm/*.sbatch. A failed install only makes that test skip.
install_optional_slurm() {
  local optional=(slurmctld slurmd slurm-client munge) absent=() p
  for p in "${optional[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || absent+=("$p")
  done
  ((${#absent[@]})) || return 0
  echo "setup: installing ${absent[*]} (optional, for the Slurm test)"
  local sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  if ! { "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
         "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
           "${absent[@]}"; } >/dev/null 2>&1; then
    echo "setup: warning: could not install ${absent[*]}; the Slurm test will be skipped" >&2
  fi
}
install_optional_slurm

targets=()
while (($#)); do
  case $1 in
    --no-build) exit 0 ;;
    --target) targets+=(--target "$2"); shift ;;
    *) echo "setup: unknown option $1 (expected --no-build or --target T)" >&2; exit 2 ;;
  esac
  shift
done

jobs=${OCTO_JOBS:-$(nproc)}
if [[ ! -f build/CMakeCache.txt ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${OCTO_CMAKE_ARGS:-}
fi
cmake --build build -j "$jobs" "${targets[@]}"
