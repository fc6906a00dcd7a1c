#!/usr/bin/env bash
# Installs every Debian package qkv needs (idempotent, quiet when nothing is missing),
# then configures and builds the Release tree in build/ (and build-asan/ with --asan).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(build-essential cmake ninja-build pkg-config git
      libopenblas-openmp-dev libgtest-dev libgmock-dev libbenchmark-dev
      nlohmann-json3-dev libcli11-dev libpng-dev libfreetype-dev fonts-dejavu-core
      python3-torch python3-numpy)
# Node.js runs the reference tokenizers (npm packages); the nodesource build ships npm itself.
command -v node >/dev/null || PKGS+=(nodejs)
command -v npm >/dev/null || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "qkv: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build() {  # build <dir> <cmake args...>
  local dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  fi
  cmake --build "$dir" -- --quiet 2>&1 | grep -v '^ninja: no work to do' || true
  test "${PIPESTATUS[0]}" = 0
}

build build -DCMAKE_BUILD_TYPE=Release
if [ "${1:-}" = "--asan" ]; then
  build build-asan -DCMAKE_BUILD_TYPE=Debug -DQKV_SANITIZE=ON -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g"
fi
