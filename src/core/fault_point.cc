#include "core/fault_point.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/env.h"

namespace braid {

void faultPoint(const char* name) {
  static const char* wanted = env::get("BRAID_FAULT_POINT");
  if (wanted == nullptr || std::strcmp(wanted, name) != 0) return;
  std::fprintf(stderr, "braid: BRAID_FAULT_POINT=%s reached: killing process %d\n", name, getpid());
  std::fflush(stderr);
  kill(getpid(), SIGKILL);
}

}  // namespace braid
