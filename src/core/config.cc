#include "core/config.h"

#include <cstddef>
#include <cstring>

#include "core/env.h"
#include "core/log.h"

namespace braid {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr int kMaxChannels = 64;

int orDefault(int v, int fallback) { return v == NCCL_CONFIG_UNDEF_INT ? fallback : v; }

ncclResult_t badField(const char* caller, const char* field, long long value, const char* allowed) {
  return fail(ncclInvalidArgument, "%s: config->%s = %lld is invalid; allowed: %s. Fix: leave it at "
              "NCCL_CONFIG_UNDEF_INT (NCCL_CONFIG_INITIALIZER) or set an allowed value.",
              caller, field, value, allowed);
}

}  // namespace

ncclResult_t parseConfig(const ncclConfig_t* user, const char* caller, ncclConfig_t* out) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  if (user) {
    size_t size = user->size;
    if (size < offsetof(ncclConfig_t, blocking) || size > (1u << 16))
      return fail(ncclInvalidArgument,
                  "%s: config->size = %zu is not the size of an ncclConfig_t (this header's is %zu). Fix: initialize "
                  "the config with NCCL_CONFIG_INITIALIZER.",
                  caller, size, sizeof(ncclConfig_t));
    if (user->magic != kConfigMagic)
      return fail(ncclInvalidArgument,
                  "%s: config->magic = 0x%x, expected 0xcafebeef: the config was not initialized. Fix: "
                  "ncclConfig_t config = NCCL_CONFIG_INITIALIZER;",
                  caller, user->magic);
    // A struct from an older header is shorter: take the fields it has, defaults for the rest.
    std::memcpy(&cfg, user, std::min(size, sizeof(ncclConfig_t)));
    cfg.size = sizeof(ncclConfig_t);
  }
  cfg.blocking = orDefault(cfg.blocking, 1);
  if (int b = env::commBlockingOverride(); b >= 0) cfg.blocking = b;
  if (cfg.blocking != 0 && cfg.blocking != 1) return badField(caller, "blocking", cfg.blocking, "0 or 1");
  cfg.cgaClusterSize = orDefault(cfg.cgaClusterSize, 4);
  if (cfg.cgaClusterSize < 0 || cfg.cgaClusterSize > 8) return badField(caller, "cgaClusterSize", cfg.cgaClusterSize, "0..8");
  cfg.minCTAs = orDefault(cfg.minCTAs, static_cast<int>(env::getInt("NCCL_MIN_CTAS", 1)));
  cfg.maxCTAs = orDefault(cfg.maxCTAs, static_cast<int>(env::getInt("NCCL_MAX_CTAS", kMaxChannels)));
  if (cfg.minCTAs < 1 || cfg.minCTAs > kMaxChannels) return badField(caller, "minCTAs", cfg.minCTAs, "1..64");
  if (cfg.maxCTAs < 1 || cfg.maxCTAs > kMaxChannels) return badField(caller, "maxCTAs", cfg.maxCTAs, "1..64");
  if (cfg.minCTAs > cfg.maxCTAs) return badField(caller, "minCTAs", cfg.minCTAs, "<= maxCTAs");
  cfg.splitShare = orDefault(cfg.splitShare, 0);
  if (cfg.splitShare != 0 && cfg.splitShare != 1) return badField(caller, "splitShare", cfg.splitShare, "0 or 1");
  cfg.collnetEnable = orDefault(cfg.collnetEnable, 0);
  if (cfg.collnetEnable != 0 && cfg.collnetEnable != 1) return badField(caller, "collnetEnable", cfg.collnetEnable, "0 or 1");
  cfg.CTAPolicy = orDefault(cfg.CTAPolicy, NCCL_CTA_POLICY_DEFAULT);
  if (cfg.CTAPolicy & ~(NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO))
    return badField(caller, "CTAPolicy", cfg.CTAPolicy, "NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY or _ZERO");
  cfg.shrinkShare = orDefault(cfg.shrinkShare, 0);
  if (cfg.shrinkShare != 0 && cfg.shrinkShare != 1) return badField(caller, "shrinkShare", cfg.shrinkShare, "0 or 1");
  if (cfg.nvlsCTAs != NCCL_CONFIG_UNDEF_INT && (cfg.nvlsCTAs < 1 || cfg.nvlsCTAs > kMaxChannels))
    return badField(caller, "nvlsCTAs", cfg.nvlsCTAs, "1..64");
  if (cfg.nChannelsPerNetPeer != NCCL_CONFIG_UNDEF_INT && (cfg.nChannelsPerNetPeer < 1 || cfg.nChannelsPerNetPeer > kMaxChannels))
    return badField(caller, "nChannelsPerNetPeer", cfg.nChannelsPerNetPeer, "1..64");
  cfg.nvlinkCentricSched = orDefault(cfg.nvlinkCentricSched, 0);
  if (cfg.nvlinkCentricSched != 0 && cfg.nvlinkCentricSched != 1)
    return badField(caller, "nvlinkCentricSched", cfg.nvlinkCentricSched, "0 or 1");
  *out = cfg;
  return ncclSuccess;
}

}  // namespace braid
