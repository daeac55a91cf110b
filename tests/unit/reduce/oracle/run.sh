#!/bin/bash
# Builds and runs the NCCL oracle (nccl_oracle.cu) on a GPU machine, from the repository
# root: tests/unit/reduce/oracle/run.sh [output folder]
#  - always: numeric.h on the GPU against CUDA's conversions, the GPU's NaN/zero behaviour,
#    and braid's host kernels against an emulation of NCCL's sm_90 reduction operations
#    (its EMU-DIGEST lines, without the prefix, are gpu_digests.inc);
#  - with 2 GPUs: against the real NCCL's 2-rank all-reduce (Ring with each protocol, Tree);
#  - the SASS of NCCL's PreMulSum kernels, to see whether the product is fused into the sum.
# Uses the NCCL of the CUDA toolkit, or else of Python's nvidia-nccl package. NVLS stays off.
set -uo pipefail
out=${1:-/tmp/braid-oracle}
mkdir -p "$out"
nccl=""
for d in /usr/local/cuda/lib /usr/local/cuda/lib64; do [ -e "$d/libnccl.so.2" ] && nccl=$(dirname "$d") && break; done
[ -n "$nccl" ] || nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
lib=$nccl/lib; [ -e "$lib/libnccl.so.2" ] || lib=$nccl/lib64
echo "NCCL from $lib"
nvcc -std=c++20 -O2 -arch=sm_90 -fmad=false -Xcompiler -ffp-contract=off -Isrc -Itests/unit/reduce -I"$nccl/include" \
  tests/unit/reduce/oracle/nccl_oracle.cu src/host/reduce.cc src/host/reduce_int.cc src/host/reduce_float.cc \
  src/host/reduce_narrow.cc -L"$lib" -l:libnccl.so.2 -Xlinker -rpath,"$lib" -o "$out/nccl_oracle" || exit 1
export NCCL_NVLS_ENABLE=0
NCCL_ALGO=Ring NCCL_PROTO=Simple "$out/nccl_oracle" --conversions
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  for proto in LL LL128; do NCCL_ALGO=Ring NCCL_PROTO=$proto "$out/nccl_oracle" | grep -v '^DIGEST.*mismatches 0 '; done
  NCCL_ALGO=Tree "$out/nccl_oracle" | grep -v '^DIGEST.*mismatches 0 '
fi
# Count the float operations in NCCL's PreMulSum all-reduce functions (FFMA = fused).
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass -arch sm_90 "$lib/libnccl.so.2" > "$out/nccl.sass" 2> /dev/null
  for f in AllReduce_PreMulSum_f32_RING_SIMPLEv AllReduce_PreMulSum_f32_RING_LLv AllReduce_PreMulSum_f32_RING_LL128v \
           AllReduce_PreMulSum_f32_TREE_SIMPLEv AllReduce_PreMulSum_f32_TREE_LLv ReduceScatter_PreMulSum_f32_RING_SIMPLEv \
           AllReduce_PreMulSum_f64_RING_SIMPLEv AllReduce_PreMulSum_f16_RING_SIMPLEv AllReduce_PreMulSum_f16_RING_LLv \
           AllReduce_PreMulSum_bf16_RING_SIMPLEv AllReduce_PreMulSum_f8e4m3_RING_SIMPLEv AllReduce_Sum_f8e4m3_RING_SIMPLEv \
           AllReduce_Sum_f32_RING_SIMPLEv AllReduce_Sum_f16_RING_SIMPLEv; do
    awk -v f="$f" '/Function : /{on = index($0, f) > 0} on' "$out/nccl.sass" |
      grep -oE '\b(FFMA|FMUL|FADD|DFMA|DMUL|DADD|HFMA2|HMUL2|HADD2)(\.[A-Z0-9_.]+)?' | sed 's/\..*//' | sort | uniq -c |
      tr '\n' ' ' | sed "s/^/SASS $f: /"; echo
  done
  grep -c "Function : " "$out/nccl.sass" | sed 's/^/SASS functions: /'
  grep "Function : .*AllReduce_PreMulSum_f32_RING" "$out/nccl.sass" | head -5
  rm -f "$out/nccl.sass"
fi
