#!/usr/bin/env bash
# deps.sh installs what the VM runs need when it is missing: qemu-system-x86
# (software emulation; no KVM needed) and debootstrap (the guest's root
# file system). Needs root only when something is missing.
set -euo pipefail
missing=()
command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
command -v debootstrap >/dev/null || missing+=(debootstrap)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing ${missing[*]}; run as root or install them" >&2
  exit 1
fi
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
