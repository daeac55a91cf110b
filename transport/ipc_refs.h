// Device pointers that another process on this host can map: an IpcRef names the allocation
// (its owner, the owner's address of it, its id, a CUDA IPC handle) and the offset into it.
// The ranks that a leader serves (src/api/served.h) describe every pointer of their packed
// work this way; the leader maps each allocation once (IpcImports) and rewrites the pointers.
//
// Only whole allocations the owner made with cudaMalloc are shared (2 MiB hygiene: never a
// neighbour's memory). Memory from a stream-ordered pool or cuMem* cannot be described (CUDA
// IPC of cudaMalloc memory only), and says so.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "nccl.h"

namespace braid::transport {

struct IpcRef {
  int64_t ownerPid = 0;
  uint64_t ownerHost = 0;   // host hash of the owner (pids repeat across hosts and containers)
  uint64_t ownerBase = 0;   // the allocation's address in the owner's process
  uint64_t bufferId = 0;    // the owner's CU_POINTER_ATTRIBUTE_BUFFER_ID: a new one at a known base is a new allocation
  uint64_t offset = 0;      // of the pointer into the allocation
  cudaIpcMemHandle_t handle{};
};

// Allocations the P2P transport shares by CUDA IPC, its own FIFO regions and those it mapped
// from peers, so that a pointer into them is described by a lookup (their owner's handle), not by
// two driver calls per pointer per post.
void noteShared(void* localBase, size_t bytes, int64_t ownerPid, uint64_t ownerHost, uint64_t ownerBase,
                uint64_t bufferId, const cudaIpcMemHandle_t& handle);
void forgetShared(void* localBase);

// Describes `p` (of this process, `pid` on host `host`): an allocation noted above, or one
// of this process's own cudaMalloc allocations (its handle cached by buffer id). `what` names
// the pointer in the error.
ncclResult_t describePointer(const void* p, int64_t pid, uint64_t host, const char* what, IpcRef* out);

// A leader's mappings of other processes' allocations, by (owner, base, id): each opened once,
// closed when this object goes. An allocation of this process (owner == self) is its own address.
class IpcImports {
 public:
  IpcImports(int64_t selfPid, uint64_t selfHost, int cudaDev) : pid_(selfPid), host_(selfHost), cudaDev_(cudaDev) {}
  ~IpcImports();
  IpcImports(const IpcImports&) = delete;
  IpcImports& operator=(const IpcImports&) = delete;
  // This process's address of `ref`. A new buffer id at a base mapped before (the owner freed
  // and reallocated the range) opens the new allocation and retires the old mapping: closing it
  // now could wait for the kernels running in this context, and one of them may wait for the
  // kernel the caller is about to launch (on the H200, a 2-process all-reduce hung there).
  ncclResult_t resolve(const IpcRef& ref, void** out, std::string* error);
  // Closes the retired mappings. Only while no kernel that could use them, or that waits for
  // a kernel this thread launches, runs in this context.
  void closeRetired();
  bool anyRetired() const { return !retired_.empty(); }
  size_t opened() const { return opens_; }

 private:
  using Key = std::tuple<uint64_t, int64_t, uint64_t>;  // owner host, pid, base
  struct Mapping {
    uint64_t bufferId = 0;
    char* local = nullptr;
  };
  int64_t pid_;
  uint64_t host_;
  int cudaDev_;
  std::map<Key, Mapping> byKey_;
  std::vector<char*> retired_;
  size_t opens_ = 0;
};

}  // namespace braid::transport
