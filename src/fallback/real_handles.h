// The real NCCL communicators braid has made (RealComm), so that a call reaching one of braid's
// exports with such a handle goes back to the real library.
//
// Why such calls come: libnccl.so.2 calls some of its own exported names through its PLT
// (ncclCommGetAsyncError from its enqueue checks, ncclBroadcast, ncclCommRegister, ...;
// real_nccl.h). braid loads it with RTLD_DEEPBIND so that those stay its own, but a program may
// have loaded the same file before braid asked for it, without DEEPBIND: PyTorch's wheels
// preload their CUDA libraries, libnccl.so.2 among them, by path. dlopen then hands braid that
// copy, whose own names were bound to braid's exports (LD_PRELOAD comes first), so the real
// NCCL asks braid about its own communicators. Such a call must reach the real definition.
#pragma once
#include <atomic>

namespace braid::fallback {

void noteRealHandle(const void* handle);    // made (after the real init or split returned it)
void forgetRealHandle(const void* handle);  // closed (after the real destroy or abort returned)
bool isRealHandle(const void* handle);

// True when any real handle is live: the exports' test before they look one up (one load).
inline std::atomic<int> liveRealHandles{0};
inline bool anyRealHandles() { return liveRealHandles.load(std::memory_order_relaxed) > 0; }

}  // namespace braid::fallback
