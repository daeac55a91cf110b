// The first statement of every exported function: under BRAID_BACKEND=nccl the call goes to
// the real NCCL's definition of the same name, arguments unchanged (the user's handles are
// then the real NCCL's; braid never sees them). Otherwise it costs one test of a static.
//
//   BRAID_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
//     BRAID_FORWARD(ncclCommCount, comm, count);
//     ...
#pragma once
#include <string>
#include <type_traits>

#include "core/log.h"
#include "fallback/backend.h"

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

 private:
  const char* pname_;
  ncclResult_t refusal_ = ncclSuccess;
  std::string message_;
  Ret (*target_)(Args...);
};

}  // namespace braid::api

#define BRAID_FORWARD(name, ...)                                                         \
  do {                                                                                   \
    static const ::braid::api::Forward<decltype(&p##name)> braidForward_("p" #name);     \
    if (braidForward_.active()) return braidForward_(__VA_ARGS__);                       \
  } while (0)
