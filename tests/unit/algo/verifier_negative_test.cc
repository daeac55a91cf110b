// Broken plans, each caught by the verifier with a message that says what and where.
#include <gtest/gtest.h>

#include "algo/algorithm.h"
#include "algo/verifier.h"

namespace braid::algo {
namespace {

CollArgs makeArgs(Coll coll, int n, uint64_t count) {
  CollArgs a;
  a.coll = coll;
  a.nRanks = n;
  a.count = count;
  return a;
}

std::vector<RankPlan> plansOf(const char* algo, const CollArgs& base) {
  std::vector<RankPlan> plans;
  for (int r = 0; r < base.nRanks; ++r) {
    CollArgs a = base;
    a.rank = r;
    plans.push_back(findAlgorithm(algo)->build(a));
  }
  return plans;
}

Lane lane(std::vector<Step> steps, int channel = 0) { return Lane{.channel = channel, .steps = std::move(steps)}; }

// Expects a failure whose errors include `needle`.
void expectError(const VerifyResult& r, const std::string& needle) {
  ASSERT_FALSE(r.ok) << "expected an error containing: " << needle;
  bool found = false;
  for (const std::string& e : r.errors) found = found || e.find(needle) != std::string::npos;
  EXPECT_TRUE(found) << "no error contains: " << needle << "\n" << r.summary();
}

TEST(VerifierNegative, ValidPlansPass) {
  const CollArgs a = makeArgs(Coll::AllReduce, 4, 16);
  const VerifyResult r = verifyPlans(a, plansOf("ring", a));
  EXPECT_TRUE(r.ok) << r.summary();
}

TEST(VerifierNegative, MissingSend) {
  const CollArgs a = makeArgs(Coll::AllReduce, 4, 16);
  auto plans = plansOf("ring", a);
  plans[0].lanes[0].steps.erase(plans[0].lanes[0].steps.begin());  // rank 0 never sends its first block
  expectError(verifyPlans(a, plans),
              "rank 1 lane 0 step 6 (recv<-0 store out[12..16)): recv from 0 on channel 0 has no matching send "
              "(rank 0 sends 5 messages to 1 on channel 0)");
}

TEST(VerifierNegative, UnconsumedMessage) {
  const CollArgs a = makeArgs(Coll::AllReduce, 2, 4);
  auto plans = plansOf("ring", a);
  plans[1].lanes[0].steps.push_back({.sendPeer = 0, .src = kInput, .count = 4});
  expectError(verifyPlans(a, plans), "rank 1 lane 0 step 3 (load in[0..4) send->0): send to 0 on channel 0 has no "
                                     "matching recv (rank 0 receives 2 messages from 1 on channel 0)");
}

TEST(VerifierNegative, CountMismatch) {
  const CollArgs a = makeArgs(Coll::AllGather, 2, 16);
  auto plans = plansOf("ring", a);
  Step& recv = plans[1].lanes[0].steps[1];  // recv<-0 store out[0..16)
  ASSERT_EQ(recv.recvPeer, 0);
  recv.count = 17;
  expectError(verifyPlans(a, plans),
              "rank 1 lane 0 step 1 (recv<-0 store out[0..17)): recv from 0 on channel 0 has count 17, the matching "
              "send (rank 0 lane 0 step 0 (load in[0..16) store out[0..16) send->1)) has count 16");
}

TEST(VerifierNegative, DoubleCountedContribution) {
  // Two ranks; rank 0 sends its finished sum back and rank 1 adds its own input again.
  const CollArgs a = makeArgs(Coll::AllReduce, 2, 4);
  std::vector<RankPlan> plans(2);
  plans[0].lanes = {lane({{.sendPeer = 1, .src = kInput, .count = 4},
                          {.recvPeer = 1, .sendPeer = 1, .src = kInput, .dst = kOutput, .flags = kReduce | kFinal,
                           .count = 4}})};
  plans[1].lanes = {lane({{.sendPeer = 0, .src = kInput, .count = 4},
                          {.recvPeer = 0, .src = kInput, .dst = kOutput, .flags = kReduce, .count = 4},
                          {.recvPeer = 0, .src = kInput, .dst = kOutput, .flags = kReduce, .count = 4}})};
  expectError(verifyPlans(a, plans), "rank 1 lane 0 step 2 (recv<-0 reduce in[0..4) store out[0..4)): elements [0..4) "
                                     "add to a value that already had kFinal applied");
  // The same without kFinal on rank 0: now the double count itself is the error.
  plans[0].lanes[0].steps[1].flags = kReduce;
  expectError(verifyPlans(a, plans), "count the contributions of ranks {1} twice");
}

TEST(VerifierNegative, MissingAndRepeatedFinal) {
  const CollArgs a = makeArgs(Coll::AllReduce, 4, 16);
  auto plans = plansOf("ring", a);
  plans[2].lanes[0].steps[3].flags = kReduce;  // rank 2 completes block 3 without kFinal
  expectError(verifyPlans(a, plans), "rank 2 out[12..16) holds the sum of ranks {0-3} at in[12..16), without kFinal, "
                                     "expected the sum of ranks {0-3} at in[12..16), final");
  plans = plansOf("ring", a);
  plans[2].lanes[0].steps[4].flags = kFinal;  // a forwarding step applies it again
  expectError(verifyPlans(a, plans), "rank 2 lane 0 step 4 (recv<-1 final store out[8..12) send->3): kFinal on "
                                     "elements [0..4) applies it a second time");
  plans = plansOf("ring", a);
  plans[2].lanes[0].steps[1].flags = kReduce | kFinal;  // too early
  expectError(verifyPlans(a, plans), "applies it to a partial sum: ranks {0,3} are missing");
}

TEST(VerifierNegative, DeadlockCycle) {
  // Both ranks receive before they send.
  const CollArgs a = makeArgs(Coll::AllReduce, 2, 4);
  std::vector<RankPlan> plans(2);
  for (int r = 0; r < 2; ++r)
    plans[r].lanes = {lane({{.recvPeer = 1 - r, .src = kInput, .dst = kOutput, .flags = kReduce | kFinal, .count = 4},
                            {.sendPeer = 1 - r, .src = kInput, .count = 4}})};
  expectError(verifyPlans(a, plans),
              "deadlock: 2 lanes blocked; cycle of waits: rank 0 lane 0 step 0 (recv<-1 reduce in[0..4) final store "
              "out[0..4)) waits for data from rank 1 on channel 0 -> rank 1 lane 0 step 0 (recv<-0 reduce in[0..4) "
              "final store out[0..4)) waits for data from rank 0 on channel 0 -> back to rank 0 lane 0");
}

TEST(VerifierNegative, DeadlockOnlyWithFiniteFifos) {
  // A ring whose steps fill the whole FIFO: every rank's first send fills the FIFO to its
  // successor, and no rank can then receive-and-send. Twice the room runs through.
  CollArgs a = makeArgs(Coll::AllReduce, 4, 1024);
  a.maxStepElems = 64;
  VerifyOptions options;
  options.sliceElems = 16;
  options.fifoSlices = 4;
  expectError(verify(a, *findAlgorithm("ring"), options), "waits for room to send to rank 1 on channel 0 (FIFO full, 4 slices)");
  options.fifoSlices = 8;
  const VerifyResult ok = verify(a, *findAlgorithm("ring"), options);
  EXPECT_TRUE(ok.ok) << ok.summary();
}

TEST(VerifierNegative, TwoLanesOnOneConnection) {
  const CollArgs a = makeArgs(Coll::AllGather, 2, 4);
  auto plans = plansOf("ring", a);
  Lane extra = lane({plans[0].lanes[0].steps[0]});
  extra.steps[0].dst = kNoBuf;  // just the send
  plans[0].lanes[0].steps.erase(plans[0].lanes[0].steps.begin());
  plans[0].lanes[0].steps.insert(plans[0].lanes[0].steps.begin(),
                                 {.src = kInput, .dst = kOutput, .count = 4});  // local copy
  plans[0].lanes.push_back(extra);
  plans[1].lanes[0].steps.push_back({.sendPeer = 0, .src = kInput, .count = 4});
  plans[0].lanes.push_back(lane({{.recvPeer = 1, .dst = kOutput, .dstOff = 4, .count = 4}}));
  expectError(verifyPlans(a, plans), "lanes 0 and 2 of rank 0 both receive from 1 on channel 0");
}

TEST(VerifierNegative, WrongBlockInGather) {
  const CollArgs a = makeArgs(Coll::AllGather, 3, 5);
  auto plans = plansOf("ring", a);
  plans[1].lanes[0].steps[1].dstOff = 10;  // rank 1 stores rank 0's block in rank 2's slot
  expectError(verifyPlans(a, plans), "rank 1 out[0..5) holds nothing (never written), expected rank 0's in[0..5)");
  plans = plansOf("ring", a);
  std::swap(plans[1].lanes[0].steps[1].dstOff, plans[1].lanes[0].steps[2].dstOff);
  expectError(verifyPlans(a, plans), "rank 1 out[0..5) holds rank 2's in[0..5), expected rank 0's in[0..5)");
}

TEST(VerifierNegative, MalformedSteps) {
  const CollArgs a = makeArgs(Coll::AllReduce, 2, 4);
  auto plans = plansOf("ring", a);
  plans[0].lanes[0].steps[0].count = 0;
  expectError(verifyPlans(a, plans), "rank 0 lane 0 step 0 (load in[0..0) send->1): count 0");
  plans = plansOf("ring", a);
  plans[0].lanes[0].steps[1].dst = kInput;
  expectError(verifyPlans(a, plans), "writes the input buffer in[2..4)");
  plans = plansOf("ring", a);
  plans[0].lanes[0].steps[2].dstOff = 3;
  expectError(verifyPlans(a, plans), "writes out[3..5) beyond its size 4");
  plans = plansOf("ring", a);
  plans[0].lanes[0].steps[1].flags = kFinal;
  expectError(verifyPlans(a, plans), "has a recv and a src but no kReduce");
  const CollArgs ag = makeArgs(Coll::AllGather, 2, 4);
  plans = plansOf("ring", ag);
  plans[0].lanes[0].steps[1].flags = kFinal;
  expectError(verifyPlans(ag, plans), "kReduce/kFinal in a collective that does not reduce");
}

TEST(VerifierNegative, ReadsUnwrittenOutput) {
  const CollArgs a = makeArgs(Coll::AllReduce, 2, 4);
  std::vector<RankPlan> plans(2);
  for (int r = 0; r < 2; ++r)
    plans[r].lanes = {lane({{.sendPeer = 1 - r, .src = kOutput, .count = 4},
                            {.recvPeer = 1 - r, .src = kInput, .dst = kOutput, .flags = kReduce | kFinal, .count = 4}})};
  expectError(verifyPlans(a, plans), "rank 0 lane 0 step 0 (load out[0..4) send->1): reads out[0..4) before anything "
                                     "was written there");
}

TEST(VerifierNegative, InPlaceHazards) {
  // One lane sends the input while another lane overwrites it with the result: fine out of
  // place, a race in place.
  const CollArgs a = makeArgs(Coll::AllReduce, 2, 4);
  std::vector<RankPlan> plans(2);
  for (int r = 0; r < 2; ++r)
    plans[r].lanes = {lane({{.sendPeer = 1 - r, .src = kInput, .count = 4}}),
                      lane({{.recvPeer = 1 - r, .src = kInput, .dst = kOutput, .flags = kReduce | kFinal, .count = 4}})};
  VerifyResult r = verifyPlans(a, plans);
  EXPECT_TRUE(r.ok) << r.summary();
  VerifyOptions inPlace;
  inPlace.inPlace = true;
  expectError(verifyPlans(a, plans, inPlace), "rank 0: lane 0 step 0 reads in[0..4) and lane 1 step 0 writes out[0..4): "
                                              "the memory overlaps and nothing orders the two lanes (race)");

  // One lane that reads input it has already overwritten (in place), and adds mismatched
  // indices (out of place).
  for (int k = 0; k < 2; ++k)
    plans[k].lanes = {lane({{.sendPeer = 1 - k, .src = kInput, .count = 2},
                            {.recvPeer = 1 - k, .src = kInput, .dst = kOutput, .flags = kReduce | kFinal, .count = 2},
                            {.sendPeer = 1 - k, .src = kInput, .srcOff = 1, .count = 2},
                            {.recvPeer = 1 - k, .src = kInput, .dst = kOutput, .flags = kReduce | kFinal,
                             .srcOff = 2, .dstOff = 2, .count = 2}})};
  expectError(verifyPlans(a, plans, inPlace), "rank 0 lane 0 step 2 (load in[1..3) send->1): reads in[1..2) after it "
                                              "was overwritten; it holds the sum of ranks {0,1} at in[1..2), final");
  expectError(verifyPlans(a, plans), "elements [0..2) add input index 1 (received) to input index 2");
}

TEST(VerifierNegative, RawDataThroughOutputIsNotAContribution) {
  // In place, reading the input through the output buffer skips the pre-multiply.
  const CollArgs a = makeArgs(Coll::Reduce, 2, 4);
  std::vector<RankPlan> plans(2);
  plans[0].lanes = {lane({{.recvPeer = 1, .src = kOutput, .dst = kOutput, .flags = kReduce | kFinal, .count = 4}})};
  plans[1].lanes = {lane({{.sendPeer = 0, .src = kInput, .count = 4}})};
  VerifyOptions inPlace;
  inPlace.inPlace = true;
  expectError(verifyPlans(a, plans, inPlace), "add rank 0's in[0..4), which was not read from an input buffer");
}

TEST(VerifierNegative, NoInPlaceAlltoAll) {
  VerifyOptions inPlace;
  inPlace.inPlace = true;
  expectError(verify(makeArgs(Coll::AlltoAll, 2, 4), *findAlgorithm("direct"), inPlace),
              "AlltoAll has no in-place form in NCCL");
  expectError(verify(makeArgs(Coll::AlltoAll, 2, 4), *findAlgorithm("ring")), "ring does not support AlltoAll");
}

}  // namespace
}  // namespace braid::algo
