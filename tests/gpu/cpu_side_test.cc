// The CPU-side parts of the GPU executor and its test harness, runnable without a GPU:
// launch validation (which fails before any CUDA call), the reference, the thread bootstrap.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "algo/algorithm.h"
#include "kernels/executor.h"
#include "kernels/local_collective.h"
#include "kernels/pack.h"
#include "reference.h"
#include "thread_bootstrap.h"

namespace braid::gputest {
namespace {

kernels::Launch oneLaneLaunch(const algo::Lane& lane, void* in, void* out) {
  kernels::Launch l;
  kernels::OpWork op;
  op.buffers = {in, out};
  l.ops.push_back(op);
  l.lanes.push_back({0, &lane});
  return l;
}

TEST(ExecutorValidation, RejectsMalformedLaunches) {
  char a[64], b[64];
  algo::Lane lane;
  lane.steps.push_back(algo::Step{.recvPeer = 1, .src = algo::kInput, .dst = algo::kOutput, .count = 4});
  // A recv with no connection for it.
  EXPECT_EQ(kernels::launch(oneLaneLaunch(lane, a, b)), ncclInvalidArgument);
  // A buffer the op does not provide.
  algo::Lane copy;
  copy.steps.push_back(algo::Step{.src = 5, .dst = algo::kOutput, .count = 4});
  EXPECT_EQ(kernels::launch(oneLaneLaunch(copy, a, b)), ncclInvalidArgument);
  // A reduce step without a recv.
  algo::Lane red;
  red.steps.push_back(algo::Step{.src = algo::kInput, .dst = algo::kOutput, .flags = algo::kReduce, .count = 4});
  EXPECT_EQ(kernels::launch(oneLaneLaunch(red, a, b)), ncclInvalidArgument);
  // Connections with different FIFO shapes, and bad thread counts.
  uint64_t counters[4] = {};
  auto l = oneLaneLaunch(lane, a, b);
  l.recvs.push_back({0, 1, {a, &counters[0], &counters[1], 16, 4}});
  l.sends.push_back({0, 2, {b, &counters[2], &counters[3], 32, 4}});
  EXPECT_EQ(kernels::launch(l), ncclInvalidArgument);
  auto t = oneLaneLaunch(copy, a, b);
  t.threadsPerBlock = 100;
  EXPECT_EQ(kernels::launch(t), ncclInvalidArgument);
  // A lane naming a missing op.
  auto m = oneLaneLaunch(copy, a, b);
  m.lanes[0].op = 3;
  EXPECT_EQ(kernels::launch(m), ncclInvalidArgument);
  // No slices per step.
  auto sl = oneLaneLaunch(lane, a, b);
  sl.recvs.push_back({0, 1, {a, &counters[0], &counters[1], 16, 4}});
  sl.slicesPerStep = 0;
  EXPECT_EQ(kernels::launch(sl), ncclInvalidArgument);
}

// The deadlock-freedom invariant behind the slicing: every step of at most half a FIFO
// (CollArgs::maxStepElems), cut as the kernel cuts it with the slices per step that launch()
// runs, takes at most half the FIFO's slots; slices are whole 16-byte packs. 8 slices in 8
// slots broke this and deadlocked a 2-rank all-reduce.
TEST(ExecutorSlicing, AStepNeverTakesMoreThanHalfTheSlots) {
  for (uint32_t elemSize : {1u, 2u, 4u, 8u})
    for (uint32_t slotBytes : {16u, 4096u, 32768u, 262144u, 524288u})
      for (uint32_t nSlots : {2u, 4u, 8u, 16u})
        for (uint32_t asked : {0u, 1u, 2u, 4u, 8u, 64u}) {
          const uint32_t slices = kernels::effectiveSlicesPerStep(asked, nSlots);
          const uint64_t maxStep = uint64_t(slotBytes) * nSlots / 2 / elemSize;
          for (uint64_t count : {uint64_t(1), uint64_t(7), maxStep / 3 + 1, maxStep / 2, maxStep - 1, maxStep}) {
            if (count == 0 || count > maxStep) continue;
            const uint64_t per = kernels::sliceElemsFor(count, elemSize, slotBytes, slices);
            ASSERT_GT(per, 0u);
            EXPECT_EQ(per * elemSize % 16, 0u);
            EXPECT_LE(per * elemSize, slotBytes);
            EXPECT_LE((count + per - 1) / per, std::max<uint64_t>(1, nSlots / 2))
                << "elem " << elemSize << " slot " << slotBytes << " x " << nSlots << " slices " << slices << " count "
                << count;
          }
        }
}

// The same invariant for every protocol's slicing (proto_layout.h): a step of at most
// maxStepBytes takes at most half the slots, in slices of whole elements that fit a slot's data.
TEST(ExecutorSlicing, EveryProtocolKeepsAStepWithinHalfTheSlots) {
  using algo::Protocol;
  for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
    for (uint32_t elemSize : {1u, 2u, 4u, 8u})
      for (uint32_t lines : {1u, 2u, 32u, 128u, 2048u})
        for (uint32_t nSlots : {2u, 4u, 8u}) {
          const uint32_t line = p == Protocol::LL ? kernels::kLLLineBytes : p == Protocol::LL128 ? kernels::kLL128LineBytes : 16;
          const kernels::FifoShape shape{lines * line, nSlots};
          ASSERT_TRUE(kernels::shapeFits(p, shape));
          const uint32_t slices = kernels::effectiveSlicesPerStep(2, nSlots);
          const uint64_t maxStep = kernels::maxStepBytes(p, shape) / elemSize;
          for (uint64_t count : {uint64_t(1), uint64_t(7), maxStep / 3 + 1, maxStep - 1, maxStep}) {
            if (count == 0 || count > maxStep) continue;
            const uint64_t per = kernels::protoSliceElems(p, count, elemSize, shape.slotBytes, slices);
            ASSERT_GT(per, 0u) << algo::protocolName(p);
            EXPECT_LE(per * elemSize, kernels::slotDataBytes(p, shape.slotBytes)) << algo::protocolName(p);
            EXPECT_LE((count + per - 1) / per, std::max<uint32_t>(1, nSlots / 2))
                << algo::protocolName(p) << " elem " << elemSize << " slot " << shape.slotBytes << " x " << nSlots
                << " count " << count;
          }
        }
}

// Line formats, and the FIFOs the API allocates per connection: whole lines, and no more GPU
// memory than NCCL's buffers per connection (Simple 4 MiB, LL 512 KiB, LL128 ~4.7 MiB).
TEST(ProtocolLayout, LinesAndDefaultFifos) {
  using algo::Protocol;
  EXPECT_EQ(kernels::slotDataBytes(Protocol::LL, 32 * 1024), 16u * 1024);        // 8 of 16 bytes
  EXPECT_EQ(kernels::slotDataBytes(Protocol::LL128, 128 * 1024), 120u * 1024);   // 120 of 128
  EXPECT_EQ(kernels::slotDataBytes(Protocol::Simple, 256 * 1024), 256u * 1024);
  EXPECT_FALSE(kernels::shapeFits(Protocol::LL128, {4096 + 16, 4}));
  EXPECT_TRUE(kernels::shapeFits(Protocol::LL, {4096 + 16, 4}));
  EXPECT_FALSE(kernels::shapeFits(Protocol::LL, {4096 + 8, 4}));
  EXPECT_FALSE(kernels::shapeFits(Protocol::Simple, {4096, 0}));
  const uint64_t ncclBytes[] = {512 * 1024, 120 * 640 * 8 * 8, 4 << 20};  // by algo::Protocol
  for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
    const kernels::FifoShape f = kernels::defaultFifo(p);
    EXPECT_TRUE(kernels::shapeFits(p, f)) << algo::protocolName(p);
    EXPECT_GE(f.nSlots, 2u) << algo::protocolName(p);
    EXPECT_LE(uint64_t(f.slotBytes) * f.nSlots, ncclBytes[int(p)]) << algo::protocolName(p);
  }
  // A default LL slot moves in one round of a 512-thread block (4 lines in flight per thread).
  EXPECT_EQ(kernels::defaultFifo(Protocol::LL).slotBytes / kernels::kLLLineBytes, 512u * 4);
}

// Only LL128 falls back, and only where some connection cannot carry it.
TEST(ProtocolChoice, LL128FallsBackToSimpleWithoutOrderedLinks) {
  using algo::Protocol;
  std::atomic<bool> said{false};
  EXPECT_EQ(kernels::usableProtocol(Protocol::LL128, true, 0, &said), Protocol::LL128);
  EXPECT_FALSE(said.load());
  EXPECT_EQ(kernels::usableProtocol(Protocol::LL128, false, 0, &said), Protocol::Simple);
  EXPECT_TRUE(said.load());  // logged once
  EXPECT_EQ(kernels::usableProtocol(Protocol::LL, false, 0, &said), Protocol::LL);
  EXPECT_EQ(kernels::usableProtocol(Protocol::Simple, false, 0, &said), Protocol::Simple);
}

// The reference's inputs repeat with kInputPeriod (CaseRunner checks one period's reference).
TEST(Reference, InputsRepeatWithThePeriod) {
  for (int t = 0; t < kNumDataTypes; ++t)
    for (TestOp op : kAllOps)
      for (int r = 0; r < 8; ++r)
        for (uint64_t i = 0; i < 3 * kInputPeriod; ++i)
          ASSERT_EQ(inputValue(ncclDataType_t(t), op, r, i), inputValue(ncclDataType_t(t), op, r, i + kInputPeriod))
              << typeName(ncclDataType_t(t)) << " " << testOpName(op) << " rank " << r << " i " << i;
}

TEST(Reference, IntegersWrapAndAverageTruncates) {
  // int8: 100 + 100 wraps to -56.
  EXPECT_EQ(reduceReference(ncclInt8, TestOp::Sum, {100, 100}, 2).value, -56);
  // SumPostDiv: (-3 + -4) / 2 = -3 (toward zero).
  EXPECT_EQ(reduceReference(ncclInt32, TestOp::Avg, {-3, -4}, 2).value, -3);
  // PreMulSum with the host scalar 3 on integers.
  EXPECT_EQ(reduceReference(ncclUint32, TestOp::PreMulHost, {1, 2}, 2).value, 9);
  // Floats get a tolerance that scales with the terms; fp8 e4m3 keeps 3 mantissa bits.
  Expected e = reduceReference(ncclFloat8e4m3, TestOp::Sum, {4, 4, 4, 4, 4}, 5);
  EXPECT_EQ(e.value, 20);
  EXPECT_GT(e.tolerance, 0);
  unsigned char bits[8];
  storeValue(ncclFloat8e5m2, 3.0, bits);
  EXPECT_EQ(loadValue(ncclFloat8e5m2, bits), 3.0);
  storeValue(ncclBfloat16, -0.5, bits);
  EXPECT_EQ(loadValue(ncclBfloat16, bits), -0.5);
}

TEST(ThreadBootstrap, SendRecvAllGatherBarrier) {
  const int n = 4;
  ThreadBootstrapHub hub(n);
  std::vector<std::thread> threads;
  std::vector<int> ok(n, 0);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadBootstrap b(hub, r);
      int all[n] = {};
      all[r] = r * 10;
      b.allGather(all, sizeof(int));
      int next = (r + 1) % n, prev = (r + n - 1) % n, got = -1;
      b.send(next, 7, &r, sizeof r);
      b.recv(prev, 7, &got, sizeof got);
      b.barrier();
      ok[r] = got == prev && all[0] == 0 && all[3] == 30;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(ok[r]) << r;
}


// ---- The packer: what a kernel reads back from the blob is what the schedule says. ----

template <typename Row>
std::vector<Row> table(const kernels::PackedKernel& k, uint32_t offset, uint32_t n) {
  EXPECT_EQ(offset % 16, 0u);
  EXPECT_LE(offset + n * sizeof(Row), k.blob.size());
  std::vector<Row> rows(n);
  if (n > 0) std::memcpy(rows.data(), k.blob.data() + offset, n * sizeof(Row));
  return rows;
}

// A launch of `plan`'s lanes for rank `rank` of a ring of n ranks, with a connection per
// (channel, peer) the lanes use, in a deliberately unsorted order.
struct PlannedLaunch {
  kernels::Launch launch;
  uint64_t counters[4096] = {};
  char fifo[16] = {};
  int used = 0;
  // The launch's one op, `plan`'s lanes, and their connections.
  void addOnlyOp(const kernels::OpWork& op, const algo::RankPlan& plan) {
    launch.ops.push_back(op);
    for (const algo::Lane& lane : plan.lanes) launch.lanes.push_back({0, &lane});
    addConnections(plan);
  }
  void addConnections(const algo::RankPlan& plan) {
    std::vector<std::pair<int, int>> sends, recvs;
    for (const algo::Lane& lane : plan.lanes)
      for (const algo::Step& s : lane.steps) {
        if (s.sendPeer >= 0) sends.push_back({lane.channel, s.sendPeer});
        if (s.recvPeer >= 0) recvs.push_back({lane.channel, s.recvPeer});
      }
    for (auto* v : {&sends, &recvs}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
      std::reverse(v->begin(), v->end());
    }
    for (auto [c, p] : sends) {
      launch.sends.push_back({c, p, {fifo, &counters[used], &counters[used + 1], 4096, 8}});
      used += 2;
    }
    for (auto [c, p] : recvs) {
      launch.recvs.push_back({c, p, {fifo, &counters[used], &counters[used + 1], 4096, 8}});
      used += 2;
    }
  }
};

// A ring all-reduce's plan for one rank, steps of at most 4096 elements.
algo::RankPlan ringAllReducePlan(int nRanks, int rank, uint64_t count, int nChannels) {
  algo::CollArgs a;
  a.coll = algo::Coll::AllReduce;
  a.nRanks = nRanks;
  a.rank = rank;
  a.count = count;
  a.nChannels = nChannels;
  a.alignElems = 4;
  a.maxStepElems = 4096;
  return algo::findAlgorithm("ring")->build(a);
}

TEST(PackLaunch, BlobReadsBackAsTheScheduleSays) {
  const algo::RankPlan plan = ringAllReducePlan(4, 1, 100003, 5);
  static PlannedLaunch pl;
  pl = PlannedLaunch{};
  static float in[4], out[4];
  kernels::OpWork op;
  op.type = ncclFloat32;
  op.red.kind = kernels::RedKind::PreMulSum;
  op.red.scalarBits = 0x40000000;
  op.buffers = {in, out};
  pl.addOnlyOp(op, plan);

  kernels::PackedLaunch packed;
  ASSERT_EQ(kernels::packLaunch(pl.launch, &packed), ncclSuccess);
  ASSERT_EQ(packed.kernels.size(), 1u);
  EXPECT_EQ(packed.slotBytes, 4096u);
  EXPECT_EQ(packed.nSlots, 8u);
  const kernels::PackedKernel& k = packed.kernels[0];
  EXPECT_EQ(k.type, kernels::ElemType::Float32);
  EXPECT_EQ(k.blob.size() % 16, 0u);
  auto lanes = table<kernels::DevLane>(k, k.index.lanes, k.index.nLanes);
  auto ops = table<kernels::DevOp>(k, k.index.ops, k.index.nOps);
  auto sends = table<kernels::DevSendEnd>(k, k.index.sends, k.index.nSends);
  auto recvs = table<kernels::DevRecvEnd>(k, k.index.recvs, k.index.nRecvs);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].kind, uint8_t(kernels::RedKind::PreMulSum));
  EXPECT_EQ(ops[0].scalarBits, 0x40000000u);
  EXPECT_EQ(ops[0].reduces, 1);
  auto buffers = table<void*>(k, k.index.buffers + 0, ops[0].firstBuffer + ops[0].nBuffers);
  EXPECT_EQ(buffers[ops[0].firstBuffer + algo::kInput], static_cast<void*>(in));
  EXPECT_EQ(buffers[ops[0].firstBuffer + algo::kOutput], static_cast<void*>(out));
  ASSERT_EQ(sends.size(), pl.launch.sends.size());
  ASSERT_EQ(recvs.size(), pl.launch.recvs.size());
  for (size_t i = 0; i < sends.size(); ++i) EXPECT_EQ(sends[i].tail, pl.launch.sends[i].end.peerTail);
  for (size_t i = 0; i < recvs.size(); ++i) EXPECT_EQ(recvs[i].tail, pl.launch.recvs[i].end.localTail);

  // Lane by lane, step by step (empty steps dropped), connections named by their ends: a step
  // with a peer names the launch's connection (channel, peer), one without names none.
  auto expectConn = [](int16_t conn, int peer, int channel, const auto& conns) {
    if (peer < 0) {
      EXPECT_EQ(conn, kernels::kNoConn);
      return;
    }
    ASSERT_GE(conn, 0);
    EXPECT_EQ(conns[conn].channel, channel);
    EXPECT_EQ(conns[conn].peer, peer);
  };
  size_t lane = 0;
  for (const algo::Lane& l : plan.lanes) {
    std::vector<const algo::Step*> want;
    for (const algo::Step& s : l.steps)
      if (s.count > 0) want.push_back(&s);
    if (want.empty()) continue;
    ASSERT_LT(lane, lanes.size());
    const kernels::DevLane& dl = lanes[lane++];
    EXPECT_EQ(dl.op, 0u);
    ASSERT_EQ(dl.nSteps, want.size());
    auto steps = table<kernels::DevStep>(k, k.index.steps + dl.firstStep * sizeof(kernels::DevStep), dl.nSteps);
    for (size_t i = 0; i < want.size(); ++i) {
      const algo::Step& s = *want[i];
      const kernels::DevStep& d = steps[i];
      EXPECT_EQ(d.srcOff, s.srcOff);
      EXPECT_EQ(d.dstOff, s.dstOff);
      EXPECT_EQ(d.count, s.count);
      EXPECT_EQ(d.src, s.src);
      EXPECT_EQ(d.dst, s.dst);
      EXPECT_EQ(d.flags, s.flags);
      expectConn(d.sendConn, s.sendPeer, l.channel, pl.launch.sends);
      expectConn(d.recvConn, s.recvPeer, l.channel, pl.launch.recvs);
    }
  }
  EXPECT_EQ(lane, lanes.size());
  EXPECT_EQ(k.nBlocks, lanes.size());
}

