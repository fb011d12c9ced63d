#!/usr/bin/env bash
# boot.sh boots one row of the matrix (vm-tests/rows) on an initramfs from
# build.sh and prints one result line:
#
#   ROW KERNEL abi=N passed=N failed=N skipped=N seconds=S ok|FAIL
#
#   vm-tests/boot.sh ROW [INITRAMFS]
#
# The guest's console goes to $AGENT_LAUNCHER_VM_BUILD/logs/ROW.console,
# its summary (second serial port) to ROW.summary. The exit status is 0 only
# when qemu left through isa-debug-exit with guest code 0 (every test
# binary passed as root and as uid 4242, and the kernel reported the row's
# ABI). qemu runs under software emulation (TCG): no /dev/kvm needed; KVM
# is used when /dev/kvm is there.
set -euo pipefail
cd "$(dirname "$0")/.."
row=${1:?usage: boot.sh ROW [INITRAMFS]}
out=${AGENT_LAUNCHER_VM_BUILD:-$PWD/bin/vm}
initrd=${2:-$out/initramfs.cpio}
mem=${AGENT_LAUNCHER_VM_MEM:-2048}
limit=${AGENT_LAUNCHER_VM_TIMEOUT:-3000}
# Software emulation (TCG) unless /dev/kvm is usable (a developer's machine,
# the Vagrant box); AGENT_LAUNCHER_VM_ACCEL overrides. Usable means that
# qemu can make this CPU model's vCPU on it: a nested /dev/kvm can refuse a
# register qemu sets (seen here: a Firecracker guest whose KVM refuses
# MSR 0x10a, IA32_ARCH_CAPABILITIES, so qemu aborts before the guest runs),
# so a paused machine is made and quit through the monitor first.
cpu=max
accel=${AGENT_LAUNCHER_VM_ACCEL:-tcg}
if [ -z "${AGENT_LAUNCHER_VM_ACCEL:-}" ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]; then
  # In a subshell of its own, so that the shell's note of qemu's abort
  # goes to /dev/null too.
  if (echo quit | timeout 20 qemu-system-x86_64 -nodefaults -no-user-config -display none \
    -accel kvm -cpu "$cpu" -m 64 -S -monitor stdio) >/dev/null 2>&1; then
    accel=kvm
  else
    echo "boot.sh: /dev/kvm is there but qemu cannot run a vCPU on it; software emulation (TCG)" >&2
  fi
fi

read -r _ kid abi errno extra < <(awk -v r="$row" '$1 == r' vm-tests/rows)
[ -n "${kid:-}" ] || { echo "boot.sh: no row $row in vm-tests/rows" >&2; exit 2; }
read -r _ vmlinuz pkg < <(vm-tests/kernels.sh "$kid")
append="console=ttyS0 panic=-1 quiet al.row=$row al.expect_abi=$abi"
[ "$errno" = - ] || append+=" al.expect_errno=$errno"
[ "$extra" = - ] || append+=" $extra"

mkdir -p "$out/logs"
log=$out/logs/$row
start=$(date +%s.%N)
set +e
timeout "$limit" qemu-system-x86_64 -nodefaults -no-user-config -display none \
  -accel "$accel" -cpu "$cpu" -m "$mem" -smp 1 -no-reboot \
  -kernel "$vmlinuz" -initrd "$initrd" -append "$append" \
  -device isa-debug-exit,iobase=0xf4,iosize=0x04 \
  -serial "file:$log.console" -serial "file:$log.summary" </dev/null
rc=$?
set -e
secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')

# rc: (guest code << 1) | 1 through isa-debug-exit; 0 means the guest
# panicked or powered off without reaching it; 124 is the timeout.
status=FAIL
[ "$rc" = 1 ] && status=ok
awk -v row="$row" -v pkg="${pkg#linux-*-}" -v secs="$secs" -v st="$status" -v rc="$rc" '
  $1 == "kernel" { for (i = 2; i <= NF; i++) { split($i, kv, "="); k[kv[1]] = kv[2] } abi = k["abi"]; if (k["errno"] != "-") abi = abi "(" k["errno"] ")" }
  $1 == "test" { for (i = 2; i <= NF; i++) { split($i, kv, "="); t[kv[1]] = kv[2] } p += t["pass"]; f += t["fail"]; s += t["skip"] }
  END { printf "%-11s %-30s abi=%-14s passed=%-5d failed=%-4d skipped=%-4d seconds=%-7s %s%s\n", row, pkg, (abi == "" ? "?" : abi), p, f, s, secs, st, (st == "ok" ? "" : " (qemu rc " rc ")") }
' "$log.summary"
[ "$status" = ok ]
