#!/usr/bin/env bash
# Installs the Debian packages qkv needs (idempotent, quiet when nothing is missing), then
# configures and builds in build/ (Release):
#   scripts/install.sh           the `qkv` program only, with its runtime packages (the demo)
#   scripts/install.sh --tests   also the test dependencies (PyTorch for the references, Node.js for
#                                the reference tokenizers, gettext, ...) and every target
#   scripts/install.sh --asan    as --tests, plus the Debug+ASan+UBSan tree in build-asan/
#   --no-build                   with any of the above: the packages only (scripts/tsan.sh, which
#                                builds its own tree)
#   --with PKG                   with any of the above: one more Debian package (repeatable; the
#                                compilers of scripts/fuzz.sh and scripts/tsan.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

tests=0 asan=0 no_build=0
extra=()
while (($#)); do
  case "$1" in
    --tests) tests=1 ;;
    --asan) tests=1 asan=1 ;;
    --no-build) no_build=1 ;;
    --with) [ $# -ge 2 ] || { echo "scripts/install.sh: --with needs a package name" >&2; exit 2; }
            extra+=("$2"); shift ;;
    *) echo "usage: scripts/install.sh [--tests] [--asan] [--no-build] [--with PKG]..." >&2; exit 2 ;;
  esac
  shift
done

# What building and running qkv needs.
PKGS=(build-essential cmake ninja-build pkg-config git
      libopenblas-openmp-dev libdnnl-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libpng-dev libfreetype-dev
      fonts-dejavu-core libopenmpi-dev openmpi-bin)
if ((tests)); then
  # What the tests need on top: GoogleTest; PyTorch + NumPy (reference values, tools/refs); Pillow
  # (reads the heatmap PNGs back); gettext (msgfmt-compiled catalogs); Node.js and npm (the
  # reference tokenizers); Chromium (the attention viewer's page driven headless,
  # tests/tasks/attention_view_browser.py). The nodesource build of Node.js ships npm itself.
  PKGS+=(libgtest-dev libgmock-dev libbenchmark-dev python3-torch python3-numpy python3-pil gettext chromium)
  command -v node >/dev/null || PKGS+=(nodejs)
  command -v npm >/dev/null || PKGS+=(npm)
fi
PKGS+=(${extra[@]+"${extra[@]}"})

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

((no_build)) && exit 0

build() {  # build <dir> <target or ""> <cmake args...>
  local dir=$1 target=$2; shift 2
  # Configure a new tree, and a tree configured without the tests when they are wanted now.
  if [ ! -f "$dir/build.ninja" ] || { ((tests)) && grep -q '^QKV_BUILD_TESTS:BOOL=OFF' "$dir/CMakeCache.txt"; }; then
    cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  fi
  local log; log=$(mktemp)
  if ! cmake --build "$dir" ${target:+--target "$target"} -- --quiet >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; exit 1
  fi
  grep -v '^ninja: no work to do' "$log" || true
  rm -f "$log"
}

if ((tests)); then
  build build "" -DCMAKE_BUILD_TYPE=Release -DQKV_BUILD_TESTS=ON -DQKV_BUILD_BENCH=ON
else  # the demo: no test or benchmark targets, so GoogleTest need not be installed
  build build qkv_cli -DCMAKE_BUILD_TYPE=Release -DQKV_BUILD_TESTS=OFF -DQKV_BUILD_BENCH=OFF
fi
if ((asan)); then
  # -g1: line tables, enough for the sanitizers' stack traces (file:line); full -g made every file
  # 25-35% slower to compile here (cmd_bleu.cpp 35 s -> 26), and this tree is most of CI's time.
  build build-asan "" -DCMAKE_BUILD_TYPE=Debug -DQKV_SANITIZE=ON -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1"
fi