// pointerOffsets names every device pointer of a packed kernel, and only those: a served rank's
// leader rewrites exactly these (src/api/served.h), so a pointer missed is followed in the wrong
// process, and a non-pointer rewritten is corrupted work.
TEST(PackLaunch, PointerOffsetsNameEveryDevicePointer) {
  const algo::RankPlan plan = ringAllReducePlan(3, 2, 5000, 2);
  static PlannedLaunch pl;
  pl = PlannedLaunch{};
  static float in[4], out[4], scalar[1];
  kernels::OpWork op;
  op.type = ncclFloat32;
  op.red.kind = kernels::RedKind::PreMulSum;
  op.red.deviceScalar = scalar;
  op.buffers = {in, out};
  pl.addOnlyOp(op, plan);
  kernels::PackedLaunch packed;
  ASSERT_EQ(kernels::packLaunch(pl.launch, &packed), ncclSuccess);
  ASSERT_EQ(packed.kernels.size(), 1u);
  const kernels::PackedKernel& k = packed.kernels[0];
  std::multiset<const void*> want = {in, out, scalar};
  for (const kernels::SendConn& c : pl.launch.sends) want.insert({c.end.peerFifo, c.end.peerTail, c.end.localHead});
  for (const kernels::RecvConn& c : pl.launch.recvs) want.insert({c.end.localFifo, c.end.localTail, c.end.peerHead});
  std::multiset<const void*> got;
  for (uint32_t off : kernels::pointerOffsets(k)) {
    ASSERT_LE(off + sizeof(void*), k.blob.size());
    void* p = nullptr;
    std::memcpy(&p, k.blob.data() + off, sizeof(p));
    got.insert(p);
  }
  EXPECT_EQ(got, want);
}

