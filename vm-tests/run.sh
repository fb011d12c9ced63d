#!/usr/bin/env bash
# run.sh builds the initramfs and boots one row of the matrix (default
# abi-6: Debian's 6.12 cloud kernel, Landlock ABI 6), printing its result
# line (see boot.sh). Installs qemu-system-x86 when missing.
#
#   vm-tests/run.sh [ROW]
set -euo pipefail
cd "$(dirname "$0")/.."
row=${1:-abi-6}
vm-tests/deps.sh
initrd=$(vm-tests/build.sh)
vm-tests/boot.sh "$row" "$initrd"
