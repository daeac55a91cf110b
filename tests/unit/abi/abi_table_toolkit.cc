// The ABI table of NVIDIA's nccl.h (NCCL 2.28.9 in the CUDA toolkit). ABI_NCCL_HEADER is its
// absolute path, and braid's include/ is not on this file's include path.
#include ABI_NCCL_HEADER
#define ABI_TABLE_FUNCTION toolkitTable
#include "abi_table_body.inc"
