#!/bin/sh
# The GPU check of the cuda driver, for a machine with a GPU, the CUDA toolkit and NCCL (the pip
# package nvidia-nccl-cu13 will do) but no autotools, GSL, libyaml or jansson. Runs from the
# directory tests/gpu/pack-for-device.sh made (a prebuilt gridstep, lib/, src/, scenarios/), or
# from the top of a built source tree. Builds ONLY the cuda module and the kernel check with nvcc,
# then, within about 8 minutes:
#   1. kernels: every compute op vs kernels/host on the same inputs (normwise relative error,
#      tolerance 1e-5 element-wise, 1e-4 reductions and fp32 GEMM, 5e-3 TF32 GEMM), the GEMM
#      attention path (GRIDSTEP_CUDA_ATTENTION=gemm) too, and its flash variant (P recomputed
#      from the lse) against the host's flash kernels, under the GEMM tolerances, in fp32 and
#      TF32, with their backwards' bits equal on a rerun; one attention layer timed each way;
#   2. HBM bandwidth of AdamW and RMSNorm vs a device-to-device copy;
#   3. GEMM TFLOP/s of llama2-7b's shapes, driver vs the best of cuBLASLt's top algorithms;
#   4. exec --driver cuda vs --driver host on a tiny model (also with dropout, and with bf16 GEMM
#      inputs on both): losses within 1e-3 relative, with the default attention path (auto:
#      cuBLAS GEMMs, the flash variant recomputing P from the lse), the flash kernels and, with
#      flash_attention: false, the per-row kernels (GRIDSTEP_CUDA_ATTENTION=kernels) and the
#      GEMMs; a mixture-of-experts model (4 experts, top-2) and an FP8 model (current scaling,
#      emulated casts and GRIDSTEP_CUDA_FP8=cublaslt; delayed scaling) on one rank, their losses within 1e-3 of
#      the host's; the memory pre-flight refusing a sequence length whose GEMM attention scratch
#      alone exceeds the GPU (the scratch named as its own term);
#   4b. cuBLASLt's bf16 and FP8 GEMMs (fast and split accumulation) over tests/gpu/gemm-shapes.txt,
#      written to gemm.csv: the measured rows tests/check_gemm_measured.c holds the sim's model to;
#      then one shape held 5 s per type at the power cap (sustain.csv), then that GEMM and an HBM
#      triad beside 16 CTAs that spin or copy, as a collective's do (contention.csv);
#   5. 5 steps of llama2-7b cut to 8 layers on one GPU (TF32 GEMMs; then the model trained in
#      bf16, whose GEMM inputs the cuda driver makes bf16 by default, with the dispatch gaps on
#      the compute stream against the 3% target), each measured step next to
#      `gridstep sim`'s prediction for an H200, with the default attention path, with the flash
#      kernels and with flash_attention: false (first losses within 1e-3); 2 fp32 steps when
#      time is left;
#   6. `gridstep calibrate --driver cuda` on that scenario (TF32) and `gridstep compare --calib`:
#      the calibrated sim's step against 3 measured steps (target |error| <= 10%: reported as ok
#      or miss, a measurement rather than a failure), with the default attention path, then
#      with the flash kernels;
# and prints a short table last. Exit 0 when every check passed, 1 otherwise, 77 without a GPU.
#
# usage: device-check.sh [--arch sm_90] [--build-only] [--skip-build] [--quick] [--out DIR] [--jobs N]
#                        [--budget S] [--toolchain]
# (--out: where the build, the logs and results.txt go, default build-cuda beside the script; on
# a lent machine, a folder that comes back; --jobs: nvcc compiles at once, default all six;
# --budget: seconds after which no new llama2-7b run starts and running ones are stopped, default
# 455; --toolchain: print the CUDA tree and NCCL found, build and run nothing)
set -u
arch=sm_90
build_only=0
skip_build=0
quick=0
toolchain_only=0
out=
jobs=6
budget=455
while [ $# -gt 0 ]; do
    case "$1" in
    --arch) [ $# -ge 2 ] || { echo "device-check: --arch needs a value (sm_90)" >&2; exit 2; }
        arch=$2; shift 2 ;;
    --build-only) build_only=1; shift ;;
    --skip-build) skip_build=1; shift ;;
    --quick) quick=1; shift ;;
    --toolchain) toolchain_only=1; shift ;;
    --out) [ $# -ge 2 ] || { echo "device-check: --out needs a directory" >&2; exit 2; }
        out=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || { echo "device-check: --jobs needs a number (1 to 6)" >&2; exit 2; }
        jobs=$2; shift 2 ;;
    --budget) [ $# -ge 2 ] || { echo "device-check: --budget needs seconds" >&2; exit 2; }
        budget=$2; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case "$arch" in sm_[0-9]*) ;; *) echo "device-check: --arch: found '$arch', expected sm_NN" >&2; exit 2 ;; esac
case "$jobs" in [1-9]|[1-9][0-9]) ;; *) echo "device-check: --jobs: found '$jobs', expected a number from 1" >&2; exit 2 ;; esac
case "$budget" in [1-9][0-9]|[1-9][0-9][0-9]|[1-9][0-9][0-9][0-9]) ;; *) echo "device-check: --budget: found '$budget', expected seconds (10 to 9999)" >&2; exit 2 ;; esac

