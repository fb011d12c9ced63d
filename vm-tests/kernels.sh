#!/usr/bin/env bash
# kernels.sh fetches the Debian kernels of the VM matrix and prints, for each
# kernel asked for (all by default), one line: "<id> <vmlinuz path> <package>".
#
#   vm-tests/kernels.sh [--refresh] [id...]
#
# Kernels, by id (the rows of vm-tests/matrix.sh name these):
#   bullseye-cloud       Debian 11, 5.10 cloud: no Landlock syscalls (ENOSYS)
#   bookworm-cloud       Debian 12, 6.1 cloud: Landlock ABI 2
#   bookworm-6.12-cloud  Debian 12 (bookworm-security), 6.12 cloud: ABI 6
#   trixie-bpo-cloud     Debian 13 trixie-backports, 7.x cloud: ABI 10 or 11
#
# Package names carry an ABI number (linux-image-6.1.0-56-...) and old ones
# leave the archive, so each kernel is resolved through its meta package
# (linux-image-cloud-amd64, linux-image-6.12-cloud-amd64) at fetch time.
# apt runs with a private APT_CONFIG per suite set under the cache directory:
# /etc/apt and the host's package state are never read or written, and the
# host's own sources may name any distribution.
#
# The cache ($AGENT_LAUNCHER_VM_CACHE, default /var/cache/agent-launcher-vm)
# keeps the .debs and the extracted bzImage; a kernel already there is used
# without touching the network. --refresh resolves the meta packages again
# (a newer kernel replaces the cached one).
#
# Environment: AGENT_LAUNCHER_VM_MIRROR (default http://deb.debian.org/debian)
# and AGENT_LAUNCHER_VM_SECURITY_MIRROR (default .../debian-security).
set -euo pipefail

cache=${AGENT_LAUNCHER_VM_CACHE:-/var/cache/agent-launcher-vm}
mirror=${AGENT_LAUNCHER_VM_MIRROR:-http://deb.debian.org/debian}
secmirror=${AGENT_LAUNCHER_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
all_ids="bullseye-cloud bookworm-cloud bookworm-6.12-cloud trixie-bpo-cloud"

refresh=0
if [ "${1:-}" = --refresh ]; then refresh=1; shift; fi
ids=${*:-$all_ids}

die() { echo "kernels.sh: $*" >&2; exit 1; }

# spec prints "<suite set> <meta package>" for a kernel id.
spec() {
  case $1 in
    bullseye-cloud) echo "bullseye linux-image-cloud-amd64" ;;
    bookworm-cloud) echo "bookworm linux-image-cloud-amd64" ;;
    bookworm-6.12-cloud) echo "bookworm linux-image-6.12-cloud-amd64" ;;
    trixie-bpo-cloud) echo "trixie-backports linux-image-cloud-amd64" ;;
    *) die "unknown kernel id $1 (known: $all_ids)" ;;
  esac
}

# sources prints the sources.list of a suite set. trixie-backports alone:
# with trixie beside it, its NotAutomatic release would lose the candidate
# choice to trixie's own kernel.
sources() {
  local o="[arch=amd64 signed-by=$keyring]"
  case $1 in
    bullseye)
      echo "deb $o $mirror bullseye main"
      echo "deb $o $secmirror bullseye-security main" ;;
    bookworm)
      echo "deb $o $mirror bookworm main"
      echo "deb $o $mirror bookworm-updates main"
      echo "deb $o $secmirror bookworm-security main" ;;
    trixie-backports)
      echo "deb $o $mirror trixie-backports main" ;;
  esac
}

# aptdir prepares the private apt tree of a suite set and prints the path of
# its apt.conf; the package lists are updated at most once per invocation.
declare -A updated
aptdir() {
  local set=$1 d="$cache/apt/$1"
  mkdir -p "$d/lists/partial" "$d/archives/partial" "$d/etc/preferences.d" "$d/etc/apt.conf.d" "$d/etc/trusted.gpg.d"
  : > "$d/status"
  sources "$set" > "$d/etc/sources.list"
  cat > "$d/apt.conf" <<EOF
Dir::State "$d";
Dir::State::Lists "$d/lists";
Dir::State::status "$d/status";
Dir::Cache "$d";
Dir::Cache::Archives "$d/archives";
Dir::Etc "$d/etc";
Dir::Etc::SourceList "$d/etc/sources.list";
Dir::Etc::SourceParts "$d/etc/sources.list.d";
Dir::Etc::Parts "$d/etc/apt.conf.d";
Dir::Etc::PreferencesParts "$d/etc/preferences.d";
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
Acquire::Languages "none";
APT::Sandbox::User "root";
EOF
  if [ -z "${updated[$set]:-}" ]; then
    APT_CONFIG="$d/apt.conf" apt-get -qq update >&2 || die "apt-get update of $set failed"
    updated[$set]=1
  fi
  echo "$d/apt.conf"
}

# resolve follows the meta package's Depends down to the package that holds
# the bzImage: linux-image-<abi> on bookworm and older, linux-binary-<abi>
# from 7.x on (where linux-image-<abi> became a meta package itself).
resolve() {
  local conf=$1 pkg=$2 next i
  for i in 1 2 3; do
    next=$(APT_CONFIG="$conf" apt-cache depends "$pkg" |
      awk '$1 == "Depends:" && $2 ~ /^linux-(image|binary)-[0-9]/ {print $2}' |
      sort | awk '/^linux-binary-/ {b=$0} /^linux-image-/ {if (!i) i=$0} END {print (b ? b : i)}')
    if [ -z "$next" ]; then echo "$pkg"; return; fi
    pkg=$next
  done
  die "no kernel package below $2"
}

fetch() {
  local id=$1 set meta conf pkg deb dir
  read -r set meta < <(spec "$id")
  dir="$cache/kernels/$id"
  if [ "$refresh" = 0 ] && [ -s "$dir/vmlinuz" ] && [ -s "$dir/package" ]; then
    echo "$id $dir/vmlinuz $(cat "$dir/package")"
    return
  fi
  conf=$(aptdir "$set")
  pkg=$(resolve "$conf" "$meta")
  mkdir -p "$dir/debs"
  deb=$(ls "$dir/debs/${pkg}_"*.deb 2>/dev/null | head -1 || true)
  if [ -z "$deb" ]; then
    (cd "$dir/debs" && APT_CONFIG="$conf" apt-get -qq download "$pkg" >&2) || die "apt-get download $pkg failed"
    deb=$(ls "$dir/debs/${pkg}_"*.deb | head -1)
  fi
  # bookworm and older: /boot/vmlinuz-<ver>; 7.x: /usr/lib/modules/<ver>/vmlinuz.
  dpkg-deb --fsys-tarfile "$deb" |
    tar -xO --wildcards './boot/vmlinuz-*' './usr/lib/modules/*/vmlinuz' > "$dir/vmlinuz.tmp" 2>/dev/null || true
  [ -s "$dir/vmlinuz.tmp" ] || die "no vmlinuz in $deb"
  mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
  echo "$pkg" > "$dir/package"
  echo "$id $dir/vmlinuz $pkg"
}

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "needs apt-get and dpkg-deb (Debian or Ubuntu)"
for id in $ids; do fetch "$id"; done
