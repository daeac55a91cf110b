// Which device launches are kept for replay, and what a replay enqueues (src/api/launch_replay.h):
// a launch is replayed only when everything that went into its packing is the same but the
// buffers' addresses, and those are written into the replayed blob where the first launch's were.
#include "api/launch_replay.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/pack.h"

namespace braid::api {
namespace {

cudaStream_t streamNo(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

Task allReduce(const void* send, void* recv, size_t count, cudaStream_t stream = streamNo(1)) {
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

Task p2p(bool isSend, int peer, void* buf, size_t count) {
  Task t = allReduce(isSend ? buf : nullptr, isSend ? nullptr : buf, count);
  t.coll = algo::Coll::SendRecv;
  t.isSend = isSend;
  t.root = peer;
  return t;
}

std::vector<const Task*> ptrs(const std::vector<Task>& tasks) {
  std::vector<const Task*> p;
  for (const Task& t : tasks) p.push_back(&t);
  return p;
}

LaunchReplay::Key keyOf(const std::vector<Task>& tasks) {
  auto k = LaunchReplay::keyOf(ptrs(tasks));
  EXPECT_TRUE(k.has_value());
  return k.value_or(LaunchReplay::Key{});
}

float a[64], b[64], c[64], d[64];
char fifo[64];
uint64_t tail[4], head[4];

// A real packed launch of `tasks`' buffers: one op whose buffer table holds them (send, recv of
// each task, in order), and one send connection whose FIFO and counters are braid's own.
kernels::PackedLaunch packedFor(const std::vector<Task>& tasks) {
  static algo::Lane lane;
  lane = algo::Lane{};
  algo::Step s;
  s.src = algo::kInput;
  s.count = 1;
  s.sendPeer = 1;
  lane.steps.push_back(s);
  kernels::Launch w;
  w.protocol = algo::Protocol::Simple;
  kernels::OpWork op;
  op.reduces = false;
  for (const Task& t : tasks) {
    op.buffers.push_back(const_cast<void*>(t.sendbuff));
    op.buffers.push_back(t.recvbuff);
  }
  w.ops.push_back(op);
  w.lanes.push_back({0, &lane});
  w.sends.push_back({0, 1, {fifo, &tail[0], &head[0], 4096, 8}});
  kernels::PackedLaunch packed;
  EXPECT_EQ(kernels::packLaunch(w, &packed), ncclSuccess);
  return packed;
}

// The pointers of the first kernel's buffer table, in order.
std::vector<const void*> bufferTable(const kernels::PackedKernel& k, size_t n) {
  std::vector<const void*> out(n);
  std::memcpy(out.data(), k.blob.data() + k.index.buffers, n * sizeof(void*));
  return out;
}

TEST(LaunchReplay, EveryFieldButTheAddressesCounts) {
  const Task base = allReduce(a, b, 8);
  EXPECT_EQ(keyOf({base}), keyOf({base}));
  EXPECT_EQ(keyOf({base}), keyOf({allReduce(c, d, 8)}));  // other buffers: the same launch
  auto differs = [&](auto change) {
    Task t = base;
    change(t);
    return !(keyOf({t}) == keyOf({base}));
  };
  EXPECT_TRUE(differs([](Task& t) { t.recvbuff = const_cast<void*>(t.sendbuff); }));  // in place
  EXPECT_TRUE(differs([](Task& t) { t.count = 7; }));
  EXPECT_TRUE(differs([](Task& t) { t.type = ncclInt32; }));
  EXPECT_TRUE(differs([](Task& t) { t.op = ncclMax; }));
  EXPECT_TRUE(differs([](Task& t) { t.root = 1; }));
  EXPECT_TRUE(differs([](Task& t) { t.coll = algo::Coll::ReduceScatter; }));
  EXPECT_TRUE(differs([](Task& t) { t.stream = streamNo(2); }));
  EXPECT_FALSE(keyOf({p2p(true, 1, a, 8)}) == keyOf({p2p(false, 1, a, 8)}));
  // A group is its tasks in order, and which of its buffers are one.
  const Task other = allReduce(c, c, 4);
  EXPECT_FALSE(keyOf({base, other}) == keyOf({other, base}));
  EXPECT_FALSE(keyOf({base, other}) == keyOf({base}));
  EXPECT_FALSE(keyOf({p2p(true, 1, a, 8), p2p(true, 2, a, 8)}) == keyOf({p2p(true, 1, a, 8), p2p(true, 2, b, 8)}));
}

TEST(LaunchReplay, UserOpsSeveralStreamsOverlapsAndNoTasksAreNeverKept) {
  Task user = allReduce(a, b, 8);
  user.op = static_cast<ncclRedOp_t>(ncclNumOps);  // ncclRedOpCreatePreMulSum's first handle
  EXPECT_FALSE(LaunchReplay::keyOf(ptrs({user})).has_value());
  EXPECT_FALSE(LaunchReplay::keyOf(ptrs({allReduce(a, b, 8, streamNo(1)), allReduce(c, d, 8, streamNo(2))})).has_value());
  EXPECT_FALSE(LaunchReplay::keyOf(std::span<const Task* const>{}).has_value());
  // A send whose bytes a receive of the group overwrites reads a staged copy: never kept.
  EXPECT_FALSE(LaunchReplay::keyOf(ptrs({p2p(true, 1, a, 8), p2p(false, 1, a + 4, 8)})).has_value());
  EXPECT_TRUE(LaunchReplay::keyOf(ptrs({p2p(true, 1, a, 8), p2p(false, 1, a + 8, 8)})).has_value());
  std::vector<Task> many(LaunchReplay::kMaxTasks + 1, allReduce(a, b, 8));
  EXPECT_FALSE(LaunchReplay::keyOf(ptrs(many)).has_value());
  many.pop_back();
  EXPECT_TRUE(LaunchReplay::keyOf(ptrs(many)).has_value());
}

TEST(LaunchReplay, AReplayWritesTheCallsBuffersWhereTheFirstCallsWere) {
  LaunchReplay replay;
  const std::vector<Task> first = {allReduce(a, b, 8), allReduce(c, c, 4)};
  EXPECT_EQ(replay.find(keyOf(first), ptrs(first)), nullptr);
  kernels::Launch launch;
  launch.stream = streamNo(1);
  launch.cudaDev = 3;
  launch.threadsPerBlock = 256;
  launch.ops.emplace_back();
  replay.keep(keyOf(first), ptrs(first), launch, packedFor(first));

  static float e[64];
  const std::vector<Task> again = {allReduce(d, e, 8), allReduce(a, a, 4)};
  const LaunchReplay::Entry* hit = replay.find(keyOf(again), ptrs(again));
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->settings.stream, streamNo(1));
  EXPECT_EQ(hit->settings.cudaDev, 3);
  EXPECT_EQ(hit->settings.threadsPerBlock, 256);
  EXPECT_TRUE(hit->settings.ops.empty());  // the lanes point into plans that may be gone later
  ASSERT_EQ(hit->packed.kernels.size(), 1u);
  const kernels::PackedKernel& k = hit->packed.kernels[0];
  EXPECT_EQ(bufferTable(k, 4), (std::vector<const void*>{d, e, a, a}));
  // The rest of the blob is the first call's: its connection's FIFO and counters untouched.
  const kernels::PackedKernel fresh = packedFor(again).kernels[0];
  EXPECT_EQ(k.blob, fresh.blob);
  EXPECT_EQ(replay.hits(), 1u);
  // Not the same launch: another count.
  const std::vector<Task> other = {allReduce(d, e, 7), allReduce(a, a, 4)};
  EXPECT_EQ(replay.find(keyOf(other), ptrs(other)), nullptr);
}

TEST(LaunchReplay, FullKeepsTheMostRecentlyUsed) {
  LaunchReplay replay(2);
  const std::vector<Task> t1 = {allReduce(a, b, 1)}, t2 = {allReduce(a, b, 2)}, t3 = {allReduce(a, b, 3)};
  replay.keep(keyOf(t1), ptrs(t1), {}, packedFor(t1));
  replay.keep(keyOf(t2), ptrs(t2), {}, packedFor(t2));
  ASSERT_NE(replay.find(keyOf(t1), ptrs(t1)), nullptr);  // t2 is now the least recently used
  replay.keep(keyOf(t3), ptrs(t3), {}, packedFor(t3));
  EXPECT_EQ(replay.size(), 2u);
  EXPECT_NE(replay.find(keyOf(t1), ptrs(t1)), nullptr);
  EXPECT_EQ(replay.find(keyOf(t2), ptrs(t2)), nullptr);
  EXPECT_NE(replay.find(keyOf(t3), ptrs(t3)), nullptr);
}

}  // namespace
}  // namespace braid::api
