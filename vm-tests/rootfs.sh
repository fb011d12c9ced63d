#!/usr/bin/env bash
# rootfs.sh builds (once) the guest's root file system: a minimal Debian
# (debootstrap --variant=minbase) with the tools the kernel suites call
# (sh, coreutils, findutils, tar, util-linux's unshare and mount, git,
# python3), packed as a newc cpio archive that run.sh puts in front of the
# per-run archive (the kernel unpacks concatenated archives into one root).
# Prints the archive's path.
#
#   MKCPIO=path/to/mkcpio vm-tests/rootfs.sh
#
# The archive is cached under $AGENT_LAUNCHER_VM_CACHE (default
# /var/cache/agent-launcher-vm)/rootfs, keyed by the suite, the package list
# and the layout version below, so changing any of them rebuilds it (and
# removes the superseded archive). debootstrap needs root.
set -euo pipefail

cache=${AGENT_LAUNCHER_VM_CACHE:-/var/cache/agent-launcher-vm}
mirror=${AGENT_LAUNCHER_VM_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
packages=git,python3,ca-certificates
mkcpio=${MKCPIO:?MKCPIO must name the mkcpio binary}

die() { echo "rootfs.sh: $*" >&2; exit 1; }

# Bump layout when the trimming or packing below changes.
layout=1
key=$(echo "$suite $packages $layout" | sha256sum | cut -c1-12)
out="$cache/rootfs/$suite-$key.cpio"
if [ -s "$out" ]; then echo "$out"; exit 0; fi
[ "$(id -u)" -eq 0 ] || die "debootstrap needs root (or a cached $out)"
command -v debootstrap >/dev/null || die "needs debootstrap (apt-get install debootstrap)"

mkdir -p "$cache/rootfs"
tree=$(mktemp -d "$cache/rootfs/tree.XXXXXX")
trap 'rm -rf "$tree"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$tree" "$mirror" >&2 ||
  die "debootstrap failed; its log: $tree/debootstrap/debootstrap.log"
# What a test VM never reads: package caches and lists, documentation,
# translations (about 170 of 380 MB).
rm -rf "$tree"/var/cache/apt/* "$tree"/var/lib/apt/lists/* \
  "$tree"/usr/share/doc "$tree"/usr/share/man "$tree"/usr/share/info "$tree"/usr/share/locale
"$mkcpio" -tree "$tree" -o "$out.tmp"
mv "$out.tmp" "$out"
find "$cache/rootfs" -maxdepth 1 -name "$suite-*.cpio" ! -name "${out##*/}" -delete
echo "$out"
