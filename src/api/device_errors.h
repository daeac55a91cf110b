// CUDA errors that the stream's work left behind: a kernel fault (braid's or anyone's on the
// device) makes the CUDA context unusable, and ncclCommGetAsyncError must say so.
#pragma once
#include "nccl.h"

struct ncclComm;

namespace braid::api {

// ncclUnhandledCudaError (with ncclGetLastError naming the rank and the CUDA error) when
// the communicator's device has a sticky error; ncclSuccess otherwise, and for host-only
// ranks or where there is no CUDA driver. Never waits for the GPU.
ncclResult_t deviceAsyncError(ncclComm* comm);

}  // namespace braid::api
