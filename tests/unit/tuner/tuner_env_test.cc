// NCCL_ALGO / NCCL_PROTO parsing (src/algo/tuner_env.h): NCCL's syntax, and every malformed
// string refused with a message that names the token and the valid names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/tuner_env.h"

namespace braid::algo {
namespace {

AlgorithmSet bitOf(const char* name) {
  const auto& all = algorithms();
  for (size_t i = 0; i < all.size(); ++i)
    if (std::string(all[i]->name) == name) return AlgorithmSet{1} << i;
  ADD_FAILURE() << "no algorithm " << name;
  return 0;
}

constexpr ProtocolSet kLL = protocolBit(Protocol::LL), kLL128 = protocolBit(Protocol::LL128),
                      kSimple = protocolBit(Protocol::Simple);

TuningConstraints protos(const std::string& text) {
  TuningConstraints t;
  std::string error;
  EXPECT_TRUE(parseProtocolList(text, &t, &error)) << text << ": " << error;
  return t;
}

TuningConstraints algos(const std::string& text, std::vector<std::string>* notes = nullptr) {
  TuningConstraints t;
  std::string error;
  EXPECT_TRUE(parseAlgorithmList(text, &t, notes, &error)) << text << ": " << error;
  return t;
}

// The error for a bad value, after checking that the constraints were left alone.
std::string protoError(const std::string& text) {
  TuningConstraints t;
  t.protocols[static_cast<size_t>(Coll::AllReduce)] = kLL;  // a mark the failed parse must keep
  std::string error;
  EXPECT_FALSE(parseProtocolList(text, &t, &error)) << "accepted: \"" << text << "\"";
  EXPECT_EQ(t.protocolsFor(Coll::AllReduce), kLL) << text;
  EXPECT_EQ(t.protocolsFor(Coll::AllGather), kAllProtocols) << text;
  EXPECT_NE(error.find("NCCL_PROTO"), std::string::npos) << error;
  return error;
}

std::string algoError(const std::string& text) {
  TuningConstraints t;
  std::string error;
  EXPECT_FALSE(parseAlgorithmList(text, &t, nullptr, &error)) << "accepted: \"" << text << "\"";
  for (Coll c : tunableCollectives()) EXPECT_EQ(t.algorithmsFor(c), kAllAlgorithms) << text;
  EXPECT_NE(error.find("NCCL_ALGO"), std::string::npos) << error;
  return error;
}

void expectMentions(const std::string& error, std::initializer_list<const char*> words) {
  for (const char* w : words) EXPECT_NE(error.find(w), std::string::npos) << "\"" << w << "\" not in: " << error;
}

TEST(TunerEnv, UnsetOrBlankConstrainsNothing) {
  for (const char* text : {"", " ", "\t  "}) {
    TuningConstraints t = protos(text);
    for (Coll c : tunableCollectives()) EXPECT_EQ(t.protocolsFor(c), kAllProtocols);
    t = algos(text);
    for (Coll c : tunableCollectives()) EXPECT_EQ(t.algorithmsFor(c), kAllAlgorithms);
  }
  TuningConstraints t;
  std::string error;
  EXPECT_TRUE(parseTuningEnv(nullptr, nullptr, &t, nullptr, &error));
  for (Coll c : tunableCollectives()) EXPECT_EQ(t.protocolsFor(c), kAllProtocols);
}

TEST(TunerEnv, ProtocolListsIncludeOrExcludeForEveryCollective) {
  TuningConstraints t = protos("LL,Simple");
  for (Coll c : tunableCollectives()) EXPECT_EQ(t.protocolsFor(c), kLL | kSimple) << collName(c);
  t = protos("^LL128");
  for (Coll c : tunableCollectives()) EXPECT_EQ(t.protocolsFor(c), kLL | kSimple) << collName(c);
  t = protos("^LL,LL128");
  EXPECT_EQ(t.protocolsFor(Coll::SendRecv), kSimple);
  // Case and spaces around names and separators do not matter.
  EXPECT_EQ(protos("  ll , SIMPLE ").protocolsFor(Coll::Broadcast), kLL | kSimple);
  EXPECT_EQ(protos("^ ll128").protocolsFor(Coll::Broadcast), kLL | kSimple);
  EXPECT_EQ(protos("sImPlE").protocolsFor(Coll::AllReduce), kSimple);
  EXPECT_EQ(protos("LL,LL").protocolsFor(Coll::AllReduce), kLL);  // a repeat is harmless
  // Excluding everything parses; the tuner then warns and uses its default (tuner_test).
  EXPECT_EQ(protos("^LL,LL128,Simple").protocolsFor(Coll::AllReduce), 0);
}

TEST(TunerEnv, PartsPerCollectiveOverrideTheBareList) {
  TuningConstraints t = protos("allreduce:LL;allgather:^LL");
  EXPECT_EQ(t.protocolsFor(Coll::AllReduce), kLL);
  EXPECT_EQ(t.protocolsFor(Coll::AllGather), kLL128 | kSimple);
  EXPECT_EQ(t.protocolsFor(Coll::Broadcast), kAllProtocols);
  // A bare part applies to the rest, before or after the named parts.
  for (const char* text : {"Simple;allreduce:LL", "allreduce:LL;Simple", " allreduce : LL ; Simple "}) {
    t = protos(text);
    EXPECT_EQ(t.protocolsFor(Coll::AllReduce), kLL) << text;
    for (Coll c : {Coll::Broadcast, Coll::Reduce, Coll::AllGather, Coll::ReduceScatter, Coll::AlltoAll, Coll::Gather,
                   Coll::Scatter, Coll::SendRecv})
      EXPECT_EQ(t.protocolsFor(c), kSimple) << text << " " << collName(c);
  }
  // Every collective by name, any case; sendrecv too for protocols.
  t = protos("BROADCAST:LL;Reduce:LL;allGather:LL;reducescatter:LL;alltoall:LL;gather:LL;scatter:LL;sendrecv:LL");
  for (Coll c : tunableCollectives())
    EXPECT_EQ(t.protocolsFor(c), c == Coll::AllReduce ? kAllProtocols : kLL) << collName(c);
}

TEST(TunerEnv, AlgorithmListsUseBraidsNamesPerCollective) {
  TuningConstraints t = algos("allreduce:ring;allgather:direct");
  EXPECT_EQ(t.algorithmsFor(Coll::AllReduce), bitOf("ring"));
  EXPECT_EQ(t.algorithmsFor(Coll::AllGather), bitOf("direct"));
  EXPECT_EQ(t.algorithmsFor(Coll::ReduceScatter), kAllAlgorithms);
  t = algos("Ring,TwoShot");
  for (Coll c : tunableCollectives())
    EXPECT_EQ(t.algorithmsFor(c), c == Coll::SendRecv ? kAllAlgorithms : (bitOf("ring") | bitOf("twoshot"))) << collName(c);
  t = algos("^direct");
  EXPECT_EQ(t.algorithmsFor(Coll::AllReduce) & (bitOf("ring") | bitOf("direct") | bitOf("twoshot")),
            bitOf("ring") | bitOf("twoshot"));
}

TEST(TunerEnv, NcclAlgorithmsBraidLacksAreIgnoredWithANote) {
  std::vector<std::string> notes;
  TuningConstraints t = algos("PAT", &notes);
  EXPECT_EQ(t.algorithmsFor(Coll::AllReduce), kAllAlgorithms);  // names nothing braid has
  ASSERT_FALSE(notes.empty());
  bool saysPat = false, saysNoConstraint = false;
  for (const std::string& n : notes) {
    saysPat = saysPat || n.find("\"PAT\" accepted and ignored") != std::string::npos;
    saysNoConstraint = saysNoConstraint || n.find("no constraint") != std::string::npos;
  }
  EXPECT_TRUE(saysPat && saysNoConstraint);
  notes.clear();
  // NCCL's Tree is braid's tree now: a constraint, not a note.
  t = algos("Tree", &notes);
  EXPECT_EQ(t.algorithmsFor(Coll::AllReduce), bitOf("tree"));
  EXPECT_TRUE(notes.empty());
  t = algos("Ring,nvls,NVLSTree,CollNetDirect,collnetchain,PAT", &notes);
  EXPECT_EQ(t.algorithmsFor(Coll::AllReduce), bitOf("ring"));
  EXPECT_EQ(notes.size(), 5u);  // one per ignored name
  notes.clear();
  t = algos("^NVLS", &notes);  // common with NCCL on shared hosts: excludes nothing of braid's
  EXPECT_EQ(t.algorithmsFor(Coll::AllReduce), kAllAlgorithms);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("multicast"), std::string::npos) << notes[0];
}

TEST(TunerEnv, UnknownNamesAreNamedWithTheValidOnes) {
  expectMentions(protoError("LL,Foo"), {"\"Foo\"", "LL, LL128, Simple"});
  expectMentions(protoError("LL128x"), {"\"LL128x\"", "LL, LL128, Simple"});
  expectMentions(protoError("Ring"), {"\"Ring\"", "valid names"});  // an algorithm is not a protocol
  expectMentions(algoError("fancy"), {"\"fancy\"", "ring, direct, twoshot, tree", "PAT"});
  expectMentions(algoError("LL"), {"\"LL\"", "ring"});  // a protocol is not an algorithm
  expectMentions(algoError("allreduce:ring:direct"), {"\"ring:direct\""});
  expectMentions(protoError("allreduce:LL,LL129"), {"\"LL129\""});
}

TEST(TunerEnv, EmptyNamesAndPartsAreRefused) {
  for (const char* text : {"LL,,Simple", "LL,", ",LL", "LL, ,Simple", "allreduce:LL,"})
    expectMentions(protoError(text), {"empty name", "LL, LL128, Simple"});
  for (const char* text : {"LL;;Simple", "LL;", ";LL", " ; ", "allreduce:LL;"})
    expectMentions(protoError(text), {"empty part"});
  expectMentions(algoError("ring,,direct"), {"empty name"});
}

TEST(TunerEnv, CaretsAreRefusedWhereTheyMeanNothing) {
  for (const char* text : {"^", " ^ ", "allreduce:^"}) expectMentions(protoError(text), {"\"^\" excludes nothing"});
  expectMentions(protoError("^,LL"), {"empty name"});
  expectMentions(protoError("LL,^Simple"), {"may only start a list", "\"Simple\""});
  expectMentions(protoError("^LL,^Simple"), {"may only start a list"});
  expectMentions(algoError("^"), {"excludes nothing"});
}

TEST(TunerEnv, CollectivePartsMustNameAKnownCollectiveAndAList) {
  for (const char* text : {"allreduce:", "allreduce: ", "AllReduce :"})
    expectMentions(protoError(text), {"names no protocols", "LL, LL128, Simple"});
  expectMentions(protoError("allreduce:"), {"\"allreduce:\""});
  expectMentions(protoError(":LL"), {"empty collective name", "allreduce"});
  expectMentions(protoError("allreduc:LL"), {"unknown collective \"allreduc\"", "allreduce", "sendrecv"});
  expectMentions(protoError("tree:LL"), {"unknown collective \"tree\""});
  expectMentions(algoError("sendrecv:ring"), {"sendrecv has no algorithms", "allreduce"});
  expectMentions(algoError("foo:ring"), {"unknown collective \"foo\""});
  EXPECT_EQ(algoError("foo:ring").find("sendrecv"), std::string::npos);  // not offered for NCCL_ALGO
}

TEST(TunerEnv, TwoListsForTheSameCollectivesAreRefused) {
  // "LL;Simple" most likely meant "LL,Simple": say so rather than keep one of them.
  expectMentions(protoError("LL;Simple"), {"two lists for all collectives", "\"LL\"", "\"Simple\"", "LL,Simple"});
  expectMentions(protoError("allreduce:LL;AllReduce:Simple"), {"two lists for AllReduce"});
  expectMentions(algoError("ring;direct"), {"two lists"});
}

TEST(TunerEnv, BothVariablesTogether) {
  TuningConstraints t;
  std::vector<std::string> notes;
  std::string error;
  ASSERT_TRUE(parseTuningEnv("allreduce:direct;PAT", "^LL128", &t, &notes, &error)) << error;
  EXPECT_EQ(t.algorithmsFor(Coll::AllReduce), bitOf("direct"));
  EXPECT_EQ(t.algorithmsFor(Coll::AllGather), kAllAlgorithms);  // "PAT" alone constrains nothing
  EXPECT_EQ(t.protocolsFor(Coll::AllGather), kLL | kSimple);
  EXPECT_FALSE(notes.empty());
  // One bad variable: nothing of either is kept.
  TuningConstraints u;
  EXPECT_FALSE(parseTuningEnv("ring", "LL,Bogus", &u, nullptr, &error));
  EXPECT_NE(error.find("\"Bogus\""), std::string::npos) << error;
  EXPECT_EQ(u.algorithmsFor(Coll::AllReduce), kAllAlgorithms);
  EXPECT_FALSE(parseTuningEnv("Bogus", "LL", &u, nullptr, &error));
  EXPECT_NE(error.find("NCCL_ALGO"), std::string::npos) << error;
  EXPECT_EQ(u.protocolsFor(Coll::AllReduce), kAllProtocols);
}

TEST(TunerEnv, SetsReadBack) {
  EXPECT_EQ(describeProtocols(kLL | kSimple), "LL, Simple");
  EXPECT_EQ(describeProtocols(0), "none");
  EXPECT_EQ(describeAlgorithms(bitOf("ring") | bitOf("twoshot")), "ring, twoshot");
  EXPECT_EQ(describeAlgorithms(kAllAlgorithms), "ring, direct, twoshot, tree, doubling");
}

}  // namespace
}  // namespace braid::algo