# fp32 GEMMs unless a row says otherwise: the scenarios train in bf16, which the cuda driver
# follows by default (bf16 GEMM inputs), and most rows compare with the host's fp32
export GRIDSTEP_CUDA_GEMM=fp32

here=$(cd "$(dirname "$0")" && pwd)
if [ -d "$here/src/exec" ]; then
    root=$here; src=$here/src; scn=$here/scenarios; tiny=$src/tests/gpu/tiny-llama-1gpu.yaml
else
    root=$(cd "$here/../.." && pwd); src=$root; scn=$root/scenarios; tiny=$root/tests/gpu/tiny-llama-1gpu.yaml
fi
gridstep=$root/gridstep
[ -n "$out" ] || out=$root/build-cuda
[ $toolchain_only -eq 1 ] || mkdir -p "$out" || exit 1
t_start=$(date +%s)
elapsed() { echo $(($(date +%s) - t_start)); }
results=$out/results.txt
[ $toolchain_only -eq 1 ] || : > "$results"
row() { printf '%-34s %-8s %s\n' "$1" "$2" "$3" >> "$results"; }
fail=0

# ---- toolchain: CUDA, then NCCL (the CUDA tree, or the nvidia-nccl pip package) ----------------
# CUDA_HOME if set, then nvcc on PATH, then the usual places. The toolkit's root is what nvcc
# itself reports (its --dryrun TOP line), not the directory above the nvcc found: that nvcc may
# be a wrapper script (/usr/local/bin/nvcc exec'ing the real one), whose parent holds no CUDA.
NVCC=
[ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && NVCC=$CUDA_HOME/bin/nvcc
[ -n "$NVCC" ] || NVCC=$(command -v nvcc 2>/dev/null || true)
[ -n "$NVCC" ] || for d in /usr/local/cuda /opt/cuda; do
    [ -x "$d/bin/nvcc" ] && NVCC=$d/bin/nvcc && break
done
[ -n "$NVCC" ] || { echo "device-check: no nvcc (set CUDA_HOME)" >&2; exit 1; }
top=$("$NVCC" --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -1)
CUDA_HOME=
for d in "$top" "$(dirname "$NVCC")/.."; do
    [ -n "$d" ] && [ -f "$d/include/cuda_runtime.h" ] && { CUDA_HOME=$(cd "$d" && pwd); break; }
done
[ -n "$CUDA_HOME" ] && [ -x "$CUDA_HOME/bin/nvcc" ] ||
    { echo "device-check: $NVCC: no CUDA tree with bin/nvcc and include/cuda_runtime.h (nvcc says TOP=${top:-?}; set CUDA_HOME)" >&2; exit 1; }
NVCC=$CUDA_HOME/bin/nvcc
CUDA_LIB=$CUDA_HOME/lib64
[ -d "$CUDA_LIB" ] || CUDA_LIB=$CUDA_HOME/lib
NCCL_INC=; NCCL_LIB=
# NCCL_HOME if set, then the CUDA tree, then the system's (NVIDIA's Debian/Ubuntu packages put
# nccl.h in /usr/include and libnccl.so in the multiarch directory), then the pip package
for d in "${NCCL_HOME:-}" "$CUDA_HOME" /usr /usr/local; do
    [ -n "$d" ] && [ -f "$d/include/nccl.h" ] || continue
    for l in "$d/lib64" "$d/lib" "$d/lib/$(uname -m)-linux-gnu"; do
        ls "$l"/libnccl.so* >/dev/null 2>&1 && { NCCL_INC=$d/include; NCCL_LIB=$l; break 2; }
    done
done
if [ -z "$NCCL_INC" ]; then
    nd=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
    [ -z "$nd" ] && nd=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
    if [ -n "$nd" ] && [ -f "$nd/include/nccl.h" ]; then
        NCCL_INC=$nd/include; NCCL_LIB=$nd/lib
    fi
fi
[ -n "$NCCL_INC" ] ||
    { echo "device-check: no nccl.h with libnccl.so (NCCL_HOME, the CUDA tree, /usr, or pip nvidia-nccl)" >&2; exit 1; }
ncclso=$(ls "$NCCL_LIB"/libnccl.so* 2>/dev/null | head -1)
echo "device-check: nvcc $("$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') ($CUDA_HOME), NCCL $NCCL_INC, $arch"
[ $toolchain_only -eq 1 ] && { echo "CUDA_HOME=$CUDA_HOME"; echo "NCCL_INC=$NCCL_INC"; echo "NCCL_LIB=$NCCL_LIB"; exit 0; }

# ---- build: the module and the kernel check, nothing else --------------------------------------
if [ $skip_build -eq 0 ]; then
    b0=$(date +%s)
    pids=
    n=0
    ok=1
    for f in elementwise norm xent attention attention_gemm attention_flash moe fp8; do
        "$NVCC" -std=c++17 -O3 -arch="$arch" -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -I"$src" \
            -c "$src/kernels/cuda/$f.cu" -o "$out/$f.o" &
        pids="$pids $!"
        n=$((n + 1))
        if [ $n -ge "$jobs" ]; then
            for p in $pids; do wait "$p" || ok=0; done
            pids=; n=0
        fi
    done
    for p in $pids; do wait "$p" || ok=0; done
    CC=${CC:-cc}
    cflags="-std=gnu11 -O2 -fPIC -fvisibility=hidden -I$src -isystem $CUDA_HOME/include -isystem $NCCL_INC"
    for f in driver_cuda driver_cuda_open driver_cuda_compute driver_cuda_nccl driver_cuda_moe driver_cuda_fp8 \
             driver_cuda_grouped; do
        [ $ok -eq 1 ] && $CC $cflags -c "$src/exec/$f.c" -o "$out/$f.o" || ok=0
    done
    [ $ok -eq 1 ] && $CC $cflags -c "$src/engine/status.c" -o "$out/status.o" || ok=0
    [ $ok -eq 1 ] && $CC $cflags -c "$src/kernels/cuda/attn_gemm_plan.c" -o "$out/attn_gemm_plan.o" || ok=0
    [ $ok -eq 1 ] && $CC $cflags -c "$src/exec/cuda_attn_plan.c" -o "$out/cuda_attn_plan.o" || ok=0
    [ $ok -eq 1 ] && $CC -shared -Wl,--no-undefined -o "$out/gridstep-cuda.so" "$out"/elementwise.o "$out"/norm.o \
        "$out"/xent.o "$out"/attention.o "$out"/attention_gemm.o "$out"/attention_flash.o "$out"/moe.o "$out"/fp8.o \
        "$out"/attn_gemm_plan.o \
        "$out"/cuda_attn_plan.o "$out"/driver_cuda*.o "$out"/status.o -L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" \
        "$ncclso" -Wl,-rpath,"$NCCL_LIB" -lcublas -lcublasLt -lcudart -lstdc++ -lm -lpthread || ok=0
    [ $ok -eq 1 ] && $CC -std=gnu11 -O2 -I"$src" -isystem "$CUDA_HOME/include" "$src/tests/gpu/kernel_check.c" \
        "$out/attention_flash.o" "$src"/kernels/host/*.c "$src/engine/status.c" -L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" \
        -lcublasLt -lcudart -lstdc++ -ldl -lm -o "$out/kernel_check" || ok=0
    [ $ok -eq 1 ] && $CC -std=gnu11 -O2 -isystem "$CUDA_HOME/include" "$src/tests/gpu/gemm_sweep.c" \
        -L"$CUDA_LIB" -Wl,-rpath,"$CUDA_LIB" -lcublasLt -lcudart -lm -o "$out/gemm_sweep" || ok=0
    [ $ok -eq 1 ] && "$NVCC" -std=c++17 -O3 -arch="$arch" "$src/tests/gpu/contention.cu" -L"$CUDA_LIB" \
        -Xlinker -rpath -Xlinker "$CUDA_LIB" -lcublasLt -ldl -o "$out/contention" || ok=0
    if [ $ok -eq 1 ]; then
        row "build (module + kernel_check)" ok "$(($(date +%s) - b0)) s, $arch"
    else
        row "build (module + kernel_check)" FAIL "see the compiler output above"
        cat "$results"; exit 1
    fi
    # the entry carries the driver table's layout version (exec/driver.h), as gridstep asks for it
    abi=$(sed -n 's/^#define GS_DRIVER_ABI \([0-9][0-9]*\).*/\1/p' "$src/exec/driver.h")
    nm -D --defined-only "$out/gridstep-cuda.so" | grep -q " gs_driver_cuda_module_abi$abi\$" ||
        { echo "device-check: the module does not export gs_driver_cuda_module_abi${abi:-?}" >&2; exit 1; }
fi
[ $build_only -eq 1 ] && { cat "$results"; exit 0; }

# the packed binary's own libraries, for gridstep only from here on (not for nvcc, cc or python3,
# which a newer distribution's libz or libyaml would not suit)
[ -d "$root/lib" ] && LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && export LD_LIBRARY_PATH

# ---- a GPU? ---------------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "device-check: no GPU here (nvidia-smi)"; exit 77
fi
nvidia-smi -L | head -2
GRIDSTEP_MODULE_PATH=$out
export GRIDSTEP_MODULE_PATH
[ -x "$gridstep" ] || { echo "device-check: no gridstep binary at $gridstep" >&2; exit 1; }
if ldd "$gridstep" | grep -Eq 'libcuda|libcudart|libnccl|libcublas'; then
    row "gridstep links no CUDA" FAIL "$(ldd "$gridstep" | grep -E 'cuda|nccl|cublas' | tr -s ' \n' ' ')"; fail=1
else
    row "gridstep links no CUDA" ok "ldd: no libcudart/libnccl/libcublas"
fi

# ---- 1-3: kernels, bandwidth, GEMM ------------------------------------------------------------------
kc_args=
[ $quick -eq 1 ] && kc_args=--quick
timeout -k 10 120 "$out/kernel_check" $kc_args "$out/gridstep-cuda.so" > "$out/kernel_check.txt" 2>&1
rc=$?
cat "$out/kernel_check.txt"
nbad=$(grep -c 'FAIL' "$out/kernel_check.txt")
nok=$(grep -c ' ok$' "$out/kernel_check.txt")
if [ $rc -eq 0 ]; then row "kernels vs host (fp32)" ok "$nok ops within tolerance"
else row "kernels vs host (fp32)" FAIL "exit $rc, $nbad outside tolerance"; fail=1; fi
# the GEMM attention path's own lines (out, p, mask, dqkv, rerun), already counted above
attn_rows() { # FILE LABEL [PREFIX, default attn_gemm]
    ap=${3:-attn_gemm}
    ag=$(grep "^  $ap " "$1")
    if [ -z "$ag" ]; then row "$2" FAIL "no $ap lines (kernel_check stopped early?)"; fail=1
    elif echo "$ag" | grep -q FAIL; then row "$2" FAIL "$(echo "$ag" | grep FAIL | awk '{print $2}' | tr '\n' ' ')"; fail=1
    else row "$2" ok "$(echo "$ag" | grep -c ' ok$') checks, worst $(echo "$ag" | sed -n 's/.*rel err \([0-9.e+-]*\).*/\1/p' | sort -g | tail -1)"
    fi
}
attn_rows "$out/kernel_check.txt" "attention gemm vs host (fp32)"
attn_rows "$out/kernel_check.txt" "attention flash vs host" attn_flash
attn_rows "$out/kernel_check.txt" "attention gemm-flash vs host flash" attn_gflash
attn_time() { # FILE LABEL
    for p in simple gemm flash gflash; do
        t=$(grep "^  attention $p " "$1" | sed 's/.*: //')
        [ -n "$t" ] && row "attention 1 layer $p ($2)" info "$t (seq 2048, 32 heads x 128)"
    done
}
if [ $quick -eq 0 ] && [ $rc -eq 0 ]; then
    row "AdamW bandwidth" info "$(grep '^  adamw .*GB/s' "$out/kernel_check.txt" | sed 's/^ *adamw *//')"
    row "RMSNorm bandwidth" info "$(grep '^  rmsnorm_fwd .*GB/s' "$out/kernel_check.txt" | sed 's/^ *rmsnorm_fwd *//')"
    row "D2D copy bandwidth" info "$(grep 'device-to-device' "$out/kernel_check.txt" | sed 's/^ *device-to-device copy *//')"
    grep -E '^  (qkv|o_proj|gate_up|down|lm_head) ' "$out/kernel_check.txt" | while read -r name rest; do
        row "GEMM $name (fp32)" info "$(echo "$rest" | sed 's/.*driver *\([0-9.]* TFLOP\/s\).*best of [0-9]* *\([0-9.]* TFLOP\/s\).*/\1 vs cuBLASLt best \2/')"
    done
    attn_time "$out/kernel_check.txt" fp32
    GRIDSTEP_CUDA_GEMM=tf32 timeout -k 10 60 "$out/kernel_check" "$out/gridstep-cuda.so" > "$out/kernel_check_tf32.txt" 2>&1
    rc32=$?
    grep -E '^  (qkv|gate_up) ' "$out/kernel_check_tf32.txt" | while read -r name rest; do
        row "GEMM $name (TF32)" info "$(echo "$rest" | sed 's/.*driver *\([0-9.]* TFLOP\/s\).*best of [0-9]* *\([0-9.]* TFLOP\/s\).*/\1 vs cuBLASLt best \2/')"
    done
    attn_rows "$out/kernel_check_tf32.txt" "attention gemm vs host (TF32)"
    attn_rows "$out/kernel_check_tf32.txt" "attention gemm-flash (TF32)" attn_gflash
    attn_time "$out/kernel_check_tf32.txt" TF32
    [ $rc32 -eq 0 ] || { row "kernels vs host (TF32)" FAIL "exit $rc32: $(grep -c FAIL "$out/kernel_check_tf32.txt") outside tolerance"; fail=1; }
fi

# ---- 4: exec, cuda vs host, tiny model ------------------------------------------------------------
# the scenario keeps flash attention (the default); the copy without it keeps the probabilities.
# GRIDSTEP_CUDA_ATTENTION unset (auto): cuBLAS GEMMs with row passes (the flash variant recomputes
# P from the lse); kernels: the flash kernels, or the per-row kernels without flash attention
sed 's/^  pipeline: 1f1b/  pipeline: 1f1b\
  flash_attention: false/' "$tiny" > "$out/tiny-noflash.yaml"
h=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 "$tiny" 2>"$out/tiny-host.err")
gf=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$tiny" 2>"$out/tiny-gflash.err")
c=$(GRIDSTEP_CUDA_ATTENTION=kernels timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$tiny" \
    2>"$out/tiny-cuda.err")
p=$(GRIDSTEP_CUDA_ATTENTION=kernels timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda \
    "$out/tiny-noflash.yaml" 2>"$out/tiny-simple.err")
g=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$out/tiny-noflash.yaml" 2>"$out/tiny-gemm.err")
losses() { # HOST_JSON CUDA_JSON
python3 - "$1" "$2" <<'PY'
import json, sys
try:
    h, c = json.loads(sys.argv[1])["loss"], json.loads(sys.argv[2])["loss"]
except Exception as e:
    print("FAIL no result (%s)" % e); sys.exit(0)
worst = max(abs(a - b) / abs(a) for a, b in zip(h, c))
print(("ok" if worst <= 1e-3 and len(h) == len(c) else "FAIL"),
      "losses host %s cuda %s, worst rel %.1e" % (" ".join("%.5f" % x for x in h), " ".join("%.5f" % x for x in c), worst))
PY
}
# a row per comparison: compared NAME HOST_JSON CUDA_JSON ERR_FILE
compared() {
    cmp=$(losses "$2" "$3")
    st=${cmp%% *}
    row "$1" "$st" "${cmp#* }"
    [ "$st" = ok ] || { fail=1; cat "$4"; }
}
compared "exec tiny: cuda gemm-flash vs host" "$h" "$gf" "$out/tiny-gflash.err"
compared "exec tiny: cuda flash kernels vs host" "$h" "$c" "$out/tiny-cuda.err"
compared "exec tiny: cuda per-row vs host" "$h" "$p" "$out/tiny-simple.err"
compared "exec tiny: cuda gemm-attn vs host" "$h" "$g" "$out/tiny-gemm.err"
# dropout (attention and hidden, 0.1 each): the same masks on the GPU as on the host, flash and
# per-row attention (auto runs the attention kernels for calls that draw masks)
for f in tiny tiny-noflash; do
    src_yaml=$out/$f.yaml
    [ $f = tiny ] && src_yaml=$tiny
    sed 's/^  pos: rope/  pos: rope\
  dropout: true/' "$src_yaml" > "$out/$f-drop.yaml"
done
hd=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 "$out/tiny-drop.yaml" 2>"$out/tiny-drop-host.err")
cd_=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$out/tiny-drop.yaml" 2>"$out/tiny-drop-cuda.err")
pd=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$out/tiny-noflash-drop.yaml" \
    2>"$out/tiny-drop-simple.err")
