// Shared state of the verifier's passes (model setup, static checks, simulation, result
// check). Internal to src/algo.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "algo/schedule.h"
#include "algo/symbolic.h"
#include "algo/verifier.h"

namespace braid::algo::verifier_detail {

// How a buffer index of a plan maps onto a rank's memory.
struct BufferView {
  bool exists = false;
  bool isInput = false;
  int region = -1;
  uint64_t offset = 0;  // within the region
  uint64_t size = 0;
};

// What one output buffer must hold at the end: runs in the buffer's own coordinates.
struct Expectation {
  uint16_t buf = 0;
  Pieces pieces;
};

struct RankModel {
  std::vector<SymMemory> regions;
  std::vector<BufferView> buffers;  // by buffer index
  std::vector<Expectation> expected;
  const BufferView* view(uint16_t buf) const {
    return buf < buffers.size() && buffers[buf].exists ? &buffers[buf] : nullptr;
  }
};

struct Model {
  int nRanks = 0;
  bool reduces = false;  // contributions are summed (premul on input reads, kFinal)
  bool p2p = false;      // buffer names: send<i>/recv<i> instead of in/out
  std::vector<RankModel> ranks;
};

// A connection (channel, sender, receiver) and the steps that use it, in order.
struct StepRef {
  int rank = 0;
  int lane = 0;
  int step = 0;
};
struct Connection {
  int channel = 0, sender = 0, receiver = 0;
  int senderLane = -1, receiverLane = -1;
  std::vector<StepRef> sends, recvs;
};

// Where each step's recv and send go (indices into connections), per rank, lane, step.
struct StepConns {
  int recv = -1;
  int send = -1;
};

struct Wiring {
  std::vector<Connection> connections;
  std::vector<std::vector<std::vector<StepConns>>> steps;  // [rank][lane][step]
};

// Collects errors up to a limit.
class Errors {
 public:
  explicit Errors(size_t limit) : limit_(limit) {}
  void add(std::string message) {
    if (list_.size() < limit_) list_.push_back(std::move(message));
    ++total_;
  }
  bool full() const { return list_.size() >= limit_; }
  bool any() const { return total_ > 0; }
  size_t total() const { return total_; }
  std::vector<std::string> take() { return std::move(list_); }

 private:
  size_t limit_;
  size_t total_ = 0;
  std::vector<std::string> list_;
};

// "rank 3 lane 1 step 5 (recv<-2 reduce in[0..8) send->4)"
std::string where(const Model& model, const std::vector<RankPlan>& plans, StepRef ref);
std::string bufRange(const Model& model, uint16_t buf, uint64_t off, uint64_t count);

// verifier_model.cc
// The memory and expected outputs of a collective; false (with an error) when it can't be modelled.
bool buildCollModel(const CollArgs& base, bool inPlace, Model* model, Errors& errors);
bool buildP2pModel(int nRanks, const std::vector<std::vector<P2pOp>>& opsPerRank, Model* model, Errors& errors);
// Compares the final memory with the expectations.
void checkOutputs(const Model& model, Errors& errors);

// verifier_static.cc
// Checks every step on its own and wires up connections; false when the plans are too
// broken to simulate (malformed steps, unmatched or mismatched messages).
bool checkAndWire(const Model& model, const std::vector<RankPlan>& plans, Wiring* wiring, Errors& errors);
// Reports lanes of one rank that touch overlapping memory, one of them writing.
void checkRaces(const Model& model, const std::vector<RankPlan>& plans, Errors& errors);

// verifier_sim.cc
// Runs the plans; moves symbolic data; reports value errors and deadlocks.
void simulate(Model& model, const std::vector<RankPlan>& plans, const Wiring& wiring, const VerifyOptions& options,
              Errors& errors);

}  // namespace braid::algo::verifier_detail
