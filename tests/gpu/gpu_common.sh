# Sourced by tests/gpu/*.sh: the gridstep binary, its cuda module, and whether a GPU is here.
GRIDSTEP=${GRIDSTEP:-./gridstep}
top_srcdir=${top_srcdir:-.}
GS_MODULE="$(dirname "$GRIDSTEP")/gridstep-cuda.so"
# 0 when nvidia-smi lists at least one GPU
gs_have_gpu() {
    command -v nvidia-smi >/dev/null 2>&1 || return 1
    nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}