compared "exec tiny dropout: cuda flash vs host" "$hd" "$cd_" "$out/tiny-drop-cuda.err"
compared "exec tiny dropout: cuda per-row vs host" "$hd" "$pd" "$out/tiny-drop-simple.err"
# bf16 GEMM inputs (cuBLASLt bf16 in, fp32 out) against the host's rounding of the same inputs
hb=$(GRIDSTEP_HOST_GEMM=bf16 timeout -k 10 60 "$gridstep" exec --json --steps 3 "$tiny" 2>"$out/tiny-bf16-host.err")
cb=$(GRIDSTEP_CUDA_GEMM=bf16 timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$tiny" \
    2>"$out/tiny-bf16-cuda.err")
compared "exec tiny bf16 GEMMs: cuda vs host" "$hb" "$cb" "$out/tiny-bf16-cuda.err"
# mixture of experts (4 experts, top-2: kernels/cuda/moe.cu) and FP8 under current scaling
# (kernels/cuda/fp8.cu's casts before fp32 GEMMs), one rank each: the host driver's losses
sed 's/^  pos: rope/  pos: rope\
  moe: {experts: 4, top_k: 2}/' "$tiny" > "$out/tiny-moe.yaml"
sed 's/precision: bf16/precision: fp8\
  fp8_recipe: current/; s/preset: dgx-a100-80g/preset: dgx-h100/' "$tiny" > "$out/tiny-fp8.yaml"
for f in moe fp8; do
    hm=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 "$out/tiny-$f.yaml" 2>"$out/tiny-$f-host.err")
    cm=$(GRIDSTEP_CUDA_GEMM=fp32 timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$out/tiny-$f.yaml" \
        2>"$out/tiny-$f-cuda.err")
    compared "exec tiny $f: cuda vs host" "$hm" "$cm" "$out/tiny-$f-cuda.err"
done
cl=$(GRIDSTEP_CUDA_GEMM=fp32 GRIDSTEP_CUDA_FP8=cublaslt timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda \
    "$out/tiny-fp8.yaml" 2>"$out/tiny-fp8-lt.err")
hm=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 "$out/tiny-fp8.yaml" 2>/dev/null)
compared "exec tiny fp8, cuBLASLt FP8 GEMMs: cuda vs host" "$hm" "$cl" "$out/tiny-fp8-lt.err"
# delayed scaling: the casts at the amax history's scales (kernels/cuda/fp8.cu's round_scaled),
# each amax read back for the reduction
sed 's/fp8_recipe: current/fp8_recipe: delayed/' "$out/tiny-fp8.yaml" > "$out/tiny-fp8d.yaml"
hd8=$(timeout -k 10 60 "$gridstep" exec --json --steps 3 "$out/tiny-fp8d.yaml" 2>"$out/tiny-fp8d-host.err")
cd8=$(GRIDSTEP_CUDA_GEMM=fp32 timeout -k 10 60 "$gridstep" exec --json --steps 3 --driver cuda "$out/tiny-fp8d.yaml" \
    2>"$out/tiny-fp8d-cuda.err")
