// The executor's kernel instances: one per element type x protocol, built from the two lists
// below and nothing else -- the ElemType enum (work_layout.h), the launcher table (entry.cu)
// and the generated files, one per type (CMakeLists.txt finds the types in this file by the
// form X(<type>, nccl<...>) on one line each: keep it).
//
// Element types, in ncclDataType_t order; pack.cc checks each code against the enumerator
// named beside it. X(kernel name, ncclDataType_t enumerator).
#pragma once

#define BRAID_ELEM_TYPES(X) \
  X(Int8, ncclInt8)         \
  X(Uint8, ncclUint8)       \
  X(Int32, ncclInt32)       \
  X(Uint32, ncclUint32)     \
  X(Int64, ncclInt64)       \
  X(Uint64, ncclUint64)     \
  X(Float16, ncclFloat16)   \
  X(Float32, ncclFloat32)   \
  X(Float64, ncclFloat64)   \
  X(Bfloat16, ncclBfloat16) \
  X(Fp8E4M3, ncclFloat8e4m3) \
  X(Fp8E5M2, ncclFloat8e5m2)

// The protocols each type's file instantiates, as algo::Protocol names them, in its order
// (src/algo/protocol.h; entry.cu checks it).
#define BRAID_PROTOCOLS(X) \
  X(LL)                    \
  X(LL128)                 \
  X(Simple)
