// The ABI table of braid's include/nccl.h. ABI_NCCL_HEADER is its absolute path, so the
// toolkit's nccl.h (also on the CUDA include path) can never be picked up instead.
#include ABI_NCCL_HEADER
#define ABI_TABLE_FUNCTION braidTable
#include "abi_table_body.inc"
