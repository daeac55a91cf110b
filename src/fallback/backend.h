// Which library serves the NCCL calls of this process: BRAID_BACKEND=auto (default) | braid |
// nccl, read once. `nccl`: every call goes to the real NCCL (real_nccl.h), whose handles the
// user then holds; braid only forwards (an A/B switch for one binary). `braid`: braid alone.
// `auto`: braid serves what it implements (fallback of the rest to the real NCCL: not yet).
#pragma once
#include <string>

#include "nccl.h"

namespace braid::fallback {

enum class Backend { Auto, Braid, Nccl, Invalid };

// Parses BRAID_BACKEND's value (case-insensitive); Invalid for anything else.
Backend parseBackend(const char* text);
Backend backend();  // the process's, read once

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
