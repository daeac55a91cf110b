// BRAID_BACKEND=auto for the calls braid lacks (unimplemented.cc): the real NCCL serves them
// on the braid communicator's real communicator (fallback/real_comm.h), made by the first
// call that needs it. Under BRAID_BACKEND=braid they fail as braid's own.
//
//   BRAID_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const Reqs* reqs, DevComm* out) {
//     BRAID_FORWARD(ncclDevCommCreate, comm, reqs, out);
//     BRAID_FALLBACK_COMM(ncclDevCommCreate, ncclInvalidUsage, comm, reqs, out);
//     return unsupported("ncclDevCommCreate");
//
// Groups: a real call made inside a braid group joins a real group (pncclGroupStart), opened
// on the thread's first such call and closed (pncclGroupEnd) at the braid group's outermost
// ncclGroupEnd, after braid's own half of the group has been issued.
#pragma once
#include <string>
#include <type_traits>

#include "core/comm.h"
#include "core/log.h"
#include "fallback/backend.h"
#include "fallback/real_comm.h"

namespace braid::api {

// The comm's real communicator, made now when it has none: collective, so every rank's first
// call that needs it must come (from its own thread, or outside a group). `caller` names the
// call in errors and in the one INFO line per communicator.
ncclResult_t realCommOf(ncclComm* comm, const char* caller, fallback::RealComm** out);

// Inside a braid group: opens this thread's real group on its first real call.
ncclResult_t joinRealGroup(const fallback::RealNccl& lib);
// At the braid group's outermost end, after braid's half: closes the real group, if opened.
ncclResult_t closeRealGroup();

// The braid communicator's lifecycle, applied to its real communicator (if it has one).
ncclResult_t finalizeRealComm(ncclComm* comm);
ncclResult_t closeRealComm(ncclComm* comm, bool abort);
// The real communicator's async error (ncclSuccess when it has none).
ncclResult_t realAsyncError(ncclComm* comm);

// Logs, once per function, which library serves it and why.
void noteRoute(const char* pname, fallback::Route route);

template <typename Fn>
class Fallback;

template <typename Ret, typename... Args>
class Fallback<Ret (*)(Args...)> {
 public:
  explicit Fallback(const char* pname) : pname_(pname) {
    route_ = fallback::routeFor(fallback::backend(), /*braidImplements=*/false);
    if (route_ == fallback::Route::Real)
      target_ = reinterpret_cast<Ret (*)(Args...)>(fallback::fallbackSymbol(pname, &refusal_, &message_));
    noteRoute(pname, route_);
  }
  // True when the real NCCL serves the call (or would, but cannot: the call then fails here).
  bool active() const { return route_ == fallback::Route::Real; }

  // Functions without a communicator: the real NCCL's, arguments unchanged.
  template <typename... A>
  Ret plain(Ret onFailure, A... args) const {
    if (target_ == nullptr) return failWith(onFailure);
    return check(target_(args...));
  }
  // Functions whose first argument is the communicator: the real handle instead of braid's.
  template <typename... A>
  Ret withComm(Ret onFailure, ncclComm_t comm, A... rest) const {
    if (target_ == nullptr) return failWith(onFailure);
    const char* caller = pname_ + 1;
    braid::CommUse use(comm, caller);
    if (use.result() != ncclSuccess) return resultOr(use.result(), onFailure);
    fallback::RealComm* real = nullptr;
    ncclResult_t rc = realCommOf(comm, caller, &real);
    if (rc == ncclSuccess) rc = joinRealGroup(real->lib());
    if (rc != ncclSuccess) return resultOr(rc, onFailure);
    Ret result = target_(real->handle(), rest...);
    if constexpr (std::is_same_v<Ret, ncclResult_t>) {
      if (result != ncclSuccess && result != ncclInProgress)
        return fail(result, "%s (rank %d): in %s returned %d: %s", caller, comm->rank, fallback::describe(real->lib()).c_str(),
                    static_cast<int>(result), real->lastError().c_str());
    }
    return result;
  }

 private:
  Ret failWith(Ret onFailure) const { return resultOr(fail(refusal_, "%s", message_.c_str()), onFailure); }
  static Ret resultOr(ncclResult_t rc, Ret onFailure) {
    if constexpr (std::is_same_v<Ret, ncclResult_t>) return rc;
    (void)rc;
    return onFailure;
  }
  Ret check(Ret result) const {
    if constexpr (std::is_same_v<Ret, ncclResult_t>) {
      const fallback::RealNccl* lib = fallback::realNccl();  // loaded: target_ is its symbol
      if (result != ncclSuccess && result != ncclInProgress && lib != nullptr)
        return fail(result, "%s: in %s returned %d: %s", pname_ + 1, fallback::describe(*lib).c_str(),
                    static_cast<int>(result), fallback::realLastError(*lib, nullptr).c_str());
    }
    return result;
  }

  const char* pname_;
  fallback::Route route_ = fallback::Route::Braid;
  ncclResult_t refusal_ = ncclSuccess;
  std::string message_;
  Ret (*target_)(Args...) = nullptr;
};

}  // namespace braid::api

#define BRAID_FALLBACK_COMM(name, onFailure, comm, ...)                                         \
  do {                                                                                          \
    static const ::braid::api::Fallback<decltype(&p##name)> braidFallback_("p" #name);          \
    if (braidFallback_.active()) return braidFallback_.withComm(onFailure, comm, ##__VA_ARGS__); \
  } while (0)

#define BRAID_FALLBACK_PLAIN(name, onFailure, ...)                                       \
  do {                                                                                   \
    static const ::braid::api::Fallback<decltype(&p##name)> braidFallback_("p" #name);   \
    if (braidFallback_.active()) return braidFallback_.plain(onFailure, __VA_ARGS__);    \
  } while (0)
