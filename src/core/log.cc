#include "core/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <strings.h>

#include "braid/version.h"
#include "core/env.h"

namespace braid {
namespace {

struct LogConfig {
  LogLevel level = LogLevel::None;
  uint64_t subsys = kInit | kBootstrap | kEnv;
  FILE* file = stdout;
  char host[64] = "";
};

uint64_t parseSubsys(const char* s) {
  static const struct { const char* name; uint64_t bit; } kNames[] = {
      {"INIT", kInit}, {"COLL", kColl}, {"P2P", kP2p}, {"SHM", kShm}, {"NET", kNet},
      {"GRAPH", kGraph}, {"TUNING", kTuning}, {"ENV", kEnv}, {"ALLOC", kAlloc}, {"CALL", kCall},
      {"PROXY", kProxy}, {"NVLS", kNvls}, {"BOOTSTRAP", kBootstrap}, {"REG", kReg},
      {"PROFILE", kProfile}, {"RAS", kRas}, {"DESTROY", kDestroy}, {"ALLOC_HOST", kAllocHost},
      {"ALL", kAll}};
  bool invert = *s == '^';
  if (invert) ++s;
  uint64_t mask = 0;
  std::string list(s);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (auto& n : kNames)
      if (strcasecmp(n.name, tok.c_str()) == 0) mask |= n.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

// NCCL_DEBUG_FILE: %h is the host name, %p the pid.
FILE* openDebugFile(const char* pattern, const char* host) {
  std::string path;
  for (const char* c = pattern; *c; ++c) {
    if (c[0] == '%' && c[1] == 'h') { path += host; ++c; }
    else if (c[0] == '%' && c[1] == 'p') { path += std::to_string(getpid()); ++c; }
    else path += *c;
  }
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "%s:%d braid: cannot open NCCL_DEBUG_FILE '%s': %s; logging to stdout\n", host,
                 getpid(), path.c_str(), std::strerror(errno));
    return stdout;
  }
  setvbuf(f, nullptr, _IOLBF, 0);
  return f;
}

LogConfig& config() {
  static LogConfig cfg = [] {
    LogConfig c;
    if (gethostname(c.host, sizeof(c.host) - 1) != 0) std::strcpy(c.host, "unknown");
    if (char* dot = std::strchr(c.host, '.')) *dot = 0;
    if (const char* lvl = env::get("NCCL_DEBUG")) {
      if (!strcasecmp(lvl, "VERSION")) c.level = LogLevel::Version;
      else if (!strcasecmp(lvl, "WARN")) c.level = LogLevel::Warn;
      else if (!strcasecmp(lvl, "INFO")) c.level = LogLevel::Info;
      else if (!strcasecmp(lvl, "ABORT")) c.level = LogLevel::Abort;
      else if (!strcasecmp(lvl, "TRACE")) c.level = LogLevel::Trace;
    }
    if (const char* s = env::get("NCCL_DEBUG_SUBSYS")) c.subsys = parseSubsys(s);
    if (c.level != LogLevel::None)
      if (const char* f = env::get("NCCL_DEBUG_FILE")) c.file = openDebugFile(f, c.host);
    if (c.level >= LogLevel::Version)
      std::fprintf(c.file, "%s:%d:%ld [-1] NCCL INFO braid %s (NCCL API 2.28.9 compatible)\n", c.host,
                   getpid(), syscall(SYS_gettid), BRAID_VERSION_STRING);
    return c;
  }();
  return cfg;
}

thread_local int tlsDevice = -1;
std::mutex gErrorMutex;
std::string gLastError;

const char* levelName(LogLevel l) {
  switch (l) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Trace: return "TRACE";
    default: return "INFO";
  }
}

void vlog(LogLevel level, const char* fmt, va_list ap) {
  LogConfig& c = config();
  char msg[4096];
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  std::fprintf(c.file, "%s:%d:%ld [%d] NCCL %s %s\n", c.host, getpid(), syscall(SYS_gettid), tlsDevice,
               levelName(level), msg);
  std::fflush(c.file);
}

}  // namespace

bool logEnabled(LogLevel level, uint64_t subsys) {
  const LogConfig& c = config();
  if (c.level < level) return false;
  return level == LogLevel::Warn || (c.subsys & subsys) != 0;
}

void logMessage(LogLevel level, uint64_t subsys, const char* fmt, ...) {
  if (!logEnabled(level, subsys)) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

void logUrgent(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (logEnabled(LogLevel::Warn, kAll)) {
    vlog(LogLevel::Warn, fmt, ap);
  } else {
    char msg[4096];
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    std::fprintf(stderr, "%s:%d:%ld [%d] NCCL WARN %s\n", config().host, getpid(), syscall(SYS_gettid), tlsDevice, msg);
  }
  va_end(ap);
}

void setLogDevice(int dev) { tlsDevice = dev; }

ncclResult_t fail(ncclResult_t result, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  {
    std::lock_guard<std::mutex> lock(gErrorMutex);
    gLastError = msg;
  }
  if (logEnabled(LogLevel::Warn, kAll)) logMessage(LogLevel::Warn, kAll, "%s", msg);
  return result;
}

const char* lastError() {
  // The string must outlive the call; a thread-local copy keeps it stable for the caller.
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(gErrorMutex);
  copy = gLastError;
  return copy.c_str();
}

void clearLastError() {
  std::lock_guard<std::mutex> lock(gErrorMutex);
  gLastError.clear();
}

}  // namespace braid
