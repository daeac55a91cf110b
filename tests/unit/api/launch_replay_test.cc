// Which device launches are kept for replay, and what a replay finds (src/api/launch_replay.h):
// a launch is replayed only when every field that went into its packing is the same.
#include "api/launch_replay.h"

#include <gtest/gtest.h>

#include <vector>

namespace braid::api {
namespace {

cudaStream_t streamNo(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

Task allReduce(float* send, float* recv, size_t count, cudaStream_t stream) {
  Task t;
  t.coll = algo::Coll::AllReduce;
  t.sendbuff = send;
  t.recvbuff = recv;
  t.count = count;
  t.type = ncclFloat32;
  t.op = ncclSum;
  t.stream = stream;
  t.onDevice = true;
  return t;
}

LaunchReplay::Key keyOf(std::vector<Task> tasks) {
  std::vector<const Task*> p;
  for (const Task& t : tasks) p.push_back(&t);
  auto k = LaunchReplay::keyOf(p);
  EXPECT_TRUE(k.has_value());
  return k.value_or(LaunchReplay::Key{});
}

kernels::PackedLaunch packedWithBlob(unsigned char tag) {
  kernels::PackedLaunch p;
  p.kernels.emplace_back();
  p.kernels.back().blob.assign(32, tag);
  p.kernels.back().nBlocks = 3;
  return p;
}

float a[8], b[8], c[8];

TEST(LaunchReplay, SameTasksSameKeyAndEveryFieldCounts) {
  const Task base = allReduce(a, b, 8, streamNo(1));
  EXPECT_EQ(keyOf({base}), keyOf({base}));
  auto differs = [&](auto change) {
    Task t = base;
    change(t);
    return !(keyOf({t}) == keyOf({base}));
  };
  EXPECT_TRUE(differs([](Task& t) { t.sendbuff = c; }));
  EXPECT_TRUE(differs([](Task& t) { t.recvbuff = c; }));
  EXPECT_TRUE(differs([](Task& t) { t.count = 7; }));
  EXPECT_TRUE(differs([](Task& t) { t.type = ncclInt32; }));
  EXPECT_TRUE(differs([](Task& t) { t.op = ncclMax; }));
  EXPECT_TRUE(differs([](Task& t) { t.root = 1; }));
  EXPECT_TRUE(differs([](Task& t) { t.coll = algo::Coll::ReduceScatter; }));
  EXPECT_TRUE(differs([](Task& t) { t.stream = streamNo(2); }));
  Task send = base;
  send.coll = algo::Coll::SendRecv;
  send.isSend = true;
  Task recv = send;
  recv.isSend = false;
  EXPECT_FALSE(keyOf({send}) == keyOf({recv}));
  // A group is its tasks in order.
  const Task other = allReduce(c, c, 4, streamNo(1));
  EXPECT_FALSE(keyOf({base, other}) == keyOf({other, base}));
  EXPECT_FALSE(keyOf({base, other}) == keyOf({base}));
}

TEST(LaunchReplay, UserOpsSeveralStreamsAndNoTasksAreNeverKept) {
  Task user = allReduce(a, b, 8, streamNo(1));
  user.op = static_cast<ncclRedOp_t>(ncclNumOps);  // ncclRedOpCreatePreMulSum's first handle
  const Task* one[] = {&user};
  EXPECT_FALSE(LaunchReplay::keyOf(one).has_value());
  Task s1 = allReduce(a, b, 8, streamNo(1)), s2 = allReduce(c, c, 8, streamNo(2));
  const Task* two[] = {&s1, &s2};
  EXPECT_FALSE(LaunchReplay::keyOf(two).has_value());
  EXPECT_FALSE(LaunchReplay::keyOf(std::span<const Task* const>{}).has_value());
}

TEST(LaunchReplay, KeepsSettingsAndPackedKernelsButNotThePlan) {
  LaunchReplay replay;
  const LaunchReplay::Key key = keyOf({allReduce(a, b, 8, streamNo(1))});
  EXPECT_EQ(replay.find(key), nullptr);
  kernels::Launch launch;
  launch.stream = streamNo(1);
  launch.cudaDev = 3;
  launch.threadsPerBlock = 256;
  launch.ops.emplace_back();
  launch.lanes.emplace_back();
  replay.keep(key, launch, packedWithBlob(7));
  const LaunchReplay::Entry* e = replay.find(key);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->settings.stream, streamNo(1));
  EXPECT_EQ(e->settings.cudaDev, 3);
  EXPECT_EQ(e->settings.threadsPerBlock, 256);
  EXPECT_TRUE(e->settings.ops.empty());    // the lanes point into plans that may be gone later
  EXPECT_TRUE(e->settings.lanes.empty());
  ASSERT_EQ(e->packed.kernels.size(), 1u);
  EXPECT_EQ(e->packed.kernels[0].blob, std::vector<unsigned char>(32, 7));
  EXPECT_EQ(replay.hits(), 1u);
  EXPECT_EQ(replay.find(keyOf({allReduce(a, b, 7, streamNo(1))})), nullptr);
}

TEST(LaunchReplay, FullKeepsTheMostRecentlyUsed) {
  LaunchReplay replay(2);
  const auto k1 = keyOf({allReduce(a, b, 1, streamNo(1))});
  const auto k2 = keyOf({allReduce(a, b, 2, streamNo(1))});
  const auto k3 = keyOf({allReduce(a, b, 3, streamNo(1))});
  replay.keep(k1, {}, packedWithBlob(1));
  replay.keep(k2, {}, packedWithBlob(2));
  ASSERT_NE(replay.find(k1), nullptr);  // k2 is now the least recently used
  replay.keep(k3, {}, packedWithBlob(3));
  EXPECT_EQ(replay.size(), 2u);
  EXPECT_NE(replay.find(k1), nullptr);
  EXPECT_EQ(replay.find(k2), nullptr);
  const LaunchReplay::Entry* e3 = replay.find(k3);
  ASSERT_NE(e3, nullptr);
  EXPECT_EQ(e3->packed.kernels[0].blob[0], 3);
}

}  // namespace
}  // namespace braid::api
