// The verifier's static passes: each step on its own, connection matching, and races
// between lanes of one rank.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "algo/verifier_internal.h"

namespace braid::algo::verifier_detail {

namespace {

std::string str(uint64_t v) { return std::to_string(v); }

bool inBounds(const BufferView& v, uint64_t off, uint64_t count) { return off <= v.size && count <= v.size - off; }

// Checks one step in isolation; returns false when it is malformed.
bool checkStep(const Model& model, const std::vector<RankPlan>& plans, StepRef ref, Errors& errors) {
  const Step& s = plans[ref.rank].lanes[ref.lane].steps[ref.step];
  const RankModel& rm = model.ranks[ref.rank];
  const size_t before = errors.total();
  auto fail = [&](const std::string& what) { errors.add(where(model, plans, ref) + ": " + what); };
  const bool hasRecv = s.recvPeer != kNoPeer, hasSend = s.sendPeer != kNoPeer;
  const bool hasSrc = s.src != kNoBuf, hasDst = s.dst != kNoBuf;
  if (s.count == 0) fail("count 0 (algorithms must leave out empty steps)");
  if (s.flags & ~(kReduce | kFinal)) fail("unknown flags " + str(s.flags));
  for (int32_t peer : {s.recvPeer, s.sendPeer})
    if (peer != kNoPeer && (peer < 0 || peer >= model.nRanks)) fail("peer " + std::to_string(peer) + " is out of range");
  if (!hasRecv && !hasSrc) fail("no value: neither a recv nor a src");
  if (!hasSend && !hasDst) fail("discards its value: neither a dst nor a send");
  if (hasRecv && hasSrc && !(s.flags & kReduce)) fail("has a recv and a src but no kReduce");
  if ((s.flags & kReduce) && !(hasRecv && hasSrc)) fail("kReduce needs both a recv and a src");
  if (!model.reduces && (s.flags & (kReduce | kFinal))) fail("kReduce/kFinal in a collective that does not reduce");
  const BufferView* src = hasSrc ? rm.view(s.src) : nullptr;
  const BufferView* dst = hasDst ? rm.view(s.dst) : nullptr;
  if (hasSrc && !src) fail("reads buffer " + str(s.src) + ", which does not exist");
  if (hasDst && !dst) fail("writes buffer " + str(s.dst) + ", which does not exist");
  if (src && !inBounds(*src, s.srcOff, s.count))
    fail("reads " + bufRange(model, s.src, s.srcOff, s.count) + " beyond its size " + str(src->size));
  if (dst && !inBounds(*dst, s.dstOff, s.count))
    fail("writes " + bufRange(model, s.dst, s.dstOff, s.count) + " beyond its size " + str(dst->size));
  if (dst && dst->isInput) fail("writes the input buffer " + bufRange(model, s.dst, s.dstOff, s.count));
  if (src && dst && src->region == dst->region && errors.total() == before) {
    const uint64_t a = src->offset + s.srcOff, b = dst->offset + s.dstOff;
    if (a != b && a < b + s.count && b < a + s.count)
      fail("src and dst overlap at different offsets (executors may cut steps into slices in any order)");
  }
  return errors.total() == before;
}

}  // namespace

bool checkAndWire(const Model& model, const std::vector<RankPlan>& plans, Wiring* wiring, Errors& errors) {
  const size_t before = errors.total();
  std::map<std::tuple<int, int, int>, int> index;
  std::set<std::pair<int, int>> ownerConflicts;  // (connection, lane) already reported
  auto connection = [&](int channel, int sender, int receiver) {
    auto [it, fresh] = index.try_emplace({channel, sender, receiver}, static_cast<int>(wiring->connections.size()));
    if (fresh) {
      Connection c;
      c.channel = channel;
      c.sender = sender;
      c.receiver = receiver;
      wiring->connections.push_back(c);
    }
    return it->second;
  };
  auto own = [&](int conn, int& owner, int lane, StepRef ref, const char* what, int peer) {
    if (owner < 0) owner = lane;
    if (owner == lane || !ownerConflicts.insert({conn, lane}).second) return;
    errors.add(where(model, plans, ref) + ": lanes " + std::to_string(owner) + " and " + std::to_string(lane) +
               " of rank " + std::to_string(ref.rank) + " both " + what + " " + std::to_string(peer) +
               " on channel " + std::to_string(wiring->connections[conn].channel) +
               " (a connection has one lane at each end)");
  };

  wiring->steps.assign(model.nRanks, {});
  for (int r = 0; r < model.nRanks; ++r) {
    const auto& lanes = plans[r].lanes;
    wiring->steps[r].resize(lanes.size());
    for (int l = 0; l < static_cast<int>(lanes.size()); ++l) {
      const Lane& lane = lanes[l];
      wiring->steps[r][l].resize(lane.steps.size());
      if (lane.channel < 0) {
        errors.add("rank " + std::to_string(r) + " lane " + std::to_string(l) + ": negative channel " +
                   std::to_string(lane.channel));
        continue;
      }
      for (int i = 0; i < static_cast<int>(lane.steps.size()); ++i) {
        const StepRef ref{r, l, i};
        if (!checkStep(model, plans, ref, errors)) continue;
        const Step& s = lane.steps[i];
        StepConns& sc = wiring->steps[r][l][i];
        if (s.recvPeer != kNoPeer) {
          sc.recv = connection(lane.channel, s.recvPeer, r);
          Connection& c = wiring->connections[sc.recv];
          own(sc.recv, c.receiverLane, l, ref, "receive from", s.recvPeer);
          wiring->connections[sc.recv].recvs.push_back(ref);
        }
        if (s.sendPeer != kNoPeer) {
          sc.send = connection(lane.channel, r, s.sendPeer);
          Connection& c = wiring->connections[sc.send];
          own(sc.send, c.senderLane, l, ref, "send to", s.sendPeer);
          wiring->connections[sc.send].sends.push_back(ref);
        }
      }
    }
  }

  auto countOf = [&](StepRef ref) { return plans[ref.rank].lanes[ref.lane].steps[ref.step].count; };
  for (const Connection& c : wiring->connections) {
    if (c.sends.size() == c.recvs.size() && c.sends.empty()) continue;
    const std::string ch = " on channel " + std::to_string(c.channel);
    const size_t matched = std::min(c.sends.size(), c.recvs.size());
    for (size_t k = 0; k < matched; ++k) {
      const uint64_t sent = countOf(c.sends[k]), received = countOf(c.recvs[k]);
      if (sent == received) continue;
      errors.add(where(model, plans, c.recvs[k]) + ": recv from " + std::to_string(c.sender) + ch + " has count " +
                 str(received) + ", the matching send (" + where(model, plans, c.sends[k]) + ") has count " +
                 str(sent));
    }
    for (size_t k = matched; k < c.sends.size(); ++k)
      errors.add(where(model, plans, c.sends[k]) + ": send to " + std::to_string(c.receiver) + ch +
                 " has no matching recv (rank " + std::to_string(c.receiver) + " receives " + str(c.recvs.size()) +
                 " messages from " + std::to_string(c.sender) + ch + ")");
    for (size_t k = matched; k < c.recvs.size(); ++k)
      errors.add(where(model, plans, c.recvs[k]) + ": recv from " + std::to_string(c.sender) + ch +
                 " has no matching send (rank " + std::to_string(c.sender) + " sends " + str(c.sends.size()) +
                 " messages to " + std::to_string(c.receiver) + ch + ")");
  }
  return errors.total() == before;
}

void checkRaces(const Model& model, const std::vector<RankPlan>& plans, Errors& errors) {
  struct Access {
    int region;
    uint64_t begin, end;  // in region coordinates
    int lane, step;
    bool write;
    uint16_t buf;
    uint64_t off;  // in buffer coordinates
  };
  for (int r = 0; r < model.nRanks && !errors.full(); ++r) {
    const RankModel& rm = model.ranks[r];
    const auto& lanes = plans[r].lanes;
    if (lanes.size() < 2) continue;
    std::vector<Access> accesses;
    for (int l = 0; l < static_cast<int>(lanes.size()); ++l) {
      for (int i = 0; i < static_cast<int>(lanes[l].steps.size()); ++i) {
        const Step& s = lanes[l].steps[i];
        auto add = [&](uint16_t buf, uint64_t off, bool write) {
          const BufferView* v = rm.view(buf);
          if (!v || s.count == 0) return;
          const uint64_t begin = v->offset + off;
          accesses.push_back({v->region, begin, begin + s.count, l, i, write, buf, off});
        };
        if (s.src != kNoBuf) add(s.src, s.srcOff, false);
        if (s.dst != kNoBuf) add(s.dst, s.dstOff, true);
      }
    }
    // A lane may touch the same memory many times (a reduction chain into one block): merge
    // each lane's overlapping accesses of one kind first, so the sweep below stays linear.
    std::sort(accesses.begin(), accesses.end(), [](const Access& a, const Access& b) {
      return std::tie(a.region, a.lane, a.write, a.begin) < std::tie(b.region, b.lane, b.write, b.begin);
    });
    std::vector<Access> merged;
    for (const Access& a : accesses) {
      if (!merged.empty()) {
        Access& last = merged.back();
        if (last.region == a.region && last.lane == a.lane && last.write == a.write && a.begin <= last.end) {
          if (a.end > last.end && last.buf == a.buf) {
            last.end = a.end;
            continue;
          }
          if (a.end <= last.end) continue;
        }
      }
      merged.push_back(a);
    }
    accesses.swap(merged);
    std::sort(accesses.begin(), accesses.end(), [](const Access& a, const Access& b) {
      return std::tie(a.region, a.begin) < std::tie(b.region, b.begin);
    });
    std::set<std::pair<int, int>> reported;  // lane pairs
    std::vector<const Access*> active;
    for (const Access& x : accesses) {
      std::erase_if(active, [&](const Access* y) { return y->region != x.region || y->end <= x.begin; });
      for (const Access* y : active) {
        if (y->lane == x.lane || !(x.write || y->write)) continue;
        if (!reported.insert({std::min(x.lane, y->lane), std::max(x.lane, y->lane)}).second) continue;
        auto what = [&](const Access& a) {
          const uint64_t count = a.end - a.begin;
          return "lane " + std::to_string(a.lane) + " step " + std::to_string(a.step) + (a.write ? " writes " : " reads ") +
                 bufRange(model, a.buf, a.off, count);
        };
        errors.add("rank " + std::to_string(r) + ": " + what(*y) + " and " + what(x) +
                   ": the memory overlaps and nothing orders the two lanes (race)");
      }
      active.push_back(&x);
    }
  }
}

}  // namespace braid::algo::verifier_detail
