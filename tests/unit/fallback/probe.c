/* What a program sees of its NCCL: the version, a unique id, a 1-rank init and the last
 * error, one line each. Built against braid (fallback_probe) and against the real NCCL
 * (fallback_probe_real); forwarding_test.sh runs both under each BRAID_BACKEND. */
#include <stdio.h>

#include "nccl.h"

int main(void) {
  int version = 0;
  ncclResult_t rc = ncclGetVersion(&version);
  printf("version rc=%d code=%d\n", (int)rc, version);
  ncclUniqueId id;
  rc = ncclGetUniqueId(&id);
  printf("uniqueid rc=%d last=[%s]\n", (int)rc, ncclGetLastError(NULL));
  ncclComm_t comm = NULL;
  rc = ncclCommInitRank(&comm, 1, id, 0);
  printf("init rc=%d last=[%s]\n", (int)rc, ncclGetLastError(NULL));
  if (rc == ncclSuccess) printf("destroy rc=%d\n", (int)ncclCommDestroy(comm));
  return 0;
}
