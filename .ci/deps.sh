#!/usr/bin/env bash
# Installs what allocbench needs on a Debian or Ubuntu machine, or says how to.
#   .ci/deps.sh build   the compiler, CMake and zlib (required), ISA-L (optional: gzip input is
#                       inflated with zlib without it), OpenMPI (optional: launches of mpirun
#                       and srun are refused without it, and their tests skipped)
#   .ci/deps.sh bench   also gnuplot, Google Benchmark and a headless Chromium (optional:
#                       without them the figures, the micro-benchmarks and the test of the
#                       pages in a browser are skipped)
#   .ci/deps.sh fuzz    also clang and its libFuzzer, for the fuzz targets
# As root with apt-get it installs what is missing; otherwise it prints the exact command
# and, for optional parts, goes on without them.
set -u
want=${1:-build}

missing_required=()
missing_optional=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
need() { # need REQUIRED|OPTIONAL PACKAGE [COMMAND]
  local kind=$1 pkg=$2 cmd=${3:-}
  if [ -n "$cmd" ] && have_cmd "$cmd"; then return; fi
  if [ -z "$cmd" ] && have_pkg "$pkg"; then return; fi
  if [ "$kind" = REQUIRED ]; then missing_required+=("$pkg"); else missing_optional+=("$pkg"); fi
}

need REQUIRED gcc gcc
need REQUIRED make make
need REQUIRED cmake cmake
need REQUIRED zlib1g-dev
# ISA-L's igzip, which inflates gzip input faster than zlib (kernels/base/input.c).
need OPTIONAL libisal-dev
# The count of circles and upward includes (tests/includes.py; skipped without it),
# and the store of the torchrun-style launches (tests/store_server.py).
need OPTIONAL python3 python3
# MPI, for launches of mpirun and srun (harness/ranks/link.h), and mpirun for their tests.
need OPTIONAL libopenmpi-dev
need OPTIONAL openmpi-bin mpirun
if [ "$want" = bench ]; then
  need OPTIONAL gnuplot-nox gnuplot
  need OPTIONAL libbenchmark-dev
  need OPTIONAL g++ g++
fi
if [ "$want" = fuzz ]; then
  need OPTIONAL clang clang
  need OPTIONAL libclang-rt-dev
fi

# The browser tests/report_test.sh loads the pages in: Debian's headless shell of Chromium.
# Installed on its own, after the rest: not every archive has it (Ubuntu's chromium is a snap).
browser() {
  [ "$want" = bench ] || return 0
  { have_cmd chromium-headless-shell || have_cmd chromium; } && return 0
  if [ "$(id -u)" = 0 ] && have_cmd apt-get; then
    echo "allocbench: installing chromium-headless-shell" >&2
    local apt="apt-get install -y -q --no-install-recommends chromium-headless-shell"
    DEBIAN_FRONTEND=noninteractive $apt >/dev/null 2>&1 && return 0
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive $apt; } >/dev/null 2>&1 && return 0
  fi
  echo "allocbench: going on without a headless browser; the pages are not tested in one (install with: sudo apt-get install -y chromium-headless-shell)" >&2
}

all=("${missing_required[@]}" "${missing_optional[@]}")
[ ${#all[@]} -eq 0 ] && { browser; exit 0; }

if [ "$(id -u)" = 0 ] && have_cmd apt-get; then
  echo "allocbench: installing ${all[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  if apt-get install -y -q --no-install-recommends "${all[@]}" >/dev/null 2>&1 ||
     { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends "${all[@]}" >/dev/null; }; then
    browser
    exit 0
  fi
  echo "allocbench: apt-get could not install ${all[*]}" >&2
fi
if [ ${#missing_required[@]} -gt 0 ]; then
  echo "allocbench: missing ${missing_required[*]}; install with: sudo apt-get install -y ${missing_required[*]}" >&2
  exit 1
fi
echo "allocbench: going on without ${missing_optional[*]} (install with: sudo apt-get install -y ${missing_optional[*]})" >&2
browser
exit 0
