// Calls braid's not-yet-implemented entry points the way a program built against NVIDIA's
// headers would: this file sees only the toolkit's nccl.h and nccl_device/*.h, loads
// libbraid.so with dlopen, and calls through pointers of the toolkit's declared types. So it
// checks the runtime ABI (struct returns, by-value ncclTeam_t) as well as the behaviour:
// ncclInvalidUsage or an empty result, a last error naming the function, outputs untouched.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <nccl.h>
#include <nccl_device/core.h>
#include <nccl_device/gin_barrier.h>
#include <nccl_device/ll_a2a.h>
#include <nccl_device/lsa_barrier.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#ifndef BRAID_LIBRARY_PATH
#error "BRAID_LIBRARY_PATH must name the built libbraid.so"
#endif

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The host prototypes of nccl_device/*.h, written out. static_cast to these selects the
// overload of exactly this type, so the build fails if a toolkit declaration differs.
using DevCommCreateFn = ncclResult_t (*)(ncclComm_t, const ncclDevCommRequirements_t*, ncclDevComm_t*);
using DevCommDestroyFn = ncclResult_t (*)(ncclComm_t, const ncclDevComm_t*);
using TeamFn = ncclTeam_t (*)(ncclComm_t);
using TeamRankFn = int (*)(ncclComm_t, ncclTeam_t, int);
using LsaBarrierReqFn = ncclResult_t (*)(ncclTeam_t, int, ncclLsaBarrierHandle_t*, ncclDevResourceRequirements_t*);
using GinBarrierReqFn = ncclResult_t (*)(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                         ncclDevResourceRequirements_t*);
using LLA2ASlotsFn = int (*)(int, int);
using LLA2AReqFn = ncclResult_t (*)(int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*);
using GetLastErrorFn = decltype(&ncclGetLastError);
using VoidFn = void (*)();

#define PIN_SIGNATURE(Fn, f) static_assert(sizeof(static_cast<Fn>(&f)) == sizeof(void*), #f)
PIN_SIGNATURE(DevCommCreateFn, ncclDevCommCreate);
PIN_SIGNATURE(DevCommDestroyFn, ncclDevCommDestroy);
PIN_SIGNATURE(TeamFn, ncclTeamWorld);
PIN_SIGNATURE(TeamFn, ncclTeamLsa);
PIN_SIGNATURE(TeamFn, ncclTeamRail);
PIN_SIGNATURE(TeamRankFn, ncclTeamRankToWorld);
PIN_SIGNATURE(TeamRankFn, ncclTeamRankToLsa);
PIN_SIGNATURE(LsaBarrierReqFn, ncclLsaBarrierCreateRequirement);
PIN_SIGNATURE(GinBarrierReqFn, ncclGinBarrierCreateRequirement);
PIN_SIGNATURE(LLA2ASlotsFn, ncclLLA2ACalcSlots);
PIN_SIGNATURE(LLA2AReqFn, ncclLLA2ACreateRequirement);

// src/api/unimplemented.cc restates ncclTeam with this layout.
static_assert(sizeof(ncclTeam_t) == 12 && offsetof(ncclTeam_t, nRanks) == 0 && offsetof(ncclTeam_t, rank) == 4 &&
              offsetof(ncclTeam_t, stride) == 8);

std::string libraryPath() {
  const char* env = std::getenv("BRAID_ABI_LIBRARY");
  return env != nullptr && *env != '\0' ? env : BRAID_LIBRARY_PATH;
}

class Unimplemented : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    handle_ = dlopen(libraryPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  static void TearDownTestSuite() {
    // Not dlclose'd: the library may have started threads or registered atexit handlers.
  }

  void SetUp() override {
    ASSERT_NE(handle_, nullptr) << "dlopen(" << libraryPath() << "): " << dlerror();
    lastError_ = symbol<GetLastErrorFn>("ncclGetLastError");
    ASSERT_NE(lastError_, nullptr) << "libbraid.so has no ncclGetLastError yet";
  }

  // The nccl<name> symbol, after checking that pnccl<name> is the same function and that both
  // come from libbraid.so (not from some other libnccl.so.2 in the process).
  template <class Fn>
  Fn symbol(const std::string& name) {
    void* weak = dlsym(handle_, name.c_str());
    void* strong = dlsym(handle_, ("p" + name).c_str());
    EXPECT_NE(weak, nullptr) << name;
    EXPECT_EQ(weak, strong) << name << " and p" << name << " differ";
    if (weak == nullptr) return nullptr;
    Dl_info info{};
    EXPECT_NE(dladdr(weak, &info), 0) << name;
    void* self = dlsym(handle_, "pncclGetLastError");
    Dl_info selfInfo{};
    if (self != nullptr && dladdr(self, &selfInfo) != 0) {
      EXPECT_EQ(info.dli_fbase, selfInfo.dli_fbase) << name << " comes from " << info.dli_fname;
    }
    return reinterpret_cast<Fn>(weak);
  }

  // The last error names `function` and says why.
  void expectLastErrorNames(const std::string& function) {
    const char* text = lastError_(nullptr);
    ASSERT_NE(text, nullptr);
    EXPECT_THAT(text, HasSubstr(function + ":"));
    EXPECT_THAT(text, HasSubstr("device API"));
  }

  static void* handle_;
  GetLastErrorFn lastError_ = nullptr;
};
void* Unimplemented::handle_ = nullptr;

constexpr unsigned char kSentinel = 0xA5;

TEST_F(Unimplemented, DevCommCreateAndDestroyReturnInvalidUsage) {
  auto create = symbol<DevCommCreateFn>("ncclDevCommCreate");
  auto destroy = symbol<DevCommDestroyFn>("ncclDevCommDestroy");
  ASSERT_TRUE(create && destroy);
  // Opaque to this test; a byte buffer stands in for the structs, to see nothing is written.
  alignas(64) unsigned char devComm[4096];
  std::memset(devComm, kSentinel, sizeof(devComm));
  alignas(64) unsigned char requirements[256] = {};
  EXPECT_EQ(create(nullptr, reinterpret_cast<const ncclDevCommRequirements_t*>(requirements),
                   reinterpret_cast<ncclDevComm_t*>(devComm)),
            ncclInvalidUsage);
  expectLastErrorNames("ncclDevCommCreate");
  for (unsigned char byte : devComm) ASSERT_EQ(byte, kSentinel) << "ncclDevCommCreate wrote its output";

  EXPECT_EQ(destroy(nullptr, reinterpret_cast<const ncclDevComm_t*>(devComm)), ncclInvalidUsage);
  expectLastErrorNames("ncclDevCommDestroy");
  EXPECT_THAT(lastError_(nullptr), Not(HasSubstr("ncclDevCommCreate")));
}

TEST_F(Unimplemented, TeamsAreEmptyAndRanksAreMinusOne) {
  const char* teamNames[] = {"ncclTeamWorld", "ncclTeamLsa", "ncclTeamRail"};
  for (const char* name : teamNames) {
    auto team = symbol<TeamFn>(name);
    ASSERT_NE(team, nullptr);
    const ncclTeam_t result = team(nullptr);
    EXPECT_EQ(result.nRanks, 0) << name;
    EXPECT_EQ(result.rank, 0) << name;
    EXPECT_EQ(result.stride, 0) << name;
    expectLastErrorNames(name);
  }
  const ncclTeam_t someTeam{4, 1, 2};
  for (const char* name : {"ncclTeamRankToWorld", "ncclTeamRankToLsa"}) {
    auto rankOf = symbol<TeamRankFn>(name);
    ASSERT_NE(rankOf, nullptr);
    EXPECT_EQ(rankOf(nullptr, someTeam, 3), -1) << name;
    expectLastErrorNames(name);
  }
}

TEST_F(Unimplemented, RequirementsReturnInvalidUsageAndLeaveOutputsAlone) {
  auto lsa = symbol<LsaBarrierReqFn>("ncclLsaBarrierCreateRequirement");
  auto gin = symbol<GinBarrierReqFn>("ncclGinBarrierCreateRequirement");
  auto a2aSlots = symbol<LLA2ASlotsFn>("ncclLLA2ACalcSlots");
  auto a2a = symbol<LLA2AReqFn>("ncclLLA2ACreateRequirement");
  ASSERT_TRUE(lsa && gin && a2aSlots && a2a);

  const ncclTeam_t team{2, 0, 1};
  alignas(64) unsigned char handle[64];
  alignas(64) unsigned char requirement[256];
  std::memset(handle, kSentinel, sizeof(handle));
  std::memset(requirement, kSentinel, sizeof(requirement));
  auto untouched = [&] {
    for (unsigned char byte : handle) if (byte != kSentinel) return false;
    for (unsigned char byte : requirement) if (byte != kSentinel) return false;
    return true;
  };
  auto* req = reinterpret_cast<ncclDevResourceRequirements_t*>(requirement);

  EXPECT_EQ(lsa(team, 4, reinterpret_cast<ncclLsaBarrierHandle_t*>(handle), req), ncclInvalidUsage);
  expectLastErrorNames("ncclLsaBarrierCreateRequirement");
  EXPECT_EQ(gin(nullptr, team, 4, reinterpret_cast<ncclGinBarrierHandle_t*>(handle), req), ncclInvalidUsage);
  expectLastErrorNames("ncclGinBarrierCreateRequirement");
  EXPECT_EQ(a2aSlots(1024, 8), -1);
  expectLastErrorNames("ncclLLA2ACalcSlots");
  EXPECT_EQ(a2a(2, 64, reinterpret_cast<ncclLLA2AHandle_t*>(handle), req), ncclInvalidUsage);
  expectLastErrorNames("ncclLLA2ACreateRequirement");
  EXPECT_TRUE(untouched());
}

// The profiling names behave the same: a call through pnccl<name> also fails cleanly.
TEST_F(Unimplemented, ProfilingNamesFailTheSameWay) {
  auto create = reinterpret_cast<DevCommCreateFn>(dlsym(handle_, "pncclDevCommCreate"));
  ASSERT_NE(create, nullptr);
  EXPECT_EQ(create(nullptr, nullptr, nullptr), ncclInvalidUsage);
  expectLastErrorNames("ncclDevCommCreate");
}

// ncclResetDebugInit is a harmless no-op: callable through every exported name.
TEST_F(Unimplemented, ResetDebugInitIsHarmless) {
  auto reset = symbol<VoidFn>("ncclResetDebugInit");
  auto internal = reinterpret_cast<VoidFn>(dlsym(handle_, "ncclResetDebugInitInternal"));
  ASSERT_TRUE(reset && internal);
  reset();
  internal();
  reset();
  EXPECT_NE(lastError_(nullptr), nullptr);
}

}  // namespace