compared "exec tiny fp8 delayed: cuda vs host" "$hd8" "$cd8" "$out/tiny-fp8d-cuda.err"
# the memory pre-flight counts the GEMM attention path's backward scratch: one layer of the tiny
# model over sequences of 393216 = 3 x 2^17 tokens without flash attention, where one kv head's
# dP/dS scratch is 393216^2 x 4 B = 9 x 2^36 B = 576 GiB (past the
# 512 MiB cap: one head at a time) beside the ledger's own scores, more than any GPU has:
# refused (exit 2) before allocating, naming the scratch as its own term
sed 's/seq: 128/seq: 393216/; s/layers: 4/layers: 1/; s/global: 4, micro: 2/global: 1, micro: 1/;
     s/precision: bf16/precision: fp32/; s/^  pipeline: 1f1b/  pipeline: 1f1b\
  flash_attention: false/' "$tiny" > "$out/long-seq.yaml"
GRIDSTEP_CUDA_ATTENTION=gemm timeout -k 10 60 "$gridstep" exec --driver cuda "$out/long-seq.yaml" >/dev/null \
    2>"$out/long-seq.err"
rc=$?
if [ $rc -eq 2 ] && grep -q "memory ledger's peak [0-9.]* GiB (fp32) + scratch 576\.000 GiB (the GEMM attention path.* > free [0-9.]* GiB" \
    "$out/long-seq.err"; then
    row "exec pre-flight: gemm attn scratch" ok "refused: $(sed 's/.*needs //; s/ (the GEMM attention path[^)]*)//; s/ on device.*//' "$out/long-seq.err")"
