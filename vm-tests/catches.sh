#!/usr/bin/env bash
# catches.sh proves that the VM matrix catches a broken floor. It copies the
# working tree, breaks the Landlock planner in the copy (a directory's rule
# carries the most any name below it may have instead of the least, so the
# parent of a carve-out is granted what the carve-out must not get), runs
# the rows abi-2, abi-6 and
# abi-newest on that build, and succeeds only when
#
#   - every one of those rows fails;
#   - on the kernels with ABI 6 and the newest, the kernel suite of confined
#     sessions (kerneltest) fails, not only the pure planner tests;
#   - on the newest kernel, the simulated ABI-2 run (TestApplyPerABI/ABI2:
#     only ABI 2's rights handled) fails, as it does on the real ABI-2 kernel.
#
# It prints, per row, the failing tests. Logs: bin/vm/catches/logs/.
#   vm-tests/catches.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${AGENT_LAUNCHER_VM_CATCHES:-$root/bin/vm/catches}
die() { echo "catches.sh: $*" >&2; exit 1; }

rm -rf "$out/src"
mkdir -p "$out/src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -xf - -C "$out/src"

# The sabotage: the rule of a directory takes the strongest verdict of
# anything below it instead of the weakest.
plan=$out/src/landlock/plan.go
want='	g := constraint(st.Weakest, TypeOther, true)'
[ "$(grep -cxF "$want" "$plan")" = 1 ] || die "landlock/plan.go no longer has the line this script breaks; update it: $want"
sed -i "s/^\tg := constraint(st.Weakest, TypeOther, true)\$/\tg := rightsFor(st.Strongest, TypeOther, true) \/\/ BROKEN by vm-tests\/catches.sh/" "$plan"
grep -q 'BROKEN by vm-tests/catches.sh' "$plan" || die "the sabotage did not apply"

rows="abi-2 abi-6 abi-newest"
set +e
(cd "$out/src" && AGENT_LAUNCHER_VM_BUILD=$out vm-tests/matrix.sh $rows)
rc=$?
set -e
[ "$rc" -ne 0 ] || die "the matrix PASSED a build whose planner grants carved directories: it catches nothing"

ok=1
echo
echo "what failed on the broken build:"
for r in $rows; do
  res=$(cat "$out/logs/$r.result")
  fails=$(grep -E '^\s*--- FAIL: ' "$out/logs/$r.console" | sed -E 's/^\s*--- FAIL: ([^ ]+).*/\1/' | sort -u)
  echo "$r: $(echo "$fails" | grep -c .) distinct failing tests, e.g. $(echo "$fails" | grep -v / | head -6 | tr '\n' ' ')"
  case $res in *" ok") echo "  $r PASSED the broken build" >&2; ok=0 ;; esac
  case $r in
    abi-6 | abi-newest)
      grep -q '^=== VMTEST END kerneltest .* exit=[1-9]' "$out/logs/$r.console" ||
        { echo "  $r: the kernel suite (kerneltest) did not fail" >&2; ok=0; } ;;
  esac
  case $r in
    abi-2 | abi-newest)
      grep -q -- '--- FAIL: TestApplyPerABI/ABI2 ' "$out/logs/$r.console" ||
        { echo "  $r: TestApplyPerABI/ABI2 did not fail" >&2; ok=0; } ;;
  esac
done
[ "$ok" = 1 ] || die "the matrix did not catch the broken build everywhere it must"
echo "ok: every row failed on the broken build, including the kernel suite on ABI 6 and the newest and the simulated ABI 2 run on the newest"