// The packed launch carries the launch's protocol for every kernel; FIFO shapes must fit it,
// and LL128 needs every end marked ordered128 (the transport's verdict on the path).
TEST(PackLaunch, ProtocolShapesAndLL128Paths) {
  using algo::Protocol;
  algo::Lane lane;
  lane.steps.push_back(algo::Step{.recvPeer = 1, .sendPeer = 2, .src = algo::kInput, .dst = algo::kOutput, .flags = algo::kReduce, .count = 100});
  static char a[64], b[64], fifo[16];
  static uint64_t counters[8];
  auto make = [&](Protocol p, uint32_t slotBytes, bool ordered) {
    kernels::Launch l = oneLaneLaunch(lane, a, b);
    l.protocol = p;
    l.recvs.push_back({0, 1, {fifo, &counters[0], &counters[1], slotBytes, 4, ordered}});
    l.sends.push_back({0, 2, {fifo, &counters[2], &counters[3], slotBytes, 4, ordered}});
    return l;
  };
  kernels::PackedLaunch packed;
  for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple}) {
    ASSERT_EQ(kernels::packLaunch(make(p, 4096, true), &packed), ncclSuccess) << algo::protocolName(p);
    EXPECT_EQ(packed.protocol, p);
    EXPECT_EQ(packed.slotBytes, 4096u);
    EXPECT_EQ(packed.nSlots, 4u);
    ASSERT_EQ(packed.kernels.size(), 1u);
    auto steps = table<kernels::DevStep>(packed.kernels[0], packed.kernels[0].index.steps, 1);
    EXPECT_EQ(steps[0].count, 100u);  // steps are the schedule's, whatever the protocol
    EXPECT_EQ(steps[0].recvConn, 0);
    EXPECT_EQ(steps[0].sendConn, 0);
  }
  EXPECT_EQ(kernels::packLaunch(make(Protocol::LL128, 4096, false), &packed), ncclInvalidArgument);
  EXPECT_EQ(kernels::packLaunch(make(Protocol::LL128, 4096 + 16, true), &packed), ncclInvalidArgument);  // not whole lines
  EXPECT_EQ(kernels::packLaunch(make(Protocol::LL, 4096 + 16, false), &packed), ncclSuccess);
  EXPECT_EQ(kernels::packLaunch(make(Protocol::Simple, 4096, false), &packed), ncclSuccess);
  kernels::Launch bad = make(Protocol::Simple, 4096, true);
  bad.protocol = static_cast<Protocol>(7);
  EXPECT_EQ(kernels::packLaunch(bad, &packed), ncclInvalidArgument);
}

