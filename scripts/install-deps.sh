#!/usr/bin/env bash
# Installs what tensh builds against, from Debian's packages (Debian 12).
# Idempotent: installs only what is missing, so `make demo` and CI can call it
# every time. Needs root, or sudo for a normal user.
# DRY_RUN=1 only simulates the install (apt-get -s). Extra package names given
# as arguments are installed too (`make demo` adds dataset-fashion-mnist).
# Open MPI (libopenmpi-dev, openmpi-bin): dist's "mpi" backend and `tensh --nproc`;
# tensh opens libmpi at run time, so it builds without them.
# python3-ipykernel, python3-jupyter-client: the Jupyter kernel's wrapper
# (`tensh --jupyter install`) and its test; tensh builds and runs without them.
# python3-protobuf: test_tb decodes the TensorBoard event files with Google's own
# protobuf library, an oracle independent of tensh's writer (tests only).
set -euo pipefail
pkgs=(build-essential pkg-config liblua5.4-dev lua5.4 libreadline-dev libopenblas-dev libopenblas-openmp-dev zlib1g-dev libcjson-dev libomp-dev libdnnl-dev libboost-context-dev tmux libopenmpi-dev openmpi-bin python3-ipykernel python3-jupyter-client python3-protobuf "$@")
command -v dpkg-query >/dev/null && command -v apt-get >/dev/null || {
  echo "install-deps: no dpkg/apt-get: this script is for Debian; install by hand: ${pkgs[*]}" >&2
  exit 1
}
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: not root and no sudo: run as root" >&2; exit 1; }
    sudo=(sudo)
  fi
  sim=()
  [ "${DRY_RUN:-0}" = 1 ] && sim=(-s)
  # env inside sudo: sudo drops DEBIAN_FRONTEND from the caller's environment
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${sim[@]}" "${missing[@]}"
fi
echo "dependencies present: ${pkgs[*]}"
