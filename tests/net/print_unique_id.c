/* Prints ncclGetUniqueId's 128 bytes as 256 hex digits (BRAID_UNIQUE_ID's format), for ranks
 * started by hand, as nodes_run.sh starts them in network namespaces. With NCCL_COMM_ID set,
 * the id names that address; rank 0 starts the root there at init. */
#include <stdio.h>

#include "nccl.h"

int main(void) {
  ncclUniqueId id;
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s: %s\n", ncclGetErrorString(rc), ncclGetLastError(NULL));
    return 1;
  }
  for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; ++i) printf("%02x", (unsigned char)id.internal[i]);
  printf("\n");
  return 0;
}
