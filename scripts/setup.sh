#!/usr/bin/env bash
# Installs the Debian packages ears-bench builds against, if missing. Idempotent; works as
# root or through sudo. Usage: scripts/setup.sh [--fuzz]   (--fuzz: also clang + libFuzzer)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libopenblas0-openmp
  libcli11-dev libyaml-cpp-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libpcre2-dev libutf8proc-dev
)
if [ "${1:-}" = "--fuzz" ]; then packages+=(clang libclang-rt-14-dev); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch's BLAS is the system alternative: without OpenBLAS (OpenMP build) f32 matmul is ~35x slower.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*) ;;
  *) echo "setup: warning: libblas.so.3 resolves to '$blas', not OpenBLAS; run:" \
          "update-alternatives --set libblas.so.3-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3" >&2 ;;
esac
echo "setup: all dependencies present"
