// The text form of a plan, one line per step:
//   lane 0 ch 0 | step 3: recv<-2 reduce in[1024..2048) final store out[0..1024) send->0
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "algo/schedule.h"

namespace braid::algo {

namespace {

std::string bufferName(uint16_t buf, const CollArgs& args) {
  if (args.coll == Coll::SendRecv) return (buf % 2 == 0 ? "send" : "recv") + std::to_string(buf / 2);
  if (buf == kInput) return "in";
  if (buf == kOutput) return "out";
  return "buf" + std::to_string(buf);
}

std::string range(uint16_t buf, uint64_t off, uint64_t count, const CollArgs& args) {
  return bufferName(buf, args) + "[" + std::to_string(off) + ".." + std::to_string(off + count) + ")";
}

}  // namespace

std::string dumpStep(const Step& s, const CollArgs& args) {
  std::string out;
  auto add = [&out](const std::string& word) {
    if (!out.empty()) out += ' ';
    out += word;
  };
  if (s.recvPeer != kNoPeer) add("recv<-" + std::to_string(s.recvPeer));
  if (s.src != kNoBuf) {
    const bool reduce = s.recvPeer != kNoPeer && (s.flags & kReduce);
    add(std::string(reduce ? "reduce " : "load ") + range(s.src, s.srcOff, s.count, args));
  }
  if (s.flags & kFinal) add("final");
  if (s.dst != kNoBuf) add("store " + range(s.dst, s.dstOff, s.count, args));
  if (s.sendPeer != kNoPeer) add("send->" + std::to_string(s.sendPeer));
  if (s.src == kNoBuf && s.dst == kNoBuf) add(std::string("[") + std::to_string(s.count) + "]");
  // Flags that the words above don't show (kReduce without both operands, unknown bits).
  const bool reduceShown = s.recvPeer != kNoPeer && s.src != kNoBuf;
  const uint8_t hidden = static_cast<uint8_t>(s.flags & ~kFinal & ~(reduceShown ? kReduce : 0));
  if (hidden) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "flags=0x%x", hidden);
    add(hex);
  }
  return out;
}

std::string dump(const RankPlan& plan, const CollArgs& args) {
  size_t steps = 0;
  for (const Lane& lane : plan.lanes) steps += lane.steps.size();
  std::string text = "# " + std::string(collName(args.coll)) + " rank " + std::to_string(args.rank) + "/" +
                     std::to_string(args.nRanks) + " count " + std::to_string(args.count);
  if (args.coll == Coll::Broadcast || args.coll == Coll::Reduce || args.coll == Coll::Gather ||
      args.coll == Coll::Scatter)
    text += " root " + std::to_string(args.root);
  text += ": " + std::to_string(plan.lanes.size()) + " lanes, " + std::to_string(steps) + " steps\n";
  for (size_t l = 0; l < plan.lanes.size(); ++l) {
    const Lane& lane = plan.lanes[l];
    for (size_t i = 0; i < lane.steps.size(); ++i) {
      text += "lane " + std::to_string(l) + " ch " + std::to_string(lane.channel) + " | step " + std::to_string(i) +
              ": " + dumpStep(lane.steps[i], args) + "\n";
    }
  }
  return text;
}

void maybeDumpSchedule(const CollArgs& args, const RankPlan& plan) {
  static const bool enabled = [] {
    const char* v = std::getenv("BRAID_DUMP_SCHEDULE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  if (!enabled) return;
  const std::string text = dump(plan, args);
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace braid::algo