TEST(PackLaunch, KernelsSplitByTypeAndSharedConnections) {
  // Three byte-moving ops (two types) and one float reduction. Ops 0 and 1 use the same
  // connection, so op 1 waits for a second byte kernel; op 2 (another connection) joins it.
  algo::Lane send0, send1, send2, reduce;
  send0.channel = send1.channel = 0;
  send2.channel = 1;
  send0.steps.push_back(algo::Step{.sendPeer = 1, .src = algo::kInput, .count = 3});
  send1.steps.push_back(algo::Step{.sendPeer = 1, .src = algo::kInput, .count = 5});
  send2.steps.push_back(algo::Step{.sendPeer = 1, .src = algo::kInput, .count = 7});
  reduce.channel = 2;
  reduce.steps.push_back(algo::Step{.recvPeer = 1, .src = algo::kInput, .dst = algo::kOutput, .flags = algo::kReduce, .count = 9});
  static char a[64], b[64];
  static uint64_t counters[16];
  static char fifo[16];
  kernels::Launch l;
  for (ncclDataType_t t : {ncclInt32, ncclFloat16, ncclInt64}) {
    kernels::OpWork op;
    op.type = t;
    op.reduces = false;
    op.buffers = {a, b};
    l.ops.push_back(op);
  }
  kernels::OpWork red;
  red.type = ncclFloat32;
  red.buffers = {a, b};
  l.ops.push_back(red);
  l.lanes = {{0, &send0}, {1, &send1}, {2, &send2}, {3, &reduce}};
  l.sends.push_back({0, 1, {fifo, &counters[0], &counters[1], 4096, 8}});
  l.sends.push_back({1, 1, {fifo, &counters[2], &counters[3], 4096, 8}});
  l.recvs.push_back({2, 1, {fifo, &counters[4], &counters[5], 4096, 8}});
  kernels::PackedLaunch packed;
  ASSERT_EQ(kernels::packLaunch(l, &packed), ncclSuccess);
  // Kernels in type order: uint8 (byte ops) before float32; the byte ops split in two.
  ASSERT_EQ(packed.kernels.size(), 3u);
  EXPECT_EQ(packed.kernels[0].type, kernels::ElemType::Uint8);
  EXPECT_EQ(packed.kernels[1].type, kernels::ElemType::Uint8);
  EXPECT_EQ(packed.kernels[2].type, kernels::ElemType::Float32);
  EXPECT_EQ(packed.kernels[0].nBlocks, 1u);
  EXPECT_EQ(packed.kernels[1].nBlocks, 2u);
  EXPECT_EQ(packed.kernels[2].nBlocks, 1u);
  // Byte kernels count bytes: int32 x 3, then float16 x 5 and int64 x 7.
  auto stepsOf = [](const kernels::PackedKernel& k) {
    return table<kernels::DevStep>(k, k.index.steps, k.blob.size() > k.index.steps
                                                         ? uint32_t((k.blob.size() - k.index.steps) / sizeof(kernels::DevStep))
                                                         : 0);
  };
  EXPECT_EQ(stepsOf(packed.kernels[0])[0].count, 12u);
  EXPECT_EQ(stepsOf(packed.kernels[1])[0].count, 10u);
  EXPECT_EQ(stepsOf(packed.kernels[1])[1].count, 56u);
  EXPECT_EQ(stepsOf(packed.kernels[2])[0].count, 9u);
  EXPECT_EQ(stepsOf(packed.kernels[2])[0].recvConn, 0);
  // A connection given twice is refused.
  l.sends.push_back({0, 1, {fifo, &counters[6], &counters[7], 4096, 8}});
  EXPECT_EQ(kernels::packLaunch(l, &packed), ncclInvalidArgument);
}


