/* The smallest braid program: four host-only ranks in one process (ncclCommInitAll with a
 * NULL device list on a machine without GPUs, or four GPUs when there are), one all-reduce
 * on host memory, checked. Builds against braid exactly as against NCCL. */
#include <stdio.h>

#include "nccl.h"

#define N 4
#define COUNT 1024

int main(void) {
  int version = 0;
  ncclGetVersion(&version);
  ncclComm_t comms[N];
  if (ncclCommInitAll(comms, N, NULL) != ncclSuccess) {
    fprintf(stderr, "init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  static float buf[N][COUNT];
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < COUNT; ++i) buf[r][i] = (float)(r + i);
  ncclGroupStart();
  for (int r = 0; r < N; ++r) ncclAllReduce(buf[r], buf[r], COUNT, ncclFloat32, ncclSum, comms[r], NULL);
  if (ncclGroupEnd() != ncclSuccess) {
    fprintf(stderr, "all-reduce failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  int wrong = 0;
  for (int r = 0; r < N; ++r)
    for (int i = 0; i < COUNT; ++i) wrong += buf[r][i] != (float)(N * i + N * (N - 1) / 2);
  for (int r = 0; r < N; ++r) ncclCommDestroy(comms[r]);
  printf("NCCL API version %d, %d wrong\n", version, wrong);
  return wrong != 0;
}
