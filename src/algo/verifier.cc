// The verifier's entry points: model the buffers, check steps and connections, simulate,
// then compare the outputs with what the collective defines.
#include "algo/verifier.h"

#include "algo/verifier_internal.h"

namespace braid::algo {

using namespace verifier_detail;

bool collHasInPlace(Coll c) { return c != Coll::AlltoAll && c != Coll::SendRecv; }

std::string VerifyResult::summary() const {
  if (ok) {
    return "ok: " + std::to_string(steps) + " steps, " + std::to_string(messages) + " messages, " +
           std::to_string(elementsSent) + " elements sent, at most " + std::to_string(maxLanes) + " lanes per rank";
  }
  std::string text = "FAILED (" + std::to_string(errors.size()) + " errors shown):";
  for (const std::string& e : errors) text += "\n  " + e;
  return text;
}

namespace {

void countPlans(const std::vector<RankPlan>& plans, VerifyResult& result) {
  for (const RankPlan& plan : plans) {
    result.maxLanes = std::max(result.maxLanes, static_cast<int>(plan.lanes.size()));
    for (const Lane& lane : plan.lanes) {
      result.steps += lane.steps.size();
      for (const Step& s : lane.steps) {
        if (s.sendPeer == kNoPeer) continue;
        ++result.messages;
        result.elementsSent += s.count;
      }
    }
  }
}

VerifyResult finish(Errors& errors, const std::vector<RankPlan>& plans) {
  VerifyResult result;
  countPlans(plans, result);
  result.ok = !errors.any();
  result.errors = errors.take();
  return result;
}

VerifyResult runModel(Model& model, const std::vector<RankPlan>& plans, const VerifyOptions& options,
                      Errors& errors) {
  if (static_cast<int>(plans.size()) != model.nRanks) {
    errors.add("got " + std::to_string(plans.size()) + " plans for " + std::to_string(model.nRanks) + " ranks");
    return finish(errors, plans);
  }
  Wiring wiring;
  if (checkAndWire(model, plans, &wiring, errors)) {
    checkRaces(model, plans, errors);
    simulate(model, plans, wiring, options, errors);
    // After a deadlock or a value error the outputs are incomplete or poisoned: the
    // errors so far say more than a list of wrong outputs would.
    if (!errors.any()) checkOutputs(model, errors);
  }
  return finish(errors, plans);
}

}  // namespace

VerifyResult verifyPlans(const CollArgs& base, const std::vector<RankPlan>& plans, const VerifyOptions& options) {
  Errors errors(options.maxErrors);
  Model model;
  if (!buildCollModel(base, options.inPlace, &model, errors)) return finish(errors, plans);
  return runModel(model, plans, options, errors);
}

VerifyResult verify(const CollArgs& base, const Algorithm& algo, const VerifyOptions& options) {
  if (!algo.supports(base.coll, base.nRanks)) {
    VerifyResult result;
    result.ok = false;
    result.errors.push_back(std::string(algo.name) + " does not support " + collName(base.coll) + " on " +
                            std::to_string(base.nRanks) + " ranks");
    return result;
  }
  std::vector<RankPlan> plans;
  plans.reserve(base.nRanks > 0 ? base.nRanks : 0);
  for (int r = 0; r < base.nRanks; ++r) {
    CollArgs args = base;
    args.rank = r;
    plans.push_back(algo.build(args));
  }
  return verifyPlans(base, plans, options);
}

VerifyResult verifyP2pPlans(int nRanks, const std::vector<std::vector<P2pOp>>& opsPerRank,
                            const std::vector<RankPlan>& plans, const VerifyOptions& options) {
  Errors errors(options.maxErrors);
  Model model;
  if (!buildP2pModel(nRanks, opsPerRank, &model, errors)) return finish(errors, plans);
  return runModel(model, plans, options, errors);
}

VerifyResult verifyP2p(int nRanks, const std::vector<std::vector<P2pOp>>& opsPerRank, const VerifyOptions& options) {
  std::vector<RankPlan> plans;
  for (int r = 0; r < nRanks && r < static_cast<int>(opsPerRank.size()); ++r)
    plans.push_back(buildP2p(r, nRanks, opsPerRank[r]));
  return verifyP2pPlans(nRanks, opsPerRank, plans, options);
}

}  // namespace braid::algo
