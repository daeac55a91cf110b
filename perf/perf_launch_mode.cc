#include "perf/perf_launch_mode.h"

#include "tests/common/launch_vars.h"

namespace braid::perf {
namespace {

bool parseNonNegative(const char* text, int* out) {
  if (text == nullptr || *text == '\0') return false;
  long value = 0;
  for (const char* p = text; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    value = value * 10 + (*p - '0');
    if (value > (1 << 24)) return false;
  }
  *out = static_cast<int>(value);
  return true;
}

// Reads a rank/size pair; `found` tells whether the rank variable exists at all.
bool readPair(const EnvLookup& env, const char* rankVar, const char* sizeVar, LaunchContext* c, bool* found,
              std::string* error) {
  const char* rankText = env(rankVar);
  *found = rankText != nullptr;
  if (!*found) return true;
  const char* sizeText = env(sizeVar);
  if (!parseNonNegative(rankText, &c->rank) || !parseNonNegative(sizeText, &c->nRanks) || c->nRanks < 1 ||
      c->rank >= c->nRanks) {
    *error = std::string(rankVar) + "='" + rankText + "' and " + sizeVar + "='" + (sizeText ? sizeText : "") +
             "' do not make a rank and a rank count";
    return false;
  }
  c->source = rankVar;
  return true;
}

}  // namespace

bool detectLaunch(const EnvLookup& env, LaunchContext* c, std::string* error) {
  *c = LaunchContext{};
  bool found = false;
  if (!readPair(env, test::kRankVar, test::kNRanksVar, c, &found, error)) return false;
  if (found) {
    c->mode = LaunchMode::Launched;
    c->localRank = c->rank;  // the launcher starts every rank on this host
    return true;
  }
  static const char* const kMpiVars[][3] = {
      {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
      {"PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"}};
  for (const auto& vars : kMpiVars) {
    if (!readPair(env, vars[0], vars[1], c, &found, error)) return false;
    if (!found) continue;
    c->mode = LaunchMode::Mpi;
    int local = 0;
    const char* slurmLocal = env("SLURM_LOCALID");
    if (parseNonNegative(env(vars[2]), &local) || parseNonNegative(slurmLocal, &local))
      c->localRank = local;
    else
      c->localRank = c->rank;
    return true;
  }
  return true;  // Parent
}

}  // namespace braid::perf
