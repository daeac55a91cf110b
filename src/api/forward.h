// The first statement of every exported function: under BRAID_BACKEND=nccl the call goes to
// the real NCCL's definition of the same name, arguments unchanged (the user's handles are
// then the real NCCL's; braid never sees them). So does a call that carries the handle of a
// real communicator braid made (the real NCCL calling its own exported names, bound to braid's
// when the program loaded it first: fallback/real_handles.h). Otherwise it costs one test of a
// static and, while no real communicator exists, one load.
//
//   BRAID_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
//     BRAID_FORWARD(ncclCommCount, comm, count);
//     ...
#pragma once
#include <atomic>
#include <mutex>
#include <string>
#include <type_traits>

#include "core/log.h"
#include "fallback/backend.h"
#include "fallback/real_handles.h"
#include "fallback/real_nccl.h"

namespace braid::api {

template <typename Fn>
class Forward;

template <typename Ret, typename... Args>
class Forward<Ret (*)(Args...)> {
 public:
  explicit Forward(const char* pname)
      : pname_(pname), target_(reinterpret_cast<Ret (*)(Args...)>(fallback::passThrough(pname, &refusal_, &message_))) {}
  // True when the call must not reach braid: forwarded, or refused (ncclResult_t functions;
  // the others, such as ncclGetErrorString, are then braid's own).
  bool active() const {
    if constexpr (std::is_same_v<Ret, ncclResult_t>) return target_ != nullptr || refusal_ != ncclSuccess;
    return target_ != nullptr;
  }
  Ret operator()(Args... args) const {
    if constexpr (std::is_same_v<Ret, ncclResult_t>) {
      if (target_ == nullptr) return fail(refusal_, "%s", message_.c_str());
      const ncclResult_t result = target_(args...);
      // ncclInProgress is a non-blocking communicator's normal answer, not a failure.
      if (result != ncclSuccess && result != ncclInProgress) fallback::noteForwardedFailure(pname_, result);
      return result;
    }
    return target_(args...);
  }

  // True when an argument is a live real communicator's handle. By value: a reference would
  // take the caller's parameters' addresses, and its later reads of them become loads, which
  // UBSan checks (ncclGetErrorString(99) is a valid call with an out-of-range enum).
  bool carriesRealHandle(Args... args) const { return (isRealComm(args) || ...); }
  // The real NCCL's own definition, for a call that carriesRealHandle.
  Ret backToReal(Args... args) const {
    auto target = reinterpret_cast<Ret (*)(Args...)>(real_.load(std::memory_order_acquire));
    if (target == nullptr) {
      const fallback::RealNccl* lib = fallback::realNccl();  // loaded: it made the handle
      target = reinterpret_cast<Ret (*)(Args...)>(lib ? lib->symbol(pname_) : nullptr);
      if (target == nullptr) {
        if constexpr (std::is_same_v<Ret, ncclResult_t>)
          return fail(ncclInternalError, "%s: got a real NCCL communicator's handle, and the real NCCL has no %s",
                      pname_ + 1, pname_);
        return Ret{};
      }
      real_.store(reinterpret_cast<void*>(target), std::memory_order_release);
      static std::once_flag logged;
      std::call_once(logged, [&] {
        BRAID_INFO(kInit, "%s: the real NCCL (%s) calls its own exported names through braid's (the program loaded it "
                   "before braid, without RTLD_DEEPBIND); calls with its communicators go back to it",
                   pname_ + 1, lib->path.c_str());
      });
    }
    return target(args...);
  }

 private:
  static bool isRealComm(ncclComm_t comm) { return fallback::isRealHandle(comm); }
  template <typename T>
  static bool isRealComm(const T&) {
    return false;
  }
  const char* pname_;
  ncclResult_t refusal_ = ncclSuccess;
  std::string message_;
  Ret (*target_)(Args...);
  mutable std::atomic<void*> real_{nullptr};  // backToReal's target, found on first need
};

}  // namespace braid::api

#define BRAID_FORWARD(name, ...)                                                         \
  do {                                                                                   \
    static const ::braid::api::Forward<decltype(&p##name)> braidForward_("p" #name);     \
    if (braidForward_.active()) return braidForward_(__VA_ARGS__);                       \
    if (::braid::fallback::anyRealHandles() && braidForward_.carriesRealHandle(__VA_ARGS__)) \
      return braidForward_.backToReal(__VA_ARGS__);                                      \
  } while (0)