else
    row "exec pre-flight: gemm attn scratch" FAIL "exit $rc (want 2 naming 576 GiB of scratch): $(tail -c 300 "$out/long-seq.err")"
    fail=1
fi

# a run's step and first loss against a reference run's first loss (the forward alone, before any
# update: within 1e-3): first_loss RUN_JSON REF_JSON REF_NAME SIM_S
first_loss() {
python3 - "$1" "$2" "$3" "$4" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); s = d["step_s"]
try:
    ref = json.load(open(sys.argv[2]))["loss"][0]
    rel = abs(d["loss"][0] - ref) / abs(ref)
except Exception:
    ref, rel = None, None
ok = rel is not None and rel <= 1e-3
print("%s measured %.3f s/step (best of steps 2-5), sim h200 %s s; loss %.4f; first loss %.5f vs %s %s (rel %s)" % (
    "ok" if ok else "FAIL", min(s[1:] or s), sys.argv[4], d["loss"][-1], d["loss"][0], sys.argv[3],
    "%.5f" % ref if ref is not None else "?", "%.1e" % rel if rel is not None else "?"))
PY
}

# ---- 4b: cuBLASLt's bf16 and FP8 GEMMs over tests/gpu/gemm-shapes.txt (gemm.csv), the measured
# side of tests/check_gemm_measured.c ----------------------------------------------------------------
if [ $quick -eq 0 ]; then
    g0=$(date +%s)
    timeout -k 10 150 "$out/gemm_sweep" "$src/tests/gpu/gemm-shapes.txt" "$out/gemm.csv" 2>"$out/gemm.err"
    rc=$?
    if [ $rc -eq 0 ]; then
        row "GEMM sweep (bf16, FP8)" ok "$(($(wc -l < "$out/gemm.csv") - 1)) rows in $(($(date +%s) - g0)) s: $(grep '^bf16,sq8192,' "$out/gemm.csv" | cut -d, -f10) bf16, $(grep '^fp8_fast_accum,sq8192,' "$out/gemm.csv" | cut -d, -f10) FP8 TFLOP/s at 8192^3"
    else
        row "GEMM sweep (bf16, FP8)" FAIL "exit $rc: $(tail -c 300 "$out/gemm.err")"; fail=1
    fi
    # the rate a step sees: Llama 3 8B's gate+up GEMM held 5 s per type at the power cap (the
    # last half-second window against the first)
    timeout -k 10 40 "$out/gemm_sweep" --sustain 5 l8b_up "$src/tests/gpu/gemm-shapes.txt" "$out/sustain.csv" \
        2>"$out/sustain.err"
    rc=$?
    if [ $rc -eq 0 ]; then
        row "GEMM at the power cap" info "$(awk -F, 'NR > 1 { if (!($1 in f)) f[$1] = $4; l[$1] = $4 }
            END { printf "bf16 %s -> %s, FP8 fast %s -> %s, split %s -> %s TFLOP/s (first -> last 0.5 s)",
                  f["bf16"], l["bf16"], f["fp8_fast_accum"], l["fp8_fast_accum"], f["fp8_split_accum"],
                  l["fp8_split_accum"] }' "$out/sustain.csv")"
    else
        row "GEMM at the power cap" FAIL "exit $rc: $(tail -c 300 "$out/sustain.err")"; fail=1
    fi
    # what a collective's CTAs take from compute: the GEMM and a triad beside 16 CTAs spinning,
    # copying 1 TB/s of HBM and unpaced (contention.csv; tests/check_contention_measured.c)
    timeout -k 10 60 "$out/contention" --quick "$out/contention.csv" 2>"$out/contention.err"
    rc=$?
    if [ $rc -eq 0 ]; then
        row "compute beside 16 copy CTAs" info "$(awk -F, '$2 == 16 { f[$1 "," $3] = $7; h[$1 "," $3] = $4 }
            END { printf "GEMM x%.3f spinning, x%.3f at %s GB/s HBM; triad x%.3f, x%.3f at %s GB/s", f["bf16,0"],
                  f["bf16,1000"], h["bf16,1000"], f["stream,0"], f["stream,1000"], h["stream,1000"] }' \
            "$out/contention.csv")"
    else
        row "compute beside 16 copy CTAs" FAIL "exit $rc: $(tail -c 300 "$out/contention.err")"; fail=1
    fi
