#!/usr/bin/env bash
# build.sh builds the VM initramfs and prints its path: the cached root file
# system (rootfs.sh) followed by a small archive with /init (vminit), the
# test binaries of the kernel suites, their testdata, the prebuilt launcher
# and test agent, and the list vminit runs.
#
# Output goes to $AGENT_LAUNCHER_VM_BUILD (default bin/vm in the repository).
# AGENT_LAUNCHER_VM_ROOTFS=none leaves the root file system out (only
# suites that need no external tool can pass then).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${AGENT_LAUNCHER_VM_BUILD:-$root/bin/vm}
go=${GO:-go}
mkdir -p "$out/stage/bin" "$out/tools"

# The packages whose tests run in the guest, as NAME PACKAGE.
suites="landlock ./landlock
kerneltest ./internal/kerneltest"

export CGO_ENABLED=0
$go build -trimpath -buildvcs=false -o "$out/tools/mkcpio" ./vm-tests/cmd/mkcpio
$go build -trimpath -buildvcs=false -o "$out/tools/vminit" ./vm-tests/cmd/vminit
GO=$go CGO_ENABLED=1 ./scripts/build-launcher "$out/stage/bin/agent-launcher"
$go build -trimpath -buildvcs=false -o "$out/stage/bin/testagent" ./internal/testagent
conf="$out/stage/tests.conf"
echo "# NAME DIR BINARY ARGS (vm-tests/cmd/vminit)" > "$conf"
args=()
while read -r name pkg; do
  $go test -c -trimpath -buildvcs=false -o "$out/stage/$name.test" "$pkg"
  echo "$name /vm-tests/src/$name /vm-tests/$name.test -test.v -test.count=1 -test.timeout=20m" >> "$conf"
  args+=("vm-tests/$name.test=$out/stage/$name.test")
  if [ -d "$pkg/testdata" ]; then
    args+=("vm-tests/src/$name/testdata=$pkg/testdata")
  else
    args+=("vm-tests/src/$name=$out/stage/bin")  # the directory must exist; its content is unused
  fi
done <<< "$suites"

"$out/tools/mkcpio" -o "$out/run.cpio" init="$out/tools/vminit" \
  vm-tests/bin="$out/stage/bin" vm-tests/tests.conf="$conf" "${args[@]}"
if [ "${AGENT_LAUNCHER_VM_ROOTFS:-debian}" = none ]; then
  cp "$out/run.cpio" "$out/initramfs.cpio"
else
  rootfs=$(MKCPIO="$out/tools/mkcpio" ./vm-tests/rootfs.sh)
  cat "$rootfs" "$out/run.cpio" > "$out/initramfs.cpio.tmp"
  mv "$out/initramfs.cpio.tmp" "$out/initramfs.cpio"
fi
echo "$out/initramfs.cpio"
