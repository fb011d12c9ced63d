#!/usr/bin/env bash
# matrix.sh runs every row of vm-tests/rows, two VMs at a time (each VM
# takes one CPU under TCG), and prints the table:
#
#   row  kernel  ABI found  passed  failed  skipped  seconds  status
#
# Exit status 0 only when every row passed. Logs: bin/vm/logs/ROW.*.
#   vm-tests/matrix.sh [ROW...]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${AGENT_LAUNCHER_VM_JOBS:-2}
rows=${*:-$(awk '!/^#/ && NF {print $1}' vm-tests/rows)}
vm-tests/deps.sh
vm-tests/kernels.sh $(for r in $rows; do awk -v r="$r" '$1 == r {print $2}' vm-tests/rows; done | sort -u) >/dev/null
initrd=$(vm-tests/build.sh)
out=${AGENT_LAUNCHER_VM_BUILD:-$PWD/bin/vm}
mkdir -p "$out/logs"
start=$(date +%s)
printf '%s\n' $rows | xargs -P "$jobs" -I{} sh -c 'vm-tests/boot.sh "$1" "$2" > "$3/logs/$1.result" 2>&1 || true' _ {} "$initrd" "$out"
fail=0
fmt='%-11s %-28s %-15s %7s %7s %8s %8s  %s\n'
printf "$fmt" row kernel "ABI found" passed failed skipped seconds status
for r in $rows; do
  line=$(cat "$out/logs/$r.result" 2>/dev/null || true)
  case $line in
    *" ok") ;;
    "") fail=1; line="$r ? abi=? passed=0 failed=0 skipped=0 seconds=? FAIL (no result; see $out/logs/$r.console)" ;;
    *) fail=1 ;;
  esac
  # ROW KERNEL abi=N passed=N failed=N skipped=N seconds=S STATUS...
  echo "$line" | awk -v fmt="$fmt" '{ for (i = 3; i <= 7; i++) sub(/^[a-z]+=/, "", $i); st = $8; for (i = 9; i <= NF; i++) st = st " " $i; printf fmt, $1, $2, $3, $4, $5, $6, $7, st }'
done
echo "total $(( $(date +%s) - start ))s wall, $jobs VMs at a time; logs in $out/logs"
exit $fail
