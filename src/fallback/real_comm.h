// A real NCCL communicator held by a braid communicator (issue 14 item 2): made lazily, on the
// first call that needs it, and collectively over the braid communicator's own bootstrap, so
// that the user calls braid's ncclGetUniqueId once and never sees the real NCCL's id.
//
// NCCL allows one rank per GPU ("Duplicate GPU"): a communicator with two ranks on one GPU of
// one host cannot have a real communicator (realCommRefusal says so). Host-only communicators
// (no rank has a GPU) are handed to the real NCCL as they are, and the real NCCL's own error
// comes back on every rank at once; a mix of host-only and GPU ranks is refused.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/peer_info.h"
#include "fallback/real_nccl.h"
#include "nccl.h"

struct ncclComm;

namespace braid::fallback {

// Why a communicator of these ranks (PeerInfo in rank order) cannot have a real NCCL
// communicator, or "" when it can. Pure: the same answer on every rank.
std::string realCommRefusal(const std::vector<PeerInfo>& peers);

// True when another rank of `peers` than `self` lives in this process (its creation would
// then need the ranks' threads to meet, which one thread in a group cannot do).
bool sharesProcess(const std::vector<PeerInfo>& peers, int self);

class RealComm {
 public:
  // Collective over comm's bootstrap: every rank checks it can load the real NCCL and the
  // refusal rule, rank 0 calls pncclGetUniqueId, the id goes to every rank, every rank calls
  // pncclCommInitRankConfig (with the braid communicator's config, made blocking) on the
  // calling thread's current device, and the ranks agree on the outcome (a rank that
  // succeeded while another failed destroys its own). `caller` names the call in errors.
  static ncclResult_t create(ncclComm* comm, const char* caller, std::shared_ptr<RealComm>* out);

  // Takes over a real communicator the real NCCL made itself (a split or shrink of a real one).
  static std::shared_ptr<RealComm> adopt(const RealNccl* lib, ncclComm_t handle);

  ~RealComm();  // destroys the real communicator unless finalize/destroy/abort already did
  RealComm(const RealComm&) = delete;
  RealComm& operator=(const RealComm&) = delete;

  ncclComm_t handle() const { return handle_; }
  const RealNccl& lib() const { return *lib_; }
  // The real NCCL's definition of `pname`, typed (nullptr when it has none).
  template <typename Fn>
  Fn fn(const char* pname) const { return reinterpret_cast<Fn>(lib_->symbol(pname)); }

  ncclResult_t finalize();
  ncclResult_t destroy();  // also after finalize
  ncclResult_t abort();  // also while another thread is inside a call on it (that call then returns)
  ncclResult_t asyncError(ncclResult_t* out) const;
  // The real NCCL's last error for this communicator ("" when none).
  std::string lastError() const;

 private:
  RealComm(const RealNccl* lib, ncclComm_t handle);  // notes the handle (real_handles.h)
  const RealNccl* lib_;
  ncclComm_t handle_;
  std::atomic<bool> closed_{false};  // abort may come from another thread than the calls
};

// "the real NCCL 2.28.9 (/path/libnccl.so.2)", for messages.
std::string describe(const RealNccl& lib);

// The real NCCL's last error (the process's, or comm's when not null), "" when none.
std::string realLastError(const RealNccl& lib, ncclComm_t comm);

}  // namespace braid::fallback