fi

# ---- 5: llama2-7b, 8 layers, one GPU ---------------------------------------------------------------
big=$scn/llama2-7b-8l-1xh200.yaml
sim=$("$gridstep" sim --json "$big" 2>/dev/null | python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["step_time_s"])' 2>/dev/null)
left=$((budget - 35 - $(elapsed)))
if [ $left -lt 60 ]; then
    row "llama2-7b 8L x5 steps (TF32)" skip "no time left ($(elapsed) s used)"
else
    w0=$(date +%s)
    GRIDSTEP_CUDA_GEMM=tf32 timeout -k 10 $left "$gridstep" exec --json --steps 5 --driver cuda "$big" > "$out/big.json" 2>"$out/big.err"
    rc=$?
    wall=$(($(date +%s) - w0))
    res=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["step_s"]; print("%.3f %.3f %s" % (min(s[1:] or s), d["loss"][-1], " ".join("%.3f" % x for x in s)))' "$out/big.json" 2>/dev/null)
    if [ $rc -eq 0 ] && [ -n "$res" ]; then
        set -- $res
        row "llama2-7b 8L x5 steps (TF32)" ok "measured $1 s/step (best of steps 2-5), sim h200 ${sim:-?} s; loss $2; run ${wall} s"
    else
        row "llama2-7b 8L x5 steps (TF32)" FAIL "exit $rc: $(tail -c 300 "$out/big.err")"; fail=1
    fi
    # the same model trained in bf16 (the scenario is fp32): the cuda driver follows the
    # scenario's precision by default (no GRIDSTEP_CUDA_GEMM), bf16 GEMM inputs with fp32
    # accumulation, next to the sim's h200 prediction for the bf16 scenario (attention stays fp32)
    left=$((budget - 45 - $(elapsed)))
    sed 's/^  precision: fp32/  precision: bf16/' "$big" > "$out/big-bf16.yaml"
    simb=$("$gridstep" sim --json "$out/big-bf16.yaml" 2>/dev/null | python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["step_time_s"])' 2>/dev/null)
    if [ $left -lt 45 ]; then
        row "llama2-7b 8L x5 steps (bf16)" skip "no time left ($(elapsed) s used)"
    elif ! grep -q '^  precision: bf16' "$out/big-bf16.yaml"; then
        row "llama2-7b 8L x5 steps (bf16)" FAIL "no '  precision: fp32' line in $big to turn into bf16"; fail=1
    else
        env -u GRIDSTEP_CUDA_GEMM timeout -k 10 $left "$gridstep" exec --json --steps 5 --driver cuda \
            "$out/big-bf16.yaml" > "$out/big-bf16.json" 2>"$out/big-bf16.err"
        rc=$?
        res=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["step_s"]; print("%s %.3f %.3f" % ("ok" if d.get("gemm","").startswith("bf16") else "FAIL", min(s[1:] or s), d["loss"][-1]))' "$out/big-bf16.json" 2>/dev/null)
        if [ $rc -eq 0 ] && [ -n "$res" ]; then
            set -- $res
            row "llama2-7b 8L x5 steps (bf16)" "$1" "measured $2 s/step (best of steps 2-5), sim h200 ${simb:-?} s; loss $3"
            [ "$1" = ok ] || fail=1
            # issue 7's dispatcher target: ready events waiting to be issued on the compute
            # stream, at most 3% of the (last) step; a measurement (ok or miss), not a failure
            gap=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); g=d["dispatch_gap_share"]; print("%s %.2f%% of the step (%.1f ms on rank %d)" % ("ok" if g <= 0.03 else "miss", 100*g, 1e3*d["dispatch_gap_s"], d["dispatch_gap_rank"]))' "$out/big-bf16.json" 2>/dev/null)
            [ -n "$gap" ] && row "dispatch gaps (bf16 run)" "${gap%% *}" "${gap#* }"
        else
            row "llama2-7b 8L x5 steps (bf16)" FAIL "exit $rc: $(tail -c 300 "$out/big-bf16.err")"; fail=1
        fi
    fi
    # the scenario's flash attention through the flash kernels (GRIDSTEP_CUDA_ATTENTION=kernels;
    # the default, auto, runs cuBLAS GEMMs recomputing P from the lse); its first loss (the
    # forward alone) within 1e-3 of the default's
    left=$((budget - 50 - $(elapsed)))
    if [ $left -lt 45 ]; then
        row "llama2-7b 8L x5 (TF32, flash kernels)" skip "no time left ($(elapsed) s used)"
    else
        GRIDSTEP_CUDA_ATTENTION=kernels GRIDSTEP_CUDA_GEMM=tf32 timeout -k 10 $left "$gridstep" exec --json --steps 5 \
            --driver cuda "$big" > "$out/big-kernels.json" 2>"$out/big-kernels.err"
        rc=$?
        res=$(first_loss "$out/big-kernels.json" "$out/big.json" auto "${sim:-?}" 2>/dev/null)
        if [ $rc -eq 0 ] && [ -n "$res" ]; then
            row "llama2-7b 8L x5 (TF32, flash kernels)" "${res%% *}" "${res#* }"
            [ "${res%% *}" = ok ] || fail=1
        else
            row "llama2-7b 8L x5 (TF32, flash kernels)" FAIL "exit $rc: $(tail -c 300 "$out/big-kernels.err")"; fail=1
        fi
    fi
    # 6: calibrate on this GPU (events; one GPU: no collectives) and compare the calibrated sim
    # with measured steps of the same scenario (issue 8's single-GPU target: |error| <= 10%):
    # with the default attention path (auto: the GEMM path's flash variant), then with the flash
    # kernels
    # calib_compare LABEL TAG ATTENTION (auto|kernels)
    calib_compare() {
        left=$((budget - 55 - $(elapsed)))
        if [ $left -lt 40 ]; then
            row "calibrate cuda + compare ($1)" skip "no time left ($(elapsed) s used)"; return
        fi
        GRIDSTEP_CUDA_ATTENTION=$3 GRIDSTEP_CUDA_GEMM=tf32 timeout -k 10 $((left / 2)) "$gridstep" calibrate \
            --driver cuda --quick --out "$out/cuda-calib$2.json" "$big" > "$out/calib$2.txt" 2>"$out/calib$2.err"
        rc=$?
        if [ $rc -ne 0 ]; then
            row "calibrate cuda ($1)" FAIL "exit $rc: $(tail -c 300 "$out/calib$2.err")"; fail=1; return
        fi
        row "calibrate cuda ($1)" ok "$(grep -m1 '^  fit: measured' "$out/calib$2.txt" | cut -c1-110)"
        left=$((budget - 15 - $(elapsed)))
        GRIDSTEP_CUDA_ATTENTION=$3 GRIDSTEP_CUDA_GEMM=tf32 timeout -k 10 $left "$gridstep" compare --driver cuda \
            --steps 3 --json --calib "$out/cuda-calib$2.json" "$big" > "$out/compare$2.json" 2>"$out/compare$2.err"
        rc=$?
        res=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d["step_error"]; print("%s exec %.3f s, sim %.3f s calibrated (%+.1f%%), %.3f s presets (%+.1f%%)" % ("ok" if abs(e) <= 0.10 else "miss", d["exec_step_time_s"], d["sim_step_time_s"], 100*e, d["default_sim_step_time_s"], 100*d["default_step_error"]))' "$out/compare$2.json" 2>/dev/null)
        if [ $rc -eq 0 ] && [ -n "$res" ]; then
            row "compare cuda, calibrated ($1)" "${res%% *}" "${res#* }"
        else
            row "compare cuda, calibrated ($1)" FAIL "exit $rc: $(tail -c 300 "$out/compare$2.err")"; fail=1
        fi
    }
    calib_compare TF32 "" auto
    calib_compare "TF32, flash kernels" -kernels kernels
    # the same with attention through cuBLAS GEMMs; its first loss (before any update: the
    # forward alone) within 1e-3 of the default path's
    left=$((budget - 15 - $(elapsed)))
    if [ $left -lt 60 ]; then
        row "llama2-7b 8L x5 (TF32, gemm attn)" skip "no time left ($(elapsed) s used)"
    else
        sed 's/^  pipeline: 1f1b/  pipeline: 1f1b\
  flash_attention: false/' "$big" > "$out/big-noflash.yaml"
        GRIDSTEP_CUDA_ATTENTION=gemm GRIDSTEP_CUDA_GEMM=tf32 timeout -k 10 $left "$gridstep" exec --json --steps 5 \
            --driver cuda "$out/big-noflash.yaml" > "$out/big-gemm.json" 2>"$out/big-gemm.err"
        rc=$?
        res=$(first_loss "$out/big-gemm.json" "$out/big.json" default "${sim:-?}" 2>/dev/null)
        if [ $rc -eq 0 ] && [ -n "$res" ]; then
            row "llama2-7b 8L x5 (TF32, gemm attn)" "${res%% *}" "${res#* }"
            [ "${res%% *}" = ok ] || fail=1
        else
            row "llama2-7b 8L x5 (TF32, gemm attn)" FAIL "exit $rc: $(tail -c 300 "$out/big-gemm.err")"; fail=1
        fi
    fi
    left=$((budget - $(elapsed)))
    if [ $left -gt 60 ]; then
        timeout -k 10 $left "$gridstep" exec --json --steps 2 --driver cuda "$big" > "$out/big32.json" 2>"$out/big32.err"
        rc=$?
        if [ $rc -eq 0 ]; then
            row "llama2-7b 8L x2 steps (fp32)" ok "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("measured %.3f s/step (step 2)" % d["step_s"][-1])' "$out/big32.json")"
        elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            row "llama2-7b 8L x2 steps (fp32)" skip "did not finish in ${left} s"
        else
            row "llama2-7b 8L x2 steps (fp32)" FAIL "exit $rc: $(tail -c 300 "$out/big32.err")"; fail=1
        fi
    fi
fi

echo
echo "device check ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), $(elapsed) s):"
printf '%-34s %-8s %s\n' check result detail
cat "$results"
exit $fail