// A merged kernel runs each part's lanes exactly as the part would: the same steps, ops,
// buffers and connection ends, with each part's abort and error words (the leader of a GPU
// shared by processes launches its ranks' work so: src/api/served.h).
TEST(MergeKernels, EveryPartReadsBackAsItWasPacked) {
  static PlannedLaunch pl[3];
  static float in[3][4], out[3][4];
  static uint32_t abortWord[3], errorWord[3];
  std::vector<algo::RankPlan> plans;
  for (int r = 0; r < 3; ++r) plans.push_back(ringAllReducePlan(3, r, 70001 + r, 2 + r));
  std::vector<kernels::PackedLaunch> packed(3);
  std::vector<kernels::MergePart> parts(3);
  for (int r = 0; r < 3; ++r) {
    pl[r] = PlannedLaunch{};
    kernels::OpWork op;
    op.type = ncclFloat32;
    op.red.kind = r == 1 ? kernels::RedKind::Max : kernels::RedKind::Sum;
    op.buffers = {in[r], out[r]};
    pl[r].addOnlyOp(op, plans[size_t(r)]);
    ASSERT_EQ(kernels::packLaunch(pl[r].launch, &packed[size_t(r)]), ncclSuccess);
    ASSERT_EQ(packed[size_t(r)].kernels.size(), 1u);
    parts[size_t(r)].kernel = &packed[size_t(r)].kernels[0];
    if (r > 0) parts[size_t(r)].words = {&abortWord[r], &errorWord[r]};  // part 0: the launch's own
  }
  kernels::PackedKernel m;
  ASSERT_EQ(kernels::mergeKernels(parts, &m), ncclSuccess);
  auto lanes = table<kernels::DevLane>(m, m.index.lanes, m.index.nLanes);
  auto ops = table<kernels::DevOp>(m, m.index.ops, m.index.nOps);
  auto sends = table<kernels::DevSendEnd>(m, m.index.sends, m.index.nSends);
  auto recvs = table<kernels::DevRecvEnd>(m, m.index.recvs, m.index.nRecvs);
  auto words = table<kernels::DevRankWords>(m, m.index.words, m.index.nWords);
  ASSERT_EQ(words.size(), 2u);
  EXPECT_EQ(m.type, kernels::ElemType::Float32);
  EXPECT_EQ(m.nBlocks, lanes.size());
  size_t lane = 0;
  std::multiset<const void*> wantPointers = {&abortWord[1], &errorWord[1], &abortWord[2], &errorWord[2]};
  for (int r = 0; r < 3; ++r) {
    const kernels::PackedKernel& k = *parts[size_t(r)].kernel;
    for (uint32_t off : kernels::pointerOffsets(k)) {
      void* p = nullptr;
      std::memcpy(&p, k.blob.data() + off, sizeof(p));
      wantPointers.insert(p);
    }
    auto pLanes = table<kernels::DevLane>(k, k.index.lanes, k.index.nLanes);
    auto pOps = table<kernels::DevOp>(k, k.index.ops, k.index.nOps);
    auto pSends = table<kernels::DevSendEnd>(k, k.index.sends, k.index.nSends);
    auto pRecvs = table<kernels::DevRecvEnd>(k, k.index.recvs, k.index.nRecvs);
    for (const kernels::DevLane& pl : pLanes) {
      ASSERT_LT(lane, lanes.size());
      const kernels::DevLane& ml = lanes[lane++];
      ASSERT_EQ(ml.nSteps, pl.nSteps);
      if (r == 0) {
        EXPECT_EQ(ml.words, 0u);
      } else {
        ASSERT_GE(ml.words, 1u);
        EXPECT_EQ(words[ml.words - 1].abortFlag, &abortWord[r]);
        EXPECT_EQ(words[ml.words - 1].errorOut, &errorWord[r]);
      }
      const kernels::DevOp& mo = ops[ml.op];
      const kernels::DevOp& po = pOps[pl.op];
      EXPECT_EQ(mo.kind, po.kind);
      EXPECT_EQ(mo.nBuffers, po.nBuffers);
      auto mBuf = table<void*>(m, m.index.buffers, mo.firstBuffer + mo.nBuffers);
      auto pBuf = table<void*>(k, k.index.buffers, po.firstBuffer + po.nBuffers);
      for (uint32_t b = 0; b < po.nBuffers; ++b) EXPECT_EQ(mBuf[mo.firstBuffer + b], pBuf[po.firstBuffer + b]);
      auto ms = table<kernels::DevStep>(m, m.index.steps, ml.firstStep + ml.nSteps);
      auto ps = table<kernels::DevStep>(k, k.index.steps, pl.firstStep + pl.nSteps);
      ms.erase(ms.begin(), ms.begin() + ml.firstStep);
      ps.erase(ps.begin(), ps.begin() + pl.firstStep);
      for (uint32_t i = 0; i < pl.nSteps; ++i) {
        EXPECT_EQ(ms[i].srcOff, ps[i].srcOff);
        EXPECT_EQ(ms[i].dstOff, ps[i].dstOff);
        EXPECT_EQ(ms[i].count, ps[i].count);
        EXPECT_EQ(ms[i].src, ps[i].src);
        EXPECT_EQ(ms[i].dst, ps[i].dst);
        EXPECT_EQ(ms[i].flags, ps[i].flags);
        ASSERT_EQ(ms[i].sendConn == kernels::kNoConn, ps[i].sendConn == kernels::kNoConn);
        ASSERT_EQ(ms[i].recvConn == kernels::kNoConn, ps[i].recvConn == kernels::kNoConn);
        if (ps[i].sendConn != kernels::kNoConn) {  // the same end, wherever it now stands
          EXPECT_EQ(sends[ms[i].sendConn].fifo, pSends[ps[i].sendConn].fifo);
          EXPECT_EQ(sends[ms[i].sendConn].tail, pSends[ps[i].sendConn].tail);
          EXPECT_EQ(sends[ms[i].sendConn].head, pSends[ps[i].sendConn].head);
        }
        if (ps[i].recvConn != kernels::kNoConn) {
          EXPECT_EQ(recvs[ms[i].recvConn].tail, pRecvs[ps[i].recvConn].tail);
          EXPECT_EQ(recvs[ms[i].recvConn].head, pRecvs[ps[i].recvConn].head);
        }
      }
    }
  }
  EXPECT_EQ(lane, lanes.size());
  std::multiset<const void*> got;
  for (uint32_t off : kernels::pointerOffsets(m)) {
    void* p = nullptr;
    std::memcpy(&p, m.blob.data() + off, sizeof(p));
    got.insert(p);
  }
  EXPECT_EQ(got, wantPointers);

  // Parts of different element types, a part with an index outside its tables, a part that is
  // itself merged: refused.
  kernels::PackedKernel other = *parts[1].kernel;
  other.type = kernels::ElemType::Int32;
  EXPECT_EQ(kernels::mergeKernels({parts[0], {&other, {}}}, &m), ncclInvalidArgument);
  other = *parts[1].kernel;
  kernels::DevLane bad;
  std::memcpy(&bad, other.blob.data() + other.index.lanes, sizeof(bad));
  bad.op = 7;
  std::memcpy(other.blob.data() + other.index.lanes, &bad, sizeof(bad));
  EXPECT_EQ(kernels::mergeKernels({parts[0], {&other, {}}}, &m), ncclInvalidArgument);
  kernels::PackedKernel merged;
  ASSERT_EQ(kernels::mergeKernels(parts, &merged), ncclSuccess);
  EXPECT_EQ(kernels::mergeKernels({parts[0], {&merged, {}}}, &m), ncclInvalidArgument);
  EXPECT_EQ(kernels::mergeKernels({}, &m), ncclInvalidArgument);
}

