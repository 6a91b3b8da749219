#!/bin/sh
# Packs what tests/gpu/device-check.sh needs on a GPU machine that has CUDA and NCCL but no
# autotools, GSL, libyaml or jansson: the prebuilt gridstep binary with its small non-CUDA shared
# libraries (lib/, used through LD_LIBRARY_PATH), the sources of the cuda module and of the
# kernel check (compiled there by nvcc), the scenarios, and the check script at the top.
#
# usage: tests/gpu/pack-for-device.sh [--gridstep BIN] [OUTDIR]   (default OUTDIR: _device)
# Run from the top of a built tree. Refuses to pack more than 60 MiB (the carry limit is 64).
set -eu
bin=./gridstep
out=_device
while [ $# -gt 0 ]; do
    case "$1" in
    --gridstep) [ $# -ge 2 ] || { echo "pack-for-device: --gridstep needs a path" >&2; exit 2; }
        bin=$2; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "pack-for-device: unknown option '$1'" >&2; exit 2 ;;
    *) out=$1; shift ;;
    esac
done
src=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$bin" ] || { echo "pack-for-device: no gridstep binary at $bin (build first)" >&2; exit 1; }
if ldd "$bin" | grep -Eq 'libcuda|libcudart|libnccl|libcublas'; then
    echo "pack-for-device: $bin links a GPU library; the packed binary must not" >&2; exit 1
fi
rm -rf "$out"
mkdir -p "$out/lib" "$out/src/exec" "$out/src/engine" "$out/src/kernels/cuda" "$out/src/kernels/host" \
    "$out/src/tests/gpu" "$out/scenarios"
cp "$bin" "$out/gridstep"
# the binary's shared libraries that a CUDA machine may lack (everything but glibc's own)
ldd "$bin" | awk '/=> \// { print $3 }' | while read -r lib; do
    case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
    esac
done
cp "$src"/exec/driver_cuda*.c "$src"/exec/cuda_attn_plan.c "$src"/exec/*.h "$out/src/exec/"
cp "$src"/engine/*.h "$src"/engine/status.c "$out/src/engine/"
cp "$src"/kernels/cuda/*.cu "$src"/kernels/cuda/*.cuh "$src"/kernels/cuda/*.h "$src"/kernels/cuda/*.c "$out/src/kernels/cuda/"
cp "$src"/kernels/host/*.c "$src"/kernels/host/*.h "$out/src/kernels/host/"
cp "$src"/kernels/dropout.h "$out/src/kernels/"
cp "$src"/tests/gpu/kernel_check.c "$src"/tests/gpu/gemm_sweep.c "$src"/tests/gpu/gemm-shapes.txt \
    "$src"/tests/gpu/contention.cu \
    "$src"/tests/gpu/tiny-llama-1gpu.yaml "$out/src/tests/gpu/"
cp "$src"/scenarios/llama2-7b-8l-1xh200.yaml "$src"/scenarios/tiny-llama-2x2x2.yaml "$out/scenarios/"
cp "$src"/tests/gpu/device-check.sh "$out/device-check.sh"
chmod +x "$out/device-check.sh"
kib=$(du -sk "$out" | cut -f1)
if [ "$kib" -gt $((60 * 1024)) ]; then
    echo "pack-for-device: $out is $kib KiB, over 60 MiB" >&2; exit 1
fi
echo "packed $out: $kib KiB ($(ls "$out/lib" | tr '\n' ' '))"
echo "on the GPU machine: sh $out/device-check.sh"
