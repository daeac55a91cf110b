// How an NCCL entry point is defined: the strong symbol is pnccl<Name> (the profiling
// interface), and nccl<Name> is a weak alias of it, as in libnccl.so.2.
//
//   BRAID_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) { ... }
//
// defines pncclCommCount and the weak alias ncclCommCount.
#pragma once
#include "nccl.h"

#define BRAID_EXPORT __attribute__((visibility("default")))

#define BRAID_API(ret, name, ...)                                                        \
  extern "C" BRAID_EXPORT ret p##name(__VA_ARGS__);                                      \
  extern "C" BRAID_EXPORT ret name(__VA_ARGS__) __attribute__((weak, alias("p" #name))); \
  extern "C" BRAID_EXPORT ret p##name(__VA_ARGS__)