// The one pass of a GPU's ranks' collective takes each rank's buffers and scalar from that rank's
// own packed work, says which elements go where, and refuses work that is not the same collective
// on every rank.
TEST(LocalCollective, TakesEveryRanksBuffersFromItsWork) {
  static PlannedLaunch pl[3];
  static float in[3][4], out[3][4], deviceScalar[1];
  std::vector<algo::RankPlan> plans;
  for (int r = 0; r < 3; ++r) plans.push_back(ringAllReducePlan(3, r, 1001, 2));
  std::vector<kernels::PackedLaunch> packed(3);
  std::vector<const kernels::PackedKernel*> ranks;
  for (int r = 0; r < 3; ++r) {
    pl[r] = PlannedLaunch{};
    kernels::OpWork op;
    op.type = ncclFloat32;
    op.red.kind = kernels::RedKind::PreMulSum;
    op.red.scalarBits = 0x3f800000u + uint32_t(r);
    if (r == 2) op.red.deviceScalar = deviceScalar;
    op.buffers = {in[r], r == 1 ? in[r] : out[r]};  // rank 1 in place
    pl[r].addOnlyOp(op, plans[size_t(r)]);
    ASSERT_EQ(kernels::packLaunch(pl[r].launch, &packed[size_t(r)]), ncclSuccess);
    ASSERT_EQ(packed[size_t(r)].kernels.size(), 1u);
    ranks.push_back(&packed[size_t(r)].kernels[0]);
  }
  kernels::LocalCollective w;
  ASSERT_EQ(kernels::localCollectiveOf(algo::Coll::AllReduce, 1001, ncclFloat32, 0, ranks, &w), ncclSuccess);
  EXPECT_EQ(w.type, kernels::ElemType::Float32);
  EXPECT_EQ(w.kind, kernels::RedKind::PreMulSum);
  EXPECT_EQ(w.nRanks, 3u);
  EXPECT_EQ(w.count, 1001u);
  ASSERT_EQ(w.nJobs, 1u);
  EXPECT_EQ(w.jobs[0].from, 7u);
  EXPECT_EQ(w.jobs[0].to, 7u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(w.ranks[r].in, in[r]);
    EXPECT_EQ(w.ranks[r].out, r == 1 ? in[r] : out[r]);
    EXPECT_EQ(w.ranks[r].scalarBits, 0x3f800000u + uint32_t(r));
    EXPECT_EQ(w.ranks[r].deviceScalar, r == 2 ? deviceScalar : nullptr);
  }
  // The slots are ranks, as the caller orders them.
  std::swap(ranks[0], ranks[2]);
  ASSERT_EQ(kernels::localCollectiveOf(algo::Coll::AllReduce, 1001, ncclFloat32, 0, ranks, &w), ncclSuccess);
  EXPECT_EQ(w.ranks[0].in, in[2]);
  EXPECT_EQ(w.ranks[2].out, out[0]);
  std::swap(ranks[0], ranks[2]);
  // The jobs of the other collectives (NCCL's count: per rank for the gathers and scatters).
  ASSERT_EQ(kernels::localCollectiveOf(algo::Coll::ReduceScatter, 10, ncclFloat32, 0, ranks, &w), ncclSuccess);
  ASSERT_EQ(w.nJobs, 3u);
  for (uint32_t r = 0; r < 3; ++r) {
    EXPECT_EQ(w.jobs[r].from, 7u);
    EXPECT_EQ(w.jobs[r].to, 1u << r);
    EXPECT_EQ(w.jobs[r].srcOff, 10u * r);
    EXPECT_EQ(w.jobs[r].dstOff, 0u);
  }
  ASSERT_EQ(kernels::localCollectiveOf(algo::Coll::Reduce, 10, ncclFloat32, 2, ranks, &w), ncclSuccess);
  ASSERT_EQ(w.nJobs, 1u);
  EXPECT_EQ(w.jobs[0].from, 7u);
  EXPECT_EQ(w.jobs[0].to, 4u);
  EXPECT_EQ(kernels::localCollectiveOf(algo::Coll::Reduce, 10, ncclFloat32, 3, ranks, &w), ncclInvalidArgument);
  // Byte-moving collectives: the byte kernel, counts and offsets in bytes; a reducing kernel is refused.
  EXPECT_EQ(kernels::localCollectiveOf(algo::Coll::AllGather, 10, ncclFloat32, 0, ranks, &w), ncclInvalidArgument);
  std::vector<kernels::PackedKernel> bytes;
  for (int r = 0; r < 3; ++r) {
    kernels::OpWork op;
    op.type = ncclFloat64;
    op.reduces = false;
    op.buffers = {in[r], out[r]};
    pl[r] = PlannedLaunch{};
    pl[r].addOnlyOp(op, plans[size_t(r)]);
    kernels::PackedLaunch p;
    ASSERT_EQ(kernels::packLaunch(pl[r].launch, &p), ncclSuccess);
    bytes.push_back(p.kernels.at(0));
  }
  const std::vector<const kernels::PackedKernel*> byteRanks{&bytes[0], &bytes[1], &bytes[2]};
  ASSERT_EQ(kernels::localCollectiveOf(algo::Coll::AllGather, 10, ncclFloat64, 0, byteRanks, &w), ncclSuccess);
  EXPECT_EQ(w.type, kernels::ElemType::Uint8);
  EXPECT_EQ(w.count, 80u);
  ASSERT_EQ(w.nJobs, 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(w.jobs[i].from, 1u << i);
    EXPECT_EQ(w.jobs[i].to, 7u);
    EXPECT_EQ(w.jobs[i].srcOff, 0u);
    EXPECT_EQ(w.jobs[i].dstOff, 80u * i);
  }
  ASSERT_EQ(kernels::localCollectiveOf(algo::Coll::Broadcast, 10, ncclFloat64, 1, byteRanks, &w), ncclSuccess);
  ASSERT_EQ(w.nJobs, 1u);
  EXPECT_EQ(w.jobs[0].from, 2u);
  EXPECT_EQ(w.jobs[0].to, 7u);
  EXPECT_EQ(kernels::localCollectiveOf(algo::Coll::AlltoAll, 10, ncclFloat64, 0, byteRanks, &w), ncclInvalidArgument);

  // Another type, another op, a second op in one kernel, too many ranks.
  kernels::PackedKernel other = *ranks[1];
  other.type = kernels::ElemType::Int32;
  EXPECT_EQ(kernels::localCollectiveOf(algo::Coll::AllReduce, 1001, ncclFloat32, 0, {ranks[0], &other}, &w),
            ncclInvalidArgument);
  other = *ranks[1];
  kernels::DevOp op;
  std::memcpy(&op, other.blob.data() + other.index.ops, sizeof(op));
  op.kind = uint8_t(kernels::RedKind::Max);
  std::memcpy(other.blob.data() + other.index.ops, &op, sizeof(op));
  EXPECT_EQ(kernels::localCollectiveOf(algo::Coll::AllReduce, 1001, ncclFloat32, 0, {ranks[0], &other}, &w),
            ncclInvalidArgument);
  other = *ranks[1];
  other.index.nOps = 2;
  EXPECT_EQ(kernels::localCollectiveOf(algo::Coll::AllReduce, 1001, ncclFloat32, 0, {&other}, &w), ncclInvalidArgument);
  std::vector<const kernels::PackedKernel*> many(kernels::kMostLocalRanks + 1, ranks[0]);
  EXPECT_EQ(kernels::localCollectiveOf(algo::Coll::AllReduce, 1001, ncclFloat32, 0, many, &w), ncclInvalidArgument);
  many.pop_back();
  ASSERT_EQ(kernels::localCollectiveOf(algo::Coll::AllReduce, 1001, ncclFloat32, 0, many, &w), ncclSuccess);
  EXPECT_EQ(w.jobs[0].from, ~0u);
}

}  // namespace
}  // namespace braid::gputest
