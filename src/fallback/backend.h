// Which library serves the NCCL calls of this process: BRAID_BACKEND=auto (default) | braid |
// nccl, read once. `nccl`: every call goes to the real NCCL (real_nccl.h), whose handles the
// user then holds; braid only forwards (an A/B switch for one binary). `braid`: braid alone.
// `auto`: braid serves what it implements and the real NCCL the calls braid lacks (the device
// API of src/api/unimplemented.cc), on a real communicator that each braid communicator makes
// when such a call first needs it (real_comm.h).
#pragma once
#include <string>

#include "nccl.h"

namespace braid::fallback {

enum class Backend { Auto, Braid, Nccl, Invalid };

// Parses BRAID_BACKEND's value (case-insensitive); Invalid for anything else.
Backend parseBackend(const char* text);
Backend backend();  // the process's, read once

// Who serves a call: braid; the real NCCL (auto, for a call braid lacks); or nobody (braid
// lacks it under BRAID_BACKEND=braid: it fails as braid's own; or BRAID_BACKEND is malformed).
// BRAID_BACKEND=nccl forwards every call before this is asked (passThrough). Pure.
enum class Route { Braid, Real, BraidRefuses, Invalid };
Route routeFor(Backend backend, bool braidImplements);
// Why, in words, for the one INFO line per decision.
const char* routeReason(Backend backend, bool braidImplements);

// For BRAID_BACKEND=auto and a call braid lacks: the real NCCL's definition of `pname`, or
// nullptr with *refusal and *message saying which files were tried and why each failed (and
// that BRAID_BACKEND=braid silences the attempt), or that the real NCCL lacks the function.
void* fallbackSymbol(const char* pname, ncclResult_t* refusal, std::string* message);

// For BRAID_BACKEND=nccl: the real NCCL's definition of the profiling name `pname`
// ("pncclAllReduce"). Otherwise nullptr with *refusal = ncclSuccess (braid serves the call), or
// nullptr with a refusal and *message saying why the call cannot be served: BRAID_BACKEND is
// malformed (ncclInvalidUsage), or it is `nccl` and no real NCCL loads (ncclSystemError), or the
// real NCCL lacks the function (ncclInvalidUsage).
void* passThrough(const char* pname, ncclResult_t* refusal, std::string* message);

// A forwarded call failed in the real NCCL: a WARN naming the function, the library's path,
// the result and the real NCCL's last error (so that a log says which library failed).
void noteForwardedFailure(const char* pname, ncclResult_t result);

}  // namespace braid::fallback
