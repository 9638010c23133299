#!/usr/bin/env bash
# Installs what tensh builds against, from Debian's packages. Idempotent:
# installs only what is missing. Run as root (or with sudo available).
set -euo pipefail
pkgs=(build-essential pkg-config liblua5.4-dev lua5.4 libreadline-dev libopenblas-dev zlib1g-dev libomp-dev tmux)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
echo "dependencies present: ${pkgs[*]}"
