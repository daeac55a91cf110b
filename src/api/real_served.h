// BRAID_BACKEND=auto for a communicator braid cannot connect (ranks on other hosts, and some
// rank without a usable UCX): the ranks decide it together at init, the real NCCL makes the
// communicator then (fallback/real_comm.h, its id over braid's bootstrap), and from then on
// every call on it goes to that real communicator, as BRAID_BACKEND=nccl forwards, but for this
// communicator alone: the user's handle stays braid's, braid's other communicators stay braid's.
//
//   BRAID_API(ncclResult_t, ncclAllReduce, const void* s, void* r, ..., ncclComm_t comm, cudaStream_t st) {
//     BRAID_FORWARD(ncclAllReduce, s, r, ..., comm, st);
//     BRAID_REAL_SERVES(ncclAllReduce, comm, s, r, ..., comm, st);  // the arguments, in order
//
// BRAID_REAL_SERVES: inside a braid group the call joins the thread's real group (closed after
// braid's half, fallback_route.h), as NCCL's group semantics need for collectives and send/recv.
// BRAID_REAL_SERVES_NOW: at once, never in a group (queries, errors, registration).
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>

#include "api/fallback_route.h"
#include "core/comm.h"
#include "core/log.h"
#include "fallback/real_comm.h"

namespace braid::api {

// Init's links to ranks on other hosts, collective: UCX connects them (comm->net); or, under
// auto when some rank cannot serve its links, the real NCCL serves the communicator
// (comm->real, comm->servedByReal; one INFO line says why); or init fails, naming the rank, its
// host and why (under auto also why the real NCCL could not take it).
ncclResult_t connectOtherHosts(ncclComm* comm);

// False until a communicator of this process is served by the real NCCL: until then the
// routing costs one relaxed load per call.
bool anyRealServed();
// False when `comm` is certainly not one of them (a scan of their addresses, no lock, `comm`
// not read): braid's own communicators stop here.
bool mayBeRealServed(const ncclComm* comm);
// The real communicator of `comm` when it is a live communicator that the real NCCL serves,
// else null (without touching the last error).
std::shared_ptr<fallback::RealComm> realServing(ncclComm* comm);
// A communicator the real NCCL served is closed (its real one already destroyed or aborted).
void forgetRealServed(ncclComm* comm);

// Split and shrink of a real-served communicator: `call` makes the real child from the real
// parent (blocking, at once: never inside the real group), which is then wrapped in a new braid
// communicator that the real NCCL serves too. NCCL_SPLIT_NOCOLOR: no child, *newcomm = NULL.
using RealChildCall = std::function<ncclResult_t(const fallback::RealComm& parent, ncclConfig_t* config,
                                                 ncclComm_t* realChild)>;
ncclResult_t deriveReal(ncclComm* parent, const char* caller, ncclConfig_t* userConfig, const RealChildCall& call,
                        ncclComm_t* newcomm);

// The real NCCL's failure of `caller` on a real-served communicator, as braid's last error
// (rank, library, result and the real NCCL's own last error). Returns rc.
ncclResult_t noteRealFailure(const char* caller, const ncclComm* comm, const fallback::RealComm& real, ncclResult_t rc);

template <typename Fn>
class RealRoute;

template <typename Ret, typename... Args>
class RealRoute<Ret (*)(Args...)> {
 public:
  RealRoute(const char* pname, bool joinsGroup) : pname_(pname), joinsGroup_(joinsGroup) {}

  // The real NCCL's answer when the real NCCL serves `comm`; nothing when braid does (or the
  // handle is not live: braid's own path then reports it). `args` are the call's own, in
  // order: each that is `comm` is replaced by the real handle.
  std::optional<Ret> serve(ncclComm* comm, Args... args) const {
    if (!mayBeRealServed(comm) || !isLiveComm(comm)) return std::nullopt;
    CommUse use(comm, pname_ + 1);  // holds it for the call; destroy waits for it
    if (use.result() != ncclSuccess || !comm->servedByReal.load(std::memory_order_acquire)) return std::nullopt;
    std::shared_ptr<fallback::RealComm> real;
    {
      std::lock_guard<std::mutex> lock(comm->realMutex);
      real = comm->real;
    }
    if (!real) return std::nullopt;  // closed meanwhile: braid's path reports it
    Ret (*target)(Args...) = symbol(*real);
    if (target == nullptr)
      return failed(fail(ncclInvalidUsage, "%s (rank %d): the real NCCL serves this communicator (braid cannot connect "
                         "its ranks), but %s has no %s. Fix: a real NCCL of 2.28 or newer (BRAID_NCCL_LIBRARY)",
                         pname_ + 1, comm->rank, fallback::describe(real->lib()).c_str(), pname_));
    if (joinsGroup_) {
      ncclResult_t rc = joinRealGroup(real->lib());
      if (rc != ncclSuccess) return failed(rc);
    }
    Ret result = target(swapComm(args, comm, real->handle())...);
    if constexpr (std::is_same_v<Ret, ncclResult_t>) {
      if (result != ncclSuccess && result != ncclInProgress) return noteRealFailure(pname_ + 1, comm, *real, result);
    }
    return result;
  }

 private:
  template <typename T>
  static T swapComm(T arg, ncclComm* from, ncclComm_t to) {
    if constexpr (std::is_same_v<std::remove_cv_t<T>, ncclComm_t>) return arg == from ? to : arg;
    else return arg;
  }
  static std::optional<Ret> failed(ncclResult_t rc) {
    (void)rc;  // the last error says why
    if constexpr (std::is_same_v<Ret, ncclResult_t>) return rc;
    else if constexpr (std::is_same_v<Ret, const char*>) return "";
    else return Ret{};
  }
  // One real NCCL per process (fallback/real_nccl.h): its symbol is looked up once.
  Ret (*symbol(const fallback::RealComm& real) const)(Args...) {
    void* fn = target_.load(std::memory_order_acquire);
    if (fn == nullptr) {
      fn = real.lib().symbol(pname_);
      target_.store(fn, std::memory_order_release);
    }
    return reinterpret_cast<Ret (*)(Args...)>(fn);
  }

  const char* pname_;
  bool joinsGroup_;
  mutable std::atomic<void*> target_{nullptr};
};

}  // namespace braid::api

#define BRAID_REAL_ROUTE_(name, joins, comm, ...)                                                     \
  do {                                                                                               \
    if (::braid::api::anyRealServed()) {                                                             \
      static const ::braid::api::RealRoute<decltype(&p##name)> braidRealRoute_("p" #name, joins);    \
      if (auto braidReal_ = braidRealRoute_.serve(comm, __VA_ARGS__)) return *braidReal_;            \
    }                                                                                                \
  } while (0)

#define BRAID_REAL_SERVES(name, comm, ...) BRAID_REAL_ROUTE_(name, true, comm, __VA_ARGS__)
#define BRAID_REAL_SERVES_NOW(name, comm, ...) BRAID_REAL_ROUTE_(name, false, comm, __VA_ARGS__)
