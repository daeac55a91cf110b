// The schedule IR: what one rank does for one collective, as lanes of steps.
//
// An algorithm is a pure function from CollArgs to a RankPlan. Three consumers share it:
// the verifier (symbolic execution for any rank count), the CPU engine (host memory) and
// the GPU executor (device memory). Nothing here knows about data types, reduction ops,
// memory kinds or transports.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace braid::algo {

// The first five match ncclFunc_t's numbering.
enum class Coll : uint8_t {
  Broadcast = 0, Reduce = 1, AllGather = 2, ReduceScatter = 3, AllReduce = 4,
  SendRecv = 5, AlltoAll = 8, Scatter = 9, Gather = 10,
};
const char* collName(Coll c);
// Collectives whose output combines several ranks' inputs with the reduction op.
bool collReduces(Coll c);

constexpr int32_t kNoPeer = -1;
constexpr uint16_t kNoBuf = 0xffff;
// Buffer indices used by collective schedules. P2P plans use 2*i and 2*i+1 for op i.
constexpr uint16_t kInput = 0;
constexpr uint16_t kOutput = 1;

// Step flags.
constexpr uint8_t kReduce = 0x1;  // value = recv (op) src; both must be present
constexpr uint8_t kFinal = 0x2;   // value is a complete reduction: apply the post-op (e.g. integer avg)

// One step, applied element-wise to `count` elements:
//   value  = recv from recvPeer            (if recvPeer != kNoPeer)
//   value  = src[srcOff..]                  (if src != kNoBuf and no recv)
//   value  = op(recv, src[srcOff..])        (if both, and flags has kReduce)
//   value  = postOp(value)                  (if flags has kFinal)
//   dst[dstOff..] = value                   (if dst != kNoBuf)
//   send value to sendPeer                  (if sendPeer != kNoPeer)
// Reading an input buffer (kInput, or an even P2P index) reads a rank's raw contribution:
// executors apply the pre-multiply of PreMulSum/Avg there. Offsets and counts are in elements.
// Executors may cut a step into slices; the k-th send on a connection must have the same
// count as the k-th recv on it (the verifier checks this). Algorithms emit no steps with
// count 0 (the verifier rejects them), so executors never see empty messages.
struct Step {
  int32_t recvPeer = kNoPeer;
  int32_t sendPeer = kNoPeer;
  uint16_t src = kNoBuf;
  uint16_t dst = kNoBuf;
  uint8_t flags = 0;
  uint64_t srcOff = 0;
  uint64_t dstOff = 0;
  uint64_t count = 0;
};

// A lane is an ordered list of steps that runs independently of the rank's other lanes
// (a CUDA block on the GPU; a progress slot in the CPU engine). Data moves over
// connections identified by (channel, sender, receiver): on one connection, only one lane
// of the sender sends and only one lane of the receiver receives.
struct Lane {
  int32_t channel = 0;
  std::vector<Step> steps;
};

struct RankPlan {
  std::vector<Lane> lanes;
};

struct CollArgs {
  Coll coll = Coll::AllReduce;
  int nRanks = 1;
  int rank = 0;
  uint64_t count = 0;      // NCCL's count argument (per rank for AllGather/ReduceScatter/AlltoAll/...)
  int root = 0;            // Broadcast, Reduce, Gather, Scatter
  int nChannels = 1;       // lanes the algorithm may use for the collective
  uint32_t alignElems = 1; // prefer block boundaries at multiples of this (vector width)
  std::vector<int> ring;   // rank order for ring algorithms (a permutation of 0..nRanks-1); empty = identity
  // The node (host) of every rank, ids in order of first appearance by rank (0 = rank 0's node);
  // empty (or not nRanks long) = one node. The same on every rank. The tree algorithm uses it.
  std::vector<int> nodeOf;
  // The most elements one step may carry (0 = no limit). Executors set it to half of what a
  // connection's FIFO holds; algorithms then loop over chunks, so that a step's send never
  // has to wait for the receiver to start and lanes can't deadlock on full FIFOs.
  uint64_t maxStepElems = 0;
};

// Elements in the input and output buffers of one rank for a collective (NCCL's sizes).
uint64_t inputCount(Coll c, uint64_t count, int nRanks, int rank, int root);
uint64_t outputCount(Coll c, uint64_t count, int nRanks, int rank, int root);

// One send or recv of a P2P group; buffer index 2*i (send) or 2*i+1 (recv) for op i.
// `parts` > 1 cuts the op into that many contiguous parts on channels 0..parts-1 (one lane
// each, so they move in parallel); a send and its matching recv must use the same parts.
struct P2pOp {
  bool send = true;
  int peer = 0;
  uint64_t count = 0;
  uint32_t parts = 1;
};
// All P2P ops of one rank in one group, as independent lanes on P2P channels.
RankPlan buildP2p(int rank, int nRanks, const std::vector<P2pOp>& ops);

// A readable text form of a plan (braid-sched, BRAID_DUMP_SCHEDULE).
std::string dump(const RankPlan& plan, const CollArgs& args);
// One step as text, as in dump(): "recv<-2 reduce in[1024..2048) send->0".
std::string dumpStep(const Step& step, const CollArgs& args);
// Prints dump(plan, args) to stderr when the environment has BRAID_DUMP_SCHEDULE=1.
void maybeDumpSchedule(const CollArgs& args, const RankPlan& plan);

}  // namespace braid::algo
