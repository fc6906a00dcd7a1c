#!/usr/bin/env bash
# Installs every Debian package qkv needs (idempotent, quiet when nothing is missing), then
# configures and builds the `qkv` program in build/ (Release). --tests builds everything in
# build/ (tests, benchmarks); --asan also builds the Debug+ASan+UBSan tree in build-asan/.
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

tests=0 asan=0
for a in "$@"; do
  case "$a" in
    --tests) tests=1 ;;
    --asan) tests=1 asan=1 ;;
    *) echo "usage: scripts/install.sh [--tests] [--asan]" >&2; exit 2 ;;
  esac
done

build() {  # build <dir> <target or ""> <cmake args...>
  local dir=$1 target=$2; shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  fi
  local log; log=$(mktemp)
  if ! cmake --build "$dir" ${target:+--target "$target"} -- --quiet >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  grep -v '^ninja: no work to do' "$log" || true
  rm -f "$log"
}

if ((tests)); then build build "" -DCMAKE_BUILD_TYPE=Release; else build build qkv_cli -DCMAKE_BUILD_TYPE=Release; fi
if ((asan)); then
  build build-asan "" -DCMAKE_BUILD_TYPE=Debug -DQKV_SANITIZE=ON -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g"
fi
