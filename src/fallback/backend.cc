#include "fallback/backend.h"

#include <strings.h>

#include "core/env.h"
#include "core/log.h"
#include "fallback/real_nccl.h"

namespace braid::fallback {

Backend parseBackend(const char* text) {
  if (text == nullptr || *text == '\0' || ::strcasecmp(text, "auto") == 0) return Backend::Auto;
  if (::strcasecmp(text, "braid") == 0) return Backend::Braid;
  if (::strcasecmp(text, "nccl") == 0) return Backend::Nccl;
  return Backend::Invalid;
}

Backend backend() {
  static const Backend chosen = parseBackend(env::get("BRAID_BACKEND"));
  return chosen;
}

void* passThrough(const char* pname, ncclResult_t* refusal, std::string* message) {
  *refusal = ncclSuccess;
  switch (backend()) {
    case Backend::Auto:
    case Backend::Braid: return nullptr;
    case Backend::Invalid:
      *refusal = ncclInvalidUsage;
      *message = std::string("BRAID_BACKEND='") + env::getString("BRAID_BACKEND") +
                 "' is not one of auto, braid, nccl. Fix: unset it (auto) or set one of those";
      return nullptr;
    case Backend::Nccl: break;
  }
  std::string report;
  const RealNccl* lib = realNccl(&report);
  if (lib == nullptr) {
    *refusal = ncclSystemError;
    *message = "BRAID_BACKEND=nccl, but " + report;
    return nullptr;
  }
  static bool said = [&report] {
    BRAID_INFO(kInit, "BRAID_BACKEND=nccl: every call goes to %s", report.c_str());
    return true;
  }();
  (void)said;
  void* target = lib->symbol(pname);
  if (target == nullptr) {
    *refusal = ncclInvalidUsage;
    *message = std::string("BRAID_BACKEND=nccl, but ") + lib->path + " has no " + pname;
  }
  return target;
}

Route routeFor(Backend backend, bool braidImplements) {
  switch (backend) {
    case Backend::Invalid: return Route::Invalid;
    case Backend::Nccl: return Route::Real;  // forwarded at the door (passThrough)
    case Backend::Braid: return braidImplements ? Route::Braid : Route::BraidRefuses;
    case Backend::Auto: break;
  }
  return braidImplements ? Route::Braid : Route::Real;
}

const char* routeReason(Backend backend, bool braidImplements) {
  switch (routeFor(backend, braidImplements)) {
    case Route::Braid: return "braid implements it";
    case Route::Real:
      return backend == Backend::Nccl ? "BRAID_BACKEND=nccl forwards every call"
                                      : "braid does not implement it and BRAID_BACKEND=auto sends it to the real NCCL";
    case Route::BraidRefuses: return "braid does not implement it and BRAID_BACKEND=braid allows no fallback";
    case Route::Invalid: break;
  }
  return "BRAID_BACKEND is not one of auto, braid, nccl";
}

void* fallbackSymbol(const char* pname, ncclResult_t* refusal, std::string* message) {
  *refusal = ncclSuccess;
  std::string report;
  const RealNccl* lib = realNccl(&report);
  if (lib == nullptr) {
    *refusal = ncclSystemError;
    *message = std::string(pname + 1) + ": braid does not implement it and BRAID_BACKEND=auto sends it to the real "
               "NCCL, but " + report +
               "; or BRAID_BACKEND=braid, which silences the attempt (the call then fails as braid's own)";
    return nullptr;
  }
  void* target = lib->symbol(pname);
  if (target == nullptr) {
    *refusal = ncclInvalidUsage;
    *message = std::string(pname + 1) + ": braid does not implement it, and the real NCCL (" + lib->path + ", " +
               versionText(lib->version) + ") has no " + pname;
  }
  return target;
}

void noteForwardedFailure(const char* pname, ncclResult_t result) {
  const RealNccl* lib = realNccl();
  if (lib == nullptr) return;
  using LastError = const char* (*)(ncclComm_t);
  auto lastError = reinterpret_cast<LastError>(lib->symbol("pncclGetLastError"));
  const char* text = lastError ? lastError(nullptr) : nullptr;
  BRAID_WARN("BRAID_BACKEND=nccl: %s in the real NCCL (%s) returned %d%s%s", pname + 1, lib->path.c_str(),
             static_cast<int>(result), text && *text ? ": " : "", text ? text : "");
}

}  // namespace braid::fallback
