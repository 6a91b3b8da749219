#!/bin/sh
# The cuda module's kernels against kernels/host (tests/gpu/kernel_check --quick); 77 without a GPU.
. "${top_srcdir:-.}/tests/gpu/gpu_common.sh"
[ -f "$GS_MODULE" ] || { echo "SKIP: no cuda module in this build"; exit 77; }
exec "$(dirname "$GRIDSTEP")/tests/gpu/kernel_check" --quick "$GS_MODULE"
