#!/usr/bin/env bash
# Installs the Debian packages frugal needs to build, test and run. Idempotent: packages that are
# already installed are skipped, and nothing is fetched when nothing is missing.
# Usage: scripts/install-deps.sh        (as root, or with sudo available)
set -euo pipefail

packages=(
  # build
  build-essential cmake git pkg-config
  # engine and libraries
  openmpi-bin libopenmpi-dev libgloo-dev libcli11-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libtomlplusplus-dev
  # eigenvalues of gossip mixing matrices (header-only)
  libeigen3-dev
  # tests, benchmarks, fuzzing, formatting (the sanitizer runtimes come with g++)
  libgtest-dev libgmock-dev libbenchmark-dev clang libclang-rt-14-dev clang-format
  # tensors and data
  libtorch-dev dataset-fashion-mnist fortunes fortunes-min
  # the Python package (frugal.torch) and its tests: Debian's python3 and the same LibTorch
  python3-dev python3-torch pybind11-dev python3-pytest python3-numpy python3-mpi4py
  # network emulation and plots
  iproute2 util-linux procps gnuplot-nox
  # an optimised BLAS for LibTorch (without it Debian's libtorch runs on the reference BLAS), and
  # tcmalloc for the processes that train (LibTorch's tensors on glibc's malloc are fresh mappings,
  # faulted in page by page, each time they are allocated)
  libopenblas0-openmp libtcmalloc-minimal4
  # --emulate's rsh agent: mount --bind of the emulated hosts' /etc/hosts, hostname
  mount hostname
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
