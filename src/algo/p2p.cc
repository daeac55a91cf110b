// buildP2p: one rank's sends and recvs of a group as lanes.
//
// NCCL matches the k-th send from A to B with the k-th recv at B from A. So all sends to one
// peer go, in order, into one lane, and all recvs from one peer into another: each
// connection (0, sender, receiver) then has exactly one lane at each end, and a send and a
// recv never wait on each other inside a lane (no deadlock whatever the peers' order).
// An op of several parts puts part p on channel p: per channel the k-th send still meets the
// k-th recv, as long as both ends cut the op alike (the same `parts`, from the same count).
// Sends to oneself pair up with recvs from oneself and become local copies, so executors
// need no loopback connection; unpaired or mismatched self ops stay as connection steps so
// that the verifier (and the runtime's checks) see the mismatch.
#include <map>
#include <tuple>
#include <utility>

#include "algo/schedule.h"

namespace braid::algo {

namespace {

bool selfOpsPairUp(const std::vector<P2pOp>& ops, int rank, std::vector<size_t>* sends,
                   std::vector<size_t>* recvs) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].peer != rank || ops[i].count == 0) continue;
    (ops[i].send ? sends : recvs)->push_back(i);
  }
  if (sends->size() != recvs->size()) return false;
  for (size_t k = 0; k < sends->size(); ++k)
    if (ops[(*sends)[k]].count != ops[(*recvs)[k]].count) return false;
  return true;
}

}  // namespace

RankPlan buildP2p(int rank, int nRanks, const std::vector<P2pOp>& ops) {
  (void)nRanks;
  RankPlan plan;
  std::vector<size_t> selfSends, selfRecvs;
  const bool selfAsCopies = selfOpsPairUp(ops, rank, &selfSends, &selfRecvs);

  // (send?, peer, channel) -> lane index, in order of first appearance.
  std::map<std::tuple<bool, int, int>, size_t> laneOf;
  auto laneFor = [&](bool send, int peer, int channel = 0) -> Lane& {
    auto [it, fresh] = laneOf.try_emplace({send, peer, channel}, plan.lanes.size());
    if (fresh) {
      plan.lanes.push_back(Lane{});
      plan.lanes.back().channel = channel;
    }
    return plan.lanes[it->second];
  };

  size_t nextSelfCopy = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2pOp& op = ops[i];
    if (op.count == 0) continue;  // NCCL drops empty sends and recvs; both sides skip them
    const auto sendBuf = static_cast<uint16_t>(2 * i);
    const auto recvBuf = static_cast<uint16_t>(2 * i + 1);
    if (op.peer == rank && selfAsCopies) {
      if (!op.send) continue;  // emitted with its send
      Step copy;
      copy.src = sendBuf;
      copy.dst = static_cast<uint16_t>(2 * selfRecvs[nextSelfCopy++] + 1);
      copy.count = op.count;
      // A dedicated lane (send = true, peer = -1) keeps self copies ordered among themselves.
      laneFor(true, kNoPeer).steps.push_back(copy);
      continue;
    }
    const uint64_t parts = op.parts < 1 ? 1 : op.parts;
    for (uint64_t part = 0; part < parts; ++part) {
      const uint64_t begin = op.count * part / parts, end = op.count * (part + 1) / parts;
      if (end == begin) continue;  // the other end skips the same empty part
      Step step;
      step.count = end - begin;
      if (op.send) {
        step.src = sendBuf;
        step.srcOff = begin;
        step.sendPeer = op.peer;
      } else {
        step.dst = recvBuf;
        step.dstOff = begin;
        step.recvPeer = op.peer;
      }
      laneFor(op.send, op.peer, static_cast<int>(part)).steps.push_back(step);
    }
  }
  return plan;
}

}  // namespace braid::algo
