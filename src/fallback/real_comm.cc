#include "fallback/real_comm.h"

#include <cstring>
#include <map>
#include <utility>

#include "core/comm.h"
#include "core/log.h"
#include "fallback/real_handles.h"

namespace braid::fallback {
namespace {

using GetUniqueIdFn = ncclResult_t (*)(ncclUniqueId*);
using InitRankConfigFn = ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
using CommFn = ncclResult_t (*)(ncclComm_t);
using AsyncErrorFn = ncclResult_t (*)(ncclComm_t, ncclResult_t*);
using LastErrorFn = const char* (*)(ncclComm_t);

// What each rank says in the agreement steps: its result, and (rank 0) the real unique id.
struct Vote {
  int32_t result = ncclSuccess;
  int32_t pad = 0;
  ncclUniqueId id{};
};

// Every rank's vote; the first failing rank (or -1) in *firstBad.
ncclResult_t agree(ncclComm* comm, const Vote& mine, std::vector<Vote>* all, int* firstBad, const char* caller,
                   const char* step) {
  all->assign(comm->nRanks, Vote{});
  (*all)[comm->rank] = mine;
  ncclResult_t rc = comm->bootstrap->allGather(all->data(), sizeof(Vote));
  if (rc != ncclSuccess)
    return fail(rc, "%s (rank %d): making the real NCCL communicator: braid's bootstrap exchange (%s) failed: %s",
                caller, comm->rank, step, braid::lastError());
  *firstBad = -1;
  for (int r = 0; r < comm->nRanks; ++r)
    if ((*all)[r].result != ncclSuccess) {
      *firstBad = r;
      break;
    }
  return ncclSuccess;
}

}  // namespace

std::string describe(const RealNccl& lib) { return "the real NCCL " + versionText(lib.version) + " (" + lib.path + ")"; }

std::string realLastError(const RealNccl& lib, ncclComm_t comm) {
  auto lastError = reinterpret_cast<LastErrorFn>(lib.symbol("pncclGetLastError"));
  const char* text = lastError ? lastError(comm) : nullptr;
  return text ? text : "";
}

std::string realCommRefusal(const std::vector<PeerInfo>& peers) {
  int hostOnly = 0;
  std::map<std::pair<uint64_t, int>, int> firstOnGpu;  // (host, device) -> first rank there
  for (const PeerInfo& p : peers) {
    if (p.cudaDev < 0) {
      ++hostOnly;
      continue;
    }
    auto [it, fresh] = firstOnGpu.emplace(std::make_pair(p.hostHash, p.cudaDev), p.rank);
    if (!fresh)
      return "ranks " + std::to_string(it->second) + " and " + std::to_string(p.rank) + " share CUDA device " +
             std::to_string(p.cudaDev) + " of one host, and the real NCCL allows one rank per GPU (its \"Duplicate "
             "GPU\" error). Fix: one rank per GPU for the calls braid lacks, or BRAID_BACKEND=braid";
  }
  if (hostOnly > 0 && hostOnly < static_cast<int>(peers.size()))
    return std::to_string(hostOnly) + " of its " + std::to_string(peers.size()) +
           " ranks have no GPU and the others do; the real NCCL needs a GPU on every rank";
  return "";
}

bool sharesProcess(const std::vector<PeerInfo>& peers, int self) {
  for (const PeerInfo& p : peers)
    if (p.rank != self && p.processHash == peers[self].processHash) return true;
  return false;
}

ncclResult_t RealComm::create(ncclComm* comm, const char* caller, std::shared_ptr<RealComm>* out) {
  const int rank = comm->rank;
  // 1. Can every rank take part? The library loads, and the rule allows this communicator.
  std::string report;
  const RealNccl* lib = realNccl(&report);
  std::string refusal = realCommRefusal(comm->peers);
  Vote mine;
  if (lib == nullptr) mine.result = ncclSystemError;
  else if (!refusal.empty()) mine.result = ncclInvalidUsage;
  std::vector<Vote> votes;
  int bad = -1;
  BRAID_CHECK(agree(comm, mine, &votes, &bad, caller, "who can load the real NCCL"));
  if (lib == nullptr)
    return fail(ncclSystemError, "%s (rank %d): braid cannot serve it and BRAID_BACKEND=auto sends it to the "
                "real NCCL, but %s; or BRAID_BACKEND=braid, which silences the attempt", caller, rank, report.c_str());
  if (!refusal.empty())
    return fail(ncclInvalidUsage, "%s (rank %d): this communicator cannot have a real NCCL communicator: %s", caller,
                rank, refusal.c_str());
  if (bad >= 0)
    return fail(static_cast<ncclResult_t>(votes[bad].result), "%s (rank %d): rank %d cannot load the real NCCL (its "
                "log says why); no rank makes a real communicator", caller, rank, bad);

  // 2. Rank 0's real unique id, to every rank over braid's bootstrap.
  mine = Vote{};
  if (rank == 0) {
    auto getId = reinterpret_cast<GetUniqueIdFn>(lib->symbol("pncclGetUniqueId"));
    mine.result = getId ? getId(&mine.id) : ncclInvalidUsage;
    if (mine.result != ncclSuccess)
      BRAID_WARN("%s (rank 0): pncclGetUniqueId in %s returned %d: %s", caller, describe(*lib).c_str(), mine.result,
                 realLastError(*lib, nullptr).c_str());
  }
  BRAID_CHECK(agree(comm, mine, &votes, &bad, caller, "the real unique id"));
  if (bad >= 0)
    return fail(static_cast<ncclResult_t>(votes[0].result), "%s (rank %d): rank 0's pncclGetUniqueId in %s failed "
                "(%d; rank 0's log says why)", caller, rank, describe(*lib).c_str(), votes[0].result);
  const ncclUniqueId id = votes[0].id;

  // 3. Every rank's init, then the outcome agreed (a lone success is destroyed again).
  auto initRank = reinterpret_cast<InitRankConfigFn>(lib->symbol("pncclCommInitRankConfig"));
  if (initRank == nullptr)
    return fail(ncclInvalidUsage, "%s (rank %d): %s has no pncclCommInitRankConfig", caller, rank, describe(*lib).c_str());
  ncclConfig_t config = comm->config;
  config.blocking = 1;     // made inside a braid call that waits for it
  config.splitShare = 0;   // nothing of a parent to share: children make their own
  ncclComm_t handle = nullptr;
  ncclResult_t rc = initRank(&handle, comm->nRanks, id, rank, &config);
  std::string why = rc == ncclSuccess ? "" : realLastError(*lib, nullptr);
  mine = Vote{};
  mine.result = rc;
  ncclResult_t agreed = agree(comm, mine, &votes, &bad, caller, "the real init's outcome");
  if (agreed != ncclSuccess || bad >= 0) {
    if (rc == ncclSuccess && handle) {
      auto destroyFn = reinterpret_cast<CommFn>(lib->symbol("pncclCommDestroy"));
      if (destroyFn) (void)destroyFn(handle);
    }
    if (agreed != ncclSuccess) return agreed;
    if (rc != ncclSuccess)
      return fail(rc, "%s (rank %d): pncclCommInitRankConfig (%d ranks) in %s returned %d: %s", caller, rank,
                  comm->nRanks, describe(*lib).c_str(), static_cast<int>(rc), why.empty() ? "(no last error)" : why.c_str());
    return fail(static_cast<ncclResult_t>(votes[bad].result), "%s (rank %d): rank %d's pncclCommInitRankConfig in %s "
                "failed (%d; its log says why); this rank's real communicator is destroyed again", caller, rank, bad,
                describe(*lib).c_str(), votes[bad].result);
  }
  BRAID_INFO(kInit, "%s (rank %d): made a real NCCL communicator of %d ranks with %s (id over braid's bootstrap)",
             caller, rank, comm->nRanks, describe(*lib).c_str());
  out->reset(new RealComm(lib, handle));
  return ncclSuccess;
}

std::shared_ptr<RealComm> RealComm::adopt(const RealNccl* lib, ncclComm_t handle) {
  return std::shared_ptr<RealComm>(new RealComm(lib, handle));
}

RealComm::RealComm(const RealNccl* lib, ncclComm_t handle) : lib_(lib), handle_(handle) { noteRealHandle(handle); }

RealComm::~RealComm() { (void)destroy(); }

ncclResult_t RealComm::finalize() {
  if (closed_) return ncclSuccess;
  auto finalizeFn = fn<CommFn>("pncclCommFinalize");
  return finalizeFn ? finalizeFn(handle_) : ncclSuccess;
}

ncclResult_t RealComm::destroy() {
  if (closed_.exchange(true)) return ncclSuccess;
  auto destroyFn = fn<CommFn>("pncclCommDestroy");
  const ncclResult_t rc = destroyFn ? destroyFn(handle_) : ncclSuccess;
  forgetRealHandle(handle_);  // after: the real destroy may ask braid's exports about it
  return rc;
}

ncclResult_t RealComm::abort() {
  if (closed_.exchange(true)) return ncclSuccess;
  auto abortFn = fn<CommFn>("pncclCommAbort");
  const ncclResult_t rc = abortFn ? abortFn(handle_) : ncclSuccess;
  forgetRealHandle(handle_);
  return rc;
}

ncclResult_t RealComm::asyncError(ncclResult_t* out) const {
  *out = ncclSuccess;
  if (closed_) return ncclSuccess;
  auto query = fn<AsyncErrorFn>("pncclCommGetAsyncError");
  return query ? query(handle_, out) : ncclSuccess;
}

std::string RealComm::lastError() const { return realLastError(*lib_, closed_ ? nullptr : handle_); }

}  // namespace braid::fallback
