// Logging in NCCL's format and the process-wide "last error" behind ncclGetLastError.
#pragma once
#include <cstdarg>
#include <cstdint>

#include "nccl.h"

namespace braid {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Abort = 4, Trace = 5 };

// Subsystem bits, the same values NCCL uses (NCCL_DEBUG_SUBSYS).
enum Subsys : uint64_t {
  kInit = 0x1, kColl = 0x2, kP2p = 0x4, kShm = 0x8, kNet = 0x10, kGraph = 0x20, kTuning = 0x40,
  kEnv = 0x80, kAlloc = 0x100, kCall = 0x200, kProxy = 0x400, kNvls = 0x800, kBootstrap = 0x1000,
  kReg = 0x2000, kProfile = 0x4000, kRas = 0x8000, kDestroy = 0x10000, kAllocHost = 0x20000,
  kAll = ~0ull,
};

// True when a message of this level and subsystem would be printed.
bool logEnabled(LogLevel level, uint64_t subsys);
// `host:pid:tid [dev] NCCL LEVEL message`, to NCCL_DEBUG_FILE or stdout.
void logMessage(LogLevel level, uint64_t subsys, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// A warning printed whatever NCCL_DEBUG says (to the log when WARN is on, else to stderr): for
// what a user must see, such as a hang report.
void logUrgent(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// The CUDA device of the calling thread's current rank, shown as [dev] in log lines (-1 = host).
void setLogDevice(int dev);

// Records `message` as the last error (ncclGetLastError) and prints it at NCCL_DEBUG=WARN.
// Returns `result` so that callers can `return fail(...)`.
ncclResult_t fail(ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
const char* lastError();
void clearLastError();

}  // namespace braid

#define BRAID_WARN(...) ::braid::logMessage(::braid::LogLevel::Warn, ::braid::kAll, __VA_ARGS__)
#define BRAID_INFO(subsys, ...)                                                     \
  do {                                                                              \
    if (::braid::logEnabled(::braid::LogLevel::Info, (subsys)))                     \
      ::braid::logMessage(::braid::LogLevel::Info, (subsys), __VA_ARGS__);          \
  } while (0)
#define BRAID_TRACE(subsys, ...)                                                    \
  do {                                                                              \
    if (::braid::logEnabled(::braid::LogLevel::Trace, (subsys)))                    \
      ::braid::logMessage(::braid::LogLevel::Trace, (subsys), __VA_ARGS__);         \
  } while (0)

// Propagates a non-success ncclResult_t.
#define BRAID_CHECK(call)                                  \
  do {                                                     \
    ncclResult_t braid_res_ = (call);                      \
    if (braid_res_ != ncclSuccess) return braid_res_;      \
  } while (0)
