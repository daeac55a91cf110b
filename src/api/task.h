// One collective or point-to-point call, as recorded by the API before execution.
#pragma once
#include <cstddef>

#include "algo/schedule.h"
#include "nccl.h"

struct ncclComm;

namespace braid::api {

struct Task {
  const char* caller = "";  // "ncclAllReduce", ... for error messages
  ncclComm* comm = nullptr;
  algo::Coll coll = algo::Coll::AllReduce;
  bool isSend = false;      // SendRecv tasks: send (true) or recv (false)
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;             // Broadcast/Reduce/Gather/Scatter root; SendRecv peer
  cudaStream_t stream = nullptr;
  bool onDevice = false;    // buffers are device memory: GPU executor; else the CPU engine
};

}  // namespace braid::api
