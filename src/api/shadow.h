// BRAID_SHADOW (issue 14 item 3): each checked device collective also runs on the braid
// communicator's real NCCL communicator (fallback/real_comm.h), from a copy of its inputs into
// scratch buffers, and the two outputs are compared on the GPU (kernels/shadow_compare.h's
// rule). Nothing waits on the user's stream: each check's result is copied to pinned memory
// behind an event, read by the communicator's next call (pollShadow), by ncclCommFinalize and
// ncclCommDestroy (drainShadow), or when all 64 result slots are in use (the oldest is waited
// for). Settings: fallback/shadow_settings.h. Without CUDA kernels every function is a no-op.
#pragma once
#include <memory>
#include <span>

#include "api/task.h"
#include "nccl.h"

namespace braid::api {

// One group's device tasks: before() runs ahead of braid's launch (the real communicators made,
// the inputs copied), after() behind it (the real calls as one real group, then the checks).
class ShadowGroup {
 public:
  explicit ShadowGroup(std::span<const Task* const> tasks);
  ~ShadowGroup();  // frees scratch that after() did not take over (braid's launch failed)
  ShadowGroup(const ShadowGroup&) = delete;
  ShadowGroup& operator=(const ShadowGroup&) = delete;
  // Errors only under BRAID_SHADOW_STRICT=1 (a communicator that cannot be shadowed); else a
  // WARN once per communicator and the call runs unchecked.
  ncclResult_t before();
  ncclResult_t after();

 private:
  struct Items;
  std::unique_ptr<Items> items_;
};

// The communicator's finished checks, logged; under STRICT a mismatch among them fails this
// call (ncclInternalError, its text as the last error).
ncclResult_t pollShadow(ncclComm* comm, const char* caller);
// Waits for every pending check of the communicator, then as pollShadow.
ncclResult_t drainShadow(ncclComm* comm, const char* caller);
// Frees the communicator's shadow state, after its kernels (and braid's) have stopped.
void releaseShadow(ncclComm* comm);

}  // namespace braid::api
