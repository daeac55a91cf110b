// What every rank program of tests/mp shares: this rank's identity, printing one line at a
// time ("[rank r] " first when ranks are threads of one process), and the checks that stop
// the rank when they fail (a process exits 1; a thread throws RankFailed to its start).
#pragma once
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nccl.h"

namespace braid::mptest {

inline thread_local int gRank = 0;
inline int gN = 1;
inline ncclUniqueId gId;
inline bool gThreads = false;  // ranks are threads of this process

// Prints one line (fmt ends with a newline). One stdio call per line, so that lines of
// different threads do not mix.
__attribute__((format(printf, 1, 2))) inline void say(const char* fmt, ...) {
  std::string line = gThreads ? "[rank " + std::to_string(gRank) + "] " : "";
  size_t at = line.size();
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  int n = std::vsnprintf(nullptr, 0, fmt, ap);
  va_end(ap);
  if (n > 0) {
    line.resize(at + n + 1);
    std::vsnprintf(line.data() + at, n + 1, fmt, again);
    line.resize(at + n);
  }
  va_end(again);
  std::fputs(line.c_str(), stdout);
}

struct RankFailed {};
inline thread_local bool gFailed = false;
[[noreturn]] inline void failRank() {
  if (!gThreads) std::exit(1);
  gFailed = true;
  throw RankFailed{};
}

}  // namespace braid::mptest

#define EXPECT_OK(call)                                                                                      \
  do {                                                                                                       \
    ncclResult_t r_ = (call);                                                                                \
    if (r_ != ncclSuccess) {                                                                                 \
      ::braid::mptest::say("FAIL %s:%d %s -> %d %s | %s\n", __FILE__, __LINE__, #call, r_,                  \
                           ncclGetErrorString(r_), ncclGetLastError(nullptr));                               \
      ::braid::mptest::failRank();                                                                           \
    }                                                                                                        \
  } while (0)

#define EXPECT_TRUE(cond)                                                       \
  do {                                                                          \
    if (!(cond)) {                                                              \
      ::braid::mptest::say("FAIL %s:%d %s\n", __FILE__, __LINE__, #cond);       \
      ::braid::mptest::failRank();                                              \
    }                                                                           \
  } while (0)
