// The verifier's model of each rank's buffers (with NCCL's in-place aliasing) and of what
// each output must hold at the end.
#include <map>
#include <utility>

#include "algo/verifier_internal.h"

namespace braid::algo::verifier_detail {

namespace {

bool rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}

// Where input and output live: one region each, or one shared region in-place.
struct Layout {
  bool shared = false;
  uint64_t regionSize = 0;
  uint64_t inOff = 0, outOff = 0;
};

Layout inPlaceLayout(const CollArgs& a, int rank, uint64_t inSize, uint64_t outSize) {
  const uint64_t blockAt = static_cast<uint64_t>(rank) * a.count;
  const uint64_t rootAt = static_cast<uint64_t>(a.root) * a.count;
  switch (a.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
    case Coll::Broadcast: return {true, std::max(inSize, outSize), 0, 0};  // sendbuff == recvbuff
    case Coll::AllGather: return {true, outSize, blockAt, 0};              // sendbuff == recvbuff + rank*count
    case Coll::ReduceScatter: return {true, inSize, 0, blockAt};           // recvbuff == sendbuff + rank*count
    case Coll::Gather:
      if (rank == a.root) return {true, outSize, rootAt, 0};               // sendbuff == recvbuff + root*count
      break;
    case Coll::Scatter:
      if (rank == a.root) return {true, inSize, 0, rootAt};               // recvbuff == sendbuff + root*count
      break;
    default: break;
  }
  return {};
}

Pieces expectedOutput(const CollArgs& a, int rank, const RankSet& all) {
  Pieces out;
  const uint64_t n = static_cast<uint64_t>(a.nRanks), count = a.count;
  const int64_t blockAt = static_cast<int64_t>(rank) * static_cast<int64_t>(count);
  auto perRank = [&](auto symOf) {
    for (uint64_t k = 0; k < n; ++k) appendPiece(out, count, symOf(static_cast<int>(k)));
  };
  switch (a.coll) {
    case Coll::AllReduce: appendPiece(out, count, Sym::sum(all, 0, 1)); break;
    case Coll::Reduce:
      if (rank == a.root) appendPiece(out, count, Sym::sum(all, 0, 1));
      break;
    case Coll::ReduceScatter: appendPiece(out, count, Sym::sum(all, blockAt, 1)); break;
    case Coll::AllGather: perRank([](int k) { return Sym::raw(k, kInput, 0); }); break;
    case Coll::Broadcast: appendPiece(out, count, Sym::raw(a.root, kInput, 0)); break;
    case Coll::AlltoAll: perRank([&](int k) { return Sym::raw(k, kInput, blockAt); }); break;
    case Coll::Gather:
      if (rank == a.root) perRank([](int k) { return Sym::raw(k, kInput, 0); });
      break;
    case Coll::Scatter: appendPiece(out, count, Sym::raw(a.root, kInput, blockAt)); break;
    default: break;
  }
  return out;
}

}  // namespace

bool buildCollModel(const CollArgs& a, bool inPlace, Model* model, Errors& errors) {
  const int n = a.nRanks;
  if (n < 1 || n > kMaxRanks) {
    errors.add("nRanks " + std::to_string(n) + " is outside 1.." + std::to_string(kMaxRanks));
    return false;
  }
  if (a.coll == Coll::SendRecv) {
    errors.add("SendRecv plans are verified with verifyP2p");
    return false;
  }
  if (rooted(a.coll) && (a.root < 0 || a.root >= n)) {
    errors.add("root " + std::to_string(a.root) + " is outside 0.." + std::to_string(n - 1));
    return false;
  }
  if (inPlace && !collHasInPlace(a.coll)) {
    errors.add(std::string(collName(a.coll)) + " has no in-place form in NCCL");
    return false;
  }
  model->nRanks = n;
  model->reduces = collReduces(a.coll);
  model->p2p = false;
  model->ranks.assign(n, RankModel{});
  RankSet all;
  for (int r = 0; r < n; ++r) all.set(r);
  for (int r = 0; r < n; ++r) {
    RankModel& rm = model->ranks[r];
    const uint64_t inSize = inputCount(a.coll, a.count, n, r, a.root);
    const uint64_t outSize = outputCount(a.coll, a.count, n, r, a.root);
    const Layout layout = inPlace ? inPlaceLayout(a, r, inSize, outSize) : Layout{};
    rm.buffers.assign(2, BufferView{});
    if (layout.shared) {
      rm.regions.emplace_back(layout.regionSize, Sym::undef());
      rm.buffers[kInput] = {true, true, 0, layout.inOff, inSize};
      rm.buffers[kOutput] = {true, false, 0, layout.outOff, outSize};
    } else {
      rm.regions.emplace_back(inSize, Sym::undef());
      rm.regions.emplace_back(outSize, Sym::undef());
      rm.buffers[kInput] = {true, true, 0, 0, inSize};
      rm.buffers[kOutput] = {true, false, 1, 0, outSize};
    }
    rm.regions[rm.buffers[kInput].region].fill(rm.buffers[kInput].offset, inSize, Sym::raw(r, kInput, 0));
    rm.expected.push_back({kOutput, expectedOutput(a, r, all)});
  }
  return true;
}

