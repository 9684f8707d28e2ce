#!/usr/bin/env bash
# Install a clang-19 cross toolchain that builds real gfx942/gfx950 code objects on a
# machine without ROCm or a GPU (Debian bookworm / Ubuntu packages), and prepare the
# device-library folder clang needs for those targets.
#
# Idempotent: re-running only refreshes symlinks and rebuilds the two generated files.
# Run as root. FLOPWATCH_HIP_DEVLIB overrides the device-library folder.
set -euo pipefail

DEVLIB="${FLOPWATCH_HIP_DEVLIB:-$HOME/.cache/flopwatch/amdgcn-bitcode}"
SYSTEM_BITCODE=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
# Same layout string clang-19 uses for amdgcn-amd-amdhsa.
DATALAYOUT='e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9'

if [[ $(id -u) -ne 0 ]]; then
    echo "install-hip-cross.sh: run as root (apt-get install)" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y clang-19 lld-19 llvm-19 clang-tools-19 libamdhip64-dev rocm-device-libs

if [[ ! -d $SYSTEM_BITCODE ]]; then
    echo "install-hip-cross.sh: $SYSTEM_BITCODE missing after installing rocm-device-libs" >&2
    exit 1
fi

mkdir -p "$DEVLIB"
for bc in "$SYSTEM_BITCODE"/*.bc; do
    ln -sfn "$bc" "$DEVLIB/$(basename "$bc")"
done

# Debian's rocm-device-libs predates gfx942/gfx950, so the per-ISA constant that clang
# links for --offload-arch is missing; it is one linkonce_odr i32 holding the ISA version.
make_isa_version() {
    local suffix=$1 value=$2 out="$DEVLIB/oclc_isa_version_$1.bc"
    local tmp
    tmp=$(mktemp --suffix=.ll)
    cat >"$tmp" <<LL
target datalayout = "$DATALAYOUT"
target triple = "amdgcn-amd-amdhsa"

@__oclc_ISA_version = linkonce_odr protected local_unnamed_addr addrspace(4) constant i32 $value, align 4
LL
    rm -f "$out"
    llvm-as-19 "$tmp" -o "$out"
    rm -f "$tmp"
    echo "wrote $out (__oclc_ISA_version = $value)"
}
make_isa_version 942 9402
make_isa_version 950 9500

echo "device libraries ready in $DEVLIB"
