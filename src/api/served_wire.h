// The messages between a served rank and its leader (served.h), as both ends write and read
// them: a hello, posts of packed work with every pointer described, a goodbye. Plain structs,
// one build on both ends (the same library on every rank of a host).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/work_layout.h"
#include "transport/ipc_refs.h"
#include "transport/shared_pages.h"

namespace braid::api::served_wire {

constexpr uint32_t kMagic = 0xb5e7d001;
enum FrameKind : uint32_t { kHello = 1, kPost = 2, kBye = 3 };
constexpr uintptr_t kScratchTokenBase = uintptr_t(0xb0a1d) << 44;  // above every user-space address
constexpr size_t kMostScratch = 1u << 16;
constexpr double kSendSeconds = 30;  // a post the leader does not take in this long: it stopped reading

struct HelloFrame {
  uint32_t magic, kind;
  int32_t rank;
  int64_t pid;
  char page[transport::kShmNameBytes];
};

struct PostHeader {
  uint32_t magic, kind, seq;
  uint32_t pad;
  uint64_t collSeq;  // ServedGate: the last collective of the post (0: none)
  uint32_t nPeers;   // then nPeers PeerCounts: the sender's send/recv ops with each rank, so far
  uint32_t pad2;
  uint8_t protocol, peersOnThisGpu;
  uint16_t threadsPerBlock;
  uint32_t slotBytes, nSlots;
  int32_t slicesPerStep;
  uint32_t nScratch, nCopies, nKernels;
  uint32_t soleColl;   // SoleCollective: algo::Coll + 1, or 0 (not one collective)
  uint32_t soleType;
  int32_t soleRoot;
  uint64_t soleCount;
};

struct WireRef {
  uint32_t scratch;  // 0: `ipc` names the memory; k + 1: the leader's scratch buffer k
  uint32_t pad;
  transport::IpcRef ipc;
};

struct WireCopy {
  WireRef dst, src;
  uint64_t bytes;
};

struct KernelHeader {
  uint32_t type, nBlocks;
  kernels::WorkIndex index;
  uint32_t blobBytes, nPointers;
};

struct WirePointer {
  uint32_t offset, pad;
  WireRef ref;
};

inline void put(std::vector<unsigned char>* out, const void* p, size_t n) {
  const size_t at = out->size();
  out->resize(at + n);
  std::memcpy(out->data() + at, p, n);
}
template <typename T>
inline void put(std::vector<unsigned char>* out, const T& v) {
  put(out, &v, sizeof(v));
}

class Reader {
 public:
  explicit Reader(const std::vector<unsigned char>& b) : b_(b) {}
  template <typename T>
  bool get(T* v) {
    return bytes(v, sizeof(T));
  }
  bool bytes(void* p, size_t n) {
    if (n > b_.size() - at_) return false;
    std::memcpy(p, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  bool done() const { return at_ == b_.size(); }

 private:
  const std::vector<unsigned char>& b_;
  size_t at_ = 0;
};

}  // namespace braid::api::served_wire
