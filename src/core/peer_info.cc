#include "core/peer_info.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "core/env.h"

namespace braid {
namespace {

uint64_t hashString(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

uint64_t hostHash() {
  if (const char* id = env::get("BRAID_HOSTID")) return hashString(id);
  return machineHash();
}

uint64_t machineHash() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string key = host;
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[64] = {};
    if (std::fgets(boot, sizeof(boot), f)) key += boot;
    std::fclose(f);
  }
  return hashString(key);
}

uint64_t processHash() {
  return hashString(std::to_string(getpid()), hostHash());  // not cached: fork changes it
}

}  // namespace braid
