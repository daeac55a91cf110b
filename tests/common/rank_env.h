// What a rank program started by braid-launch (or braid-perf -np) learns from its
// environment: its rank, the rank count and the communicator's unique id.
//
//   BRAID_LAUNCH_RANK    0 .. N-1
//   BRAID_LAUNCH_NRANKS  N
//   BRAID_UNIQUE_ID      256 lowercase hex digits: the 128 bytes of an ncclUniqueId
//
// Header-only, so that any test program can use it without linking the launcher.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nccl.h"
#include "tests/common/launch_vars.h"

namespace braid::test {

inline std::string uniqueIdToHex(const ncclUniqueId& id) { return encodeHex(id.internal, sizeof id.internal); }

struct RankEnv {
  bool launched = false;  // BRAID_LAUNCH_RANK is set: we were started by the launcher
  int rank = 0;
  int nRanks = 1;
  bool hasUniqueId = false;
  ncclUniqueId uniqueId{};
};

// Parses a decimal int in [lo, hi]; false on anything else (sign, junk, overflow).
inline bool parseBoundedInt(const char* text, int lo, int hi, int* out) {
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < lo || value > hi) return false;
  *out = static_cast<int>(value);
  return true;
}

// Reads the three variables. Returns false, with a message in *error, when they are present
// but malformed or inconsistent. Absent variables are not an error: launched stays false.
inline bool readRankEnv(RankEnv* env, std::string* error) {
  *env = RankEnv{};
  const char* rankText = std::getenv(kRankVar);
  const char* nRanksText = std::getenv(kNRanksVar);
  const char* idText = std::getenv(kUniqueIdVar);
  if (rankText == nullptr && nRanksText == nullptr) {
    if (idText != nullptr) *error = std::string(kUniqueIdVar) + " is set but " + kRankVar + " is not";
    return idText == nullptr;
  }
  if (!parseBoundedInt(nRanksText, 1, 1 << 24, &env->nRanks)) {
    *error = std::string(kNRanksVar) + "='" + (nRanksText ? nRanksText : "") + "' is not a rank count >= 1";
    return false;
  }
  if (!parseBoundedInt(rankText, 0, env->nRanks - 1, &env->rank)) {
    *error = std::string(kRankVar) + "='" + (rankText ? rankText : "") + "' is not a rank in [0, " +
             std::to_string(env->nRanks) + ")";
    return false;
  }
  env->launched = true;
  if (idText != nullptr) {
    if (!decodeHex(idText, env->uniqueId.internal, sizeof env->uniqueId.internal)) {
      *error = std::string(kUniqueIdVar) + " is not " + std::to_string(2 * sizeof(ncclUniqueId)) +
               " hex digits (" + std::to_string(std::strlen(idText)) + " characters)";
      return false;
    }
    env->hasUniqueId = true;
  }
  return true;
}

// For rank programs that need all three: prints why and exits with status 2 otherwise.
inline RankEnv rankEnvOrExit(const char* program) {
  RankEnv env;
  std::string error;
  if (!readRankEnv(&env, &error)) {
    std::fprintf(stderr, "%s: %s\n", program, error.c_str());
    std::exit(2);
  }
  if (!env.launched || !env.hasUniqueId) {
    std::fprintf(stderr, "%s: start me with braid-launch (%s, %s and %s must be set)\n", program, kRankVar,
                 kNRanksVar, kUniqueIdVar);
    std::exit(2);
  }
  return env;
}

}  // namespace braid::test