bool buildP2pModel(int nRanks, const std::vector<std::vector<P2pOp>>& opsPerRank, Model* model, Errors& errors) {
  if (nRanks < 1 || nRanks > kMaxRanks || static_cast<int>(opsPerRank.size()) != nRanks) {
    errors.add("P2P verification needs 1.." + std::to_string(kMaxRanks) + " ranks and one op list per rank");
    return false;
  }
  model->nRanks = nRanks;
  model->reduces = false;
  model->p2p = true;
  model->ranks.assign(nRanks, RankModel{});
  // The k-th non-empty send from s to r, as an op index of s.
  std::map<std::pair<int, int>, std::vector<size_t>> sendsOf;
  for (int s = 0; s < nRanks; ++s) {
    const auto& ops = opsPerRank[s];
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].peer < 0 || ops[i].peer >= nRanks) {
        errors.add("rank " + std::to_string(s) + " op " + std::to_string(i) + ": peer " +
                   std::to_string(ops[i].peer) + " is out of range");
        return false;
      }
      if (ops[i].send && ops[i].count > 0) sendsOf[{s, ops[i].peer}].push_back(i);
    }
  }
  bool ok = true;
  for (int r = 0; r < nRanks; ++r) {
    const auto& ops = opsPerRank[r];
    RankModel& rm = model->ranks[r];
    rm.buffers.assign(2 * ops.size(), BufferView{});
    std::map<int, size_t> recvsSoFar;
    for (size_t i = 0; i < ops.size(); ++i) {
      const P2pOp& op = ops[i];
      const auto buf = static_cast<uint16_t>(op.send ? 2 * i : 2 * i + 1);
      rm.buffers[buf] = {true, op.send, static_cast<int>(rm.regions.size()), 0, op.count};
      rm.regions.emplace_back(op.count, op.send ? Sym::raw(r, buf, 0) : Sym::undef());
      if (op.send || op.count == 0) continue;
      const size_t k = recvsSoFar[op.peer]++;
      const auto& sends = sendsOf[{op.peer, r}];
      const std::string what = "rank " + std::to_string(r) + " op " + std::to_string(i) + " (recv " +
                               std::to_string(op.count) + " from " + std::to_string(op.peer) + ")";
      if (k >= sends.size()) {
        errors.add(what + ": rank " + std::to_string(op.peer) + " has only " + std::to_string(sends.size()) +
                   " non-empty sends to " + std::to_string(r));
        ok = false;
        continue;
      }
      const P2pOp& send = opsPerRank[op.peer][sends[k]];
      if (send.count != op.count) {
        errors.add(what + ": the matching send (op " + std::to_string(sends[k]) + ") has count " +
                   std::to_string(send.count));
        ok = false;
        continue;
      }
      rm.expected.push_back({buf, Pieces{{op.count, Sym::raw(op.peer, static_cast<uint16_t>(2 * sends[k]), 0)}}});
    }
  }
  return ok;
}

std::string bufRange(const Model& model, uint16_t buf, uint64_t off, uint64_t count) {
  CollArgs naming;
  naming.coll = model.p2p ? Coll::SendRecv : Coll::AllReduce;
  Step s;
  s.dst = buf;
  s.dstOff = off;
  s.count = count;
  std::string text = dumpStep(s, naming);  // "store out[a..b)"
  return text.substr(text.find(' ') + 1);
}

std::string where(const Model& model, const std::vector<RankPlan>& plans, StepRef ref) {
  CollArgs naming;
  naming.coll = model.p2p ? Coll::SendRecv : Coll::AllReduce;
  const Step& s = plans[ref.rank].lanes[ref.lane].steps[ref.step];
  return "rank " + std::to_string(ref.rank) + " lane " + std::to_string(ref.lane) + " step " +
         std::to_string(ref.step) + " (" + dumpStep(s, naming) + ")";
}

void checkOutputs(const Model& model, Errors& errors) {
  const auto name = [&model](uint16_t buf) {
    std::string text = bufRange(model, buf, 0, 0);
    return text.substr(0, text.find('['));
  };
  for (int r = 0; r < model.nRanks && !errors.full(); ++r) {
    const RankModel& rm = model.ranks[r];
    for (const Expectation& want : rm.expected) {
      const BufferView& v = rm.buffers[want.buf];
      const Pieces got = rm.regions[v.region].read(v.offset, v.size);
      zipPieces(got, want.pieces, [&](uint64_t pos, uint64_t len, const Sym& have, const Sym& expect) {
        if (have == expect || have.kind == Sym::Kind::Poison || errors.full()) return;
        std::string msg = "rank " + std::to_string(r) + " " + bufRange(model, want.buf, pos, len) + " holds " +
                          describe(have, len, model.nRanks, name) + ", expected " +
                          describe(expect, len, model.nRanks, name);
        if (have.kind == Sym::Kind::Sum && expect.kind == Sym::Kind::Sum && have.delta == expect.delta &&
            have.ranks != expect.ranks && (have.ranks & ~expect.ranks).none())
          msg += " (missing ranks " + formatRanks(expect.ranks & ~have.ranks, model.nRanks) + ")";
        errors.add(msg);
      });
    }
  }
}

}  // namespace braid::algo::verifier_detail
