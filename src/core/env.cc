#include "core/env.h"

#include <cerrno>
#include <cstdlib>

namespace braid::env {

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

int64_t getInt(const char* name, int64_t fallback) {
  const char* v = get(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 0);
  if (errno != 0 || end == v) return fallback;
  return x;
}

double getDouble(const char* name, double fallback) {
  const char* v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  return end == v ? fallback : x;
}

std::string getString(const char* name, const std::string& fallback) {
  const char* v = get(name);
  return v ? std::string(v) : fallback;
}

double initTimeoutSeconds() {
  double t = getDouble("BRAID_INIT_TIMEOUT", 60.0);
  return t > 0 ? t : 60.0;
}

int commBlockingOverride() {
  const char* v = get("NCCL_COMM_BLOCKING");
  if (!v) return -1;
  return getInt("NCCL_COMM_BLOCKING", 1) != 0 ? 1 : 0;
}

}  // namespace braid::env
