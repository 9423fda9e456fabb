#!/usr/bin/env bash
# Installs the Debian packages ears-bench builds against, if missing. Idempotent; works as
# root or through sudo. Usage: scripts/setup.sh [--fuzz | --torch2]
#   --fuzz:   also clang + libFuzzer
#   --torch2: also the second toolchain — a virtual environment outside the checkout,
#             ${EARS_TORCH2_VENV:-~/.cache/ears-bench/torch2-<version>}, with the pinned PyPI torch 2.x
#             (CUDA build) + transformers, tokenizers, safetensors, numpy (scripts/torch2-requirements.txt);
#             reused when present (created under a temporary name, renamed when complete). Prints its path.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libopenblas0-openmp
  libcli11-dev libyaml-cpp-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libpcre2-dev libutf8proc-dev
)
if [ "${1:-}" = "--fuzz" ]; then packages+=(clang libclang-rt-14-dev); fi
if [ "${1:-}" = "--torch2" ]; then packages+=(python3-venv); fi

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
echo "setup: all dependencies present" >&2

if [ "${1:-}" = "--torch2" ]; then
  req="$here/torch2-requirements.txt"
  version=$(sed -n 's/^torch==//p' "$req")
  venv=${EARS_TORCH2_VENV:-$HOME/.cache/ears-bench/torch2-$version}
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import torch, transformers" 2>/dev/null; then
    echo "setup: creating $venv (torch $version, CUDA build, ~6 GB; a minute or two on a fast mirror)" >&2
    tmp="$venv.tmp.$$"
    rm -rf "$tmp" && mkdir -p "$(dirname "$venv")"
    python3 -m venv "$tmp"
    "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2
    rm -rf "$venv" && mv "$tmp" "$venv"
  fi
  abi=$("$venv/bin/python" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
  if [ "$abi" != 1 ]; then
    echo "setup: $venv: torch was built with the pre-C++11 ABI; Debian's fmt/yaml-cpp/gtest use the C++11 ABI." \
         "Pin a torch >= 2.7 in $req" >&2
    exit 1
  fi
  echo "$venv"
fi
