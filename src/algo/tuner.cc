#include "algo/tuner.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "algo/tuner_table.h"

namespace braid::algo {

using tuning::kTable;

namespace {

constexpr size_t at(Protocol p) { return static_cast<size_t>(p); }
constexpr size_t at(LinkKind k) { return static_cast<size_t>(k); }

// On a tie the measured protocol wins.
constexpr Protocol kPreference[] = {Protocol::Simple, Protocol::LL128, Protocol::LL};

// An algorithm's traffic for a collective: the hops one after another on its critical path, the
// share of the collective's bytes that its busiest hop carries, and which hops it uses.
struct Pattern {
  int hops = 1;
  uint64_t num = 1, den = 1;  // traffic = bytes * num / den
  bool ring = true;           // the ring's hops; otherwise every pair's
  int networkHops = -1;       // of `hops`, those that cross hosts when the hops' kind is Network (-1: all)
};

// The registry's algorithms by name, looked up once (tune() runs on every call: no string
// compares there).
struct Known {
  const Algorithm* ring;
  const Algorithm* twoshot;
  const Algorithm* tree;
  const Algorithm* doubling;
  const Algorithm* considered[std::size(tuning::kConsidered)];
  const Algorithm* hostConsidered[std::size(tuning::kHostConsidered)];
};
const Known& known() {
  static const Known k = [] {
    Known x{findAlgorithm("ring"), findAlgorithm("twoshot"), findAlgorithm("tree"), findAlgorithm("doubling"), {}, {}};
    for (size_t i = 0; i < std::size(tuning::kConsidered); ++i) x.considered[i] = findAlgorithm(tuning::kConsidered[i].algorithm);
    for (size_t i = 0; i < std::size(tuning::kHostConsidered); ++i)
      x.hostConsidered[i] = findAlgorithm(tuning::kHostConsidered[i].algorithm);
    return x;
  }();
  return k;
}

int ceilLog2(int n) {
  int k = 0;
  while (k < 30 && (1 << k) < n) ++k;
  return k;
}

Pattern patternOf(const Algorithm* a, Coll coll, const TunerInput& in) {
  const int n = std::max(1, in.nRanks);
  const int m = n - 1;
  const uint64_t um = static_cast<uint64_t>(m), un = static_cast<uint64_t>(n);
  if (coll == Coll::SendRecv) return {1, 1, 1, false};
  if (a == known().tree) {
    // Up the tree and down again: ceil(log2 nodes) levels across hosts, each host's chain inside.
    // Its busiest hop carries the whole buffer each way: a chain link serves both trees (half
    // each), and with one channel one tree carries all. Its hops are the ring's kind (the ring's
    // neighbours inside a host, host to host across).
    const int nodes = std::clamp(in.nNodes, 1, n);
    const int perNode = in.ranksPerNode > 0 ? std::min(in.ranksPerNode, n) : (n + nodes - 1) / nodes;
    const int oneWay = std::max(1, ceilLog2(nodes) + perNode - 1);
    const int ways = coll == Coll::AllReduce ? 2 : 1;
    return {ways * oneWay, 1, 1, true, ways * ceilLog2(nodes)};
  }
  if (a == known().ring) {
    // NCCL's ring model: all-reduce 2(n-1) steps of 1/n each; the others n-1 steps; broadcast and
    // reduce pipeline the whole buffer through n-1 hops.
    if (coll == Coll::AllReduce) return {2 * m, 2 * um, un, true};
    if (coll == Coll::Broadcast || coll == Coll::Reduce) return {m, 1, 1, true};
    return {m, um, un, true};
  }
  if (a == known().doubling) {
    // log2(p) rounds of the whole buffer (p: the largest power of two <= n), and where n is not
    // one, a hop before (the extra ranks' inputs) and after (their results). With each host's
    // ranks adjacent, the rounds inside a host come first; only the last log2(nodes) cross.
    int rounds = 0;
    while ((2 << rounds) <= n) ++rounds;
    const int fold = (1 << rounds) == n ? 0 : 2;
    const int nodes = std::clamp(in.nNodes, 1, n);
    const int perNode = in.ranksPerNode > 0 ? std::min(in.ranksPerNode, n) : (n + nodes - 1) / nodes;
    const int network = std::max(0, rounds - ceilLog2(perNode)) + (nodes > 1 ? fold : 0);
    const int hops = rounds + fold;
    return {hops, static_cast<uint64_t>(hops), 1, true, std::min(network, hops)};
  }
  if (a == known().twoshot) return {2 * m, 2 * um, un, false};  // n-1 rounds of each shot, 1/n per round
  // direct (and, until it has its own line here, any newer algorithm): every peer at once. A
  // lane's rounds run one after another where a round's send follows the previous round's recv
  // (all-gather, reduce-scatter, all-to-all: n-1 hops); one-shot all-reduce sends everything
  // first (one hop, n-1 copies of the input through this rank's links); a root sends to or
  // receives from every peer without waiting between them (one hop).
  switch (coll) {
    case Coll::AllReduce: return {1, um, 1, false};
    case Coll::Broadcast:
    case Coll::Reduce: return {1, um, 1, false};
    case Coll::Gather:
    case Coll::Scatter: return {1, um, un, false};
    default: return {m, um, un, false};
  }
}

// GB/s of payload that `h` carries for one rank of `in`.
double hopGbps(const TunerInput& in, const Hops& h) {
  double gbps = h.gbps > 0 ? h.gbps : kTable.defaultGbps[at(h.kind)];
  if (h.kind == LinkKind::SameGpu) gbps /= std::max(1, in.ranksPerGpu);  // the GPU's memory, shared
  return gbps;
}

int channelCap(const TunerInput& in) {
  // Ranks that share a GPU share its SMs: each gets a fair part. Every rank must pick the same
  // count, so the divisor is the most ranks on any GPU (SM counts are assumed alike).
  int cap = kTable.maxChannels;
  if (in.sms > 0) cap = std::min(cap, in.sms / std::max(1, in.ranksPerGpu));
  return std::max(in.minChannels, std::min(cap, in.maxChannels));
}

bool considered(Coll coll, const Algorithm* a, int nRanks, uint64_t bytes) {
  const Known& k = known();
  for (size_t i = 0; i < std::size(tuning::kConsidered); ++i) {
    const tuning::Considered& c = tuning::kConsidered[i];
    if (c.coll == coll && a && a == k.considered[i] && (c.onlyRanks == 0 || c.onlyRanks == nRanks) &&
        (c.maxBytes == 0 || bytes <= c.maxBytes))
      return true;
  }
  return false;
}

int algorithmIndex(const Algorithm* a) {
  const auto& all = algorithms();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == a) return static_cast<int>(i);
  return -1;
}

}  // namespace

int slicesPerStepOf(Protocol protocol) { return kTable.slicesPerStep[at(protocol)]; }

namespace {

TunerChoice choiceOf(const TunerInput& in, const Algorithm* a, Protocol p) {
  TunerChoice c;
  c.algorithm = a;
  c.protocol = p;
  c.channels = in.coll == Coll::SendRecv ? p2pParts(in, p) : collectiveChannels(in, p);
  c.slicesPerStep = slicesPerStepOf(p);
  c.microseconds = estimateMicroseconds(in, a, p, c.channels);
  return c;
}

// Why the user's constraints leave nothing that can run.
std::string nothingPossible(const TunerInput& in, AlgorithmSet userAlgos, ProtocolSet userProtos, AlgorithmSet supported,
                            ProtocolSet runnable, bool ll128Blocked, const std::string& possible) {
  std::string why;
  auto add = [&why](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
  if (in.coll != Coll::SendRecv && (userAlgos & supported) == 0)
    add(std::string(collName(in.coll)) + " runs on " + describeAlgorithms(supported) + " only");
  if ((userProtos & runnable) == 0) {
    if (ll128Blocked && (userProtos & protocolBit(Protocol::LL128)))
      add("LL128 runs only over same-GPU and NVLink hops, and these include " + std::string(linkKindName(in.ring.kind)) +
          (in.ring.kind == in.mesh.kind ? "" : std::string(" / ") + linkKindName(in.mesh.kind)) + " hops");
    if (userProtos & ~in.executorProtocols & kAllProtocols)
      add("the executor runs " + describeProtocols(in.executorProtocols) + " only");
  }
  if (why.empty()) add("no allowed algorithm can use an allowed protocol over these hops");
  return std::string(collName(in.coll)) + ": NCCL_ALGO/NCCL_PROTO allow " +
         (in.coll == Coll::SendRecv ? std::string() : describeAlgorithms(userAlgos & supported) + " with ") +
         describeProtocols(userProtos) + ", which cannot run here (" + why + "); using the tuner's default (" + possible + ")";
}

// Across hosts, the default or an algorithm measured there for the CPU engine
// (tuning::kHostConsidered) that NCCL_ALGO allows, whichever the model finds cheaper; a tie
// keeps the default.
const Algorithm* acrossHosts(const TunerInput& in, const Algorithm* fallback, AlgorithmSet allowed) {
  if (fallback == nullptr || in.nNodes < 2 || in.ring.kind != LinkKind::Network) return fallback;
  const Algorithm* best = fallback;
  double bestUs = estimateMicroseconds(in, fallback, Protocol::Simple, 1);
  for (size_t i = 0; i < std::size(tuning::kHostConsidered); ++i) {
    const tuning::HostConsidered& c = tuning::kHostConsidered[i];
    const Algorithm* a = known().hostConsidered[i];
    const int bit = algorithmIndex(a);
    if (c.coll != in.coll || in.nNodes < c.minNodes || (c.onlyRanks != 0 && in.nRanks != c.onlyRanks) ||
        (c.maxBytes != 0 && in.bytes > c.maxBytes) || a == nullptr || bit < 0 || !((allowed >> bit) & 1) ||
        !a->supports(in.coll, in.nRanks))
      continue;
    const double us = estimateMicroseconds(in, a, Protocol::Simple, 1);
    if (us < bestUs) {
      best = a;
      bestUs = us;
    }
  }
  return best;
}

// The CPU engine's algorithm: the default (across hosts: see acrossHosts), unless NCCL_ALGO
// narrows the collective and leaves the default out; then the cheapest allowed one on the CPU
// engine's model.
const Algorithm* hostAlgorithm(const TunerInput& in, const Algorithm* fallback, std::string* warning) {
  if (in.coll == Coll::SendRecv) return fallback;
  if (in.constraints == nullptr) return acrossHosts(in, fallback, kAllAlgorithms);
  const AlgorithmSet allowed = in.constraints->algorithmsFor(in.coll);
  const int fallbackBit = algorithmIndex(fallback);
  if (allowed == kAllAlgorithms || (fallbackBit >= 0 && ((allowed >> fallbackBit) & 1)))
    return acrossHosts(in, fallback, allowed);
  const Algorithm* best = nullptr;
  double bestUs = 0;
  AlgorithmSet supported = 0;
  const auto& all = algorithms();
  for (size_t i = 0; i < all.size(); ++i) {
    if (!all[i]->supports(in.coll, in.nRanks)) continue;
    supported |= AlgorithmSet{1} << i;
    if (!((allowed >> i) & 1)) continue;
    const double us = estimateMicroseconds(in, all[i], Protocol::Simple, 1);
    if (best == nullptr || us < bestUs) {
      best = all[i];
      bestUs = us;
    }
  }
  if (best) return best;
  *warning = std::string(collName(in.coll)) + " on host memory: NCCL_ALGO allows " + describeAlgorithms(allowed & ~supported) +
             ", which cannot run it (" + collName(in.coll) + " runs on " + describeAlgorithms(supported) +
             " only); using the default (" + (fallback ? fallback->name : "none") + ")";
  return fallback;
}

}  // namespace

const char* linkKindName(LinkKind k) {
  switch (k) {
    case LinkKind::SameGpu: return "same-GPU";
    case LinkKind::NvLink: return "NVLink";
    case LinkKind::Pcie: return "PCIe";
    case LinkKind::HostStaged: return "host-staged";
    case LinkKind::Network: return "network";
  }
  return "?";
}

Hops combine(Hops a, Hops b) {
  Hops h;
  h.kind = std::max(a.kind, b.kind);
  h.gbps = a.gbps > 0 && b.gbps > 0 ? std::min(a.gbps, b.gbps) : std::max(a.gbps, b.gbps);
  return h;
}

bool ll128Allowed(LinkKind k) { return k == LinkKind::SameGpu || k == LinkKind::NvLink; }

uint64_t channelsWanted(uint64_t bytes, uint64_t perChannel) {
  const uint64_t fine = (bytes + perChannel - 1) / perChannel;
  const uint64_t coarse = (bytes + kTable.coarseBytesPerChannel - 1) / kTable.coarseBytesPerChannel;
  return std::max<uint64_t>(1, std::max(std::min<uint64_t>(fine, static_cast<uint64_t>(kTable.fineChannels)), coarse));
}

int collectiveChannels(const TunerInput& in, Protocol protocol) {
  (void)protocol;  // one rule for every protocol until they are measured apart
  if (in.hostMemory) return 1;  // one progress thread runs every lane: more would only cut finer
  // config.minCTAs (NCCL_MIN_CTAS) is a floor, as in NCCL; the cap is never below it.
  const uint64_t wanted = std::min<uint64_t>(channelsWanted(in.bytes, kTable.fineBytesPerChannel),
                                             static_cast<uint64_t>(channelCap(in)));
  return static_cast<int>(std::max<uint64_t>(wanted, static_cast<uint64_t>(std::max(1, in.minChannels))));
}

int p2pParts(const TunerInput& in, Protocol protocol) {
  (void)protocol;
  if (in.hostMemory) return 1;
  // The same on both ends whatever their GPU: only the size and the communicator's busiest GPU.
  // A send and a recv of a group run 2 x parts blocks, and the blocks of all the ranks on a GPU
  // wait for each other, so all of them must fit on it at once: at most the channel cap (the SMs
  // over the ranks per GPU) for the pair. 8 processes on one H200 with 32 parts (64 blocks
  // each, 512 in all) hung in nccl-tests' sendrecv_perf from 16 MB (perf/NOTES.md).
  const uint64_t pairCap = static_cast<uint64_t>(std::max(1, channelCap(in) / 2));
  return static_cast<int>(std::min<uint64_t>(channelsWanted(in.bytes, kTable.fineBytesPerChannel),
                                             std::min<uint64_t>(kTable.maxP2pParts, pairCap)));
}

double estimateMicroseconds(const TunerInput& in, const Algorithm* algorithm, Protocol protocol, int channels) {
  const double bytes = static_cast<double>(in.bytes);
  const Pattern pat = patternOf(algorithm, in.coll, in);
  const double traffic = bytes * static_cast<double>(pat.num) / static_cast<double>(pat.den);
  if (in.hostMemory) {
    if (in.nRanks <= 1) return kTable.cpuHopUs + bytes / (kTable.cpuGbps * 1e3);
    const Hops& h = pat.ring ? in.ring : in.mesh;
    if (h.kind != LinkKind::Network) return pat.hops * kTable.cpuHopUs + traffic / (kTable.cpuGbps * 1e3);
    // Across hosts (the UCX proxy's FIFOs): a hop that crosses hosts costs the network's latency
    // and the busiest hop's bytes go at its bandwidth; hops inside a host (the tree's chains)
    // the CPU engine's handoff. A ring's every step waits for its network link.
    const int network = pat.networkHops < 0 ? pat.hops : std::min(pat.networkHops, pat.hops);
    const size_t simple = at(Protocol::Simple);
    return network * kTable.hopUs[at(LinkKind::Network)][simple] + (pat.hops - network) * kTable.cpuHopUs +
           traffic / (hopGbps(in, h) * 1e3);
  }
  if (in.nRanks <= 1) return kTable.copyLaunchUs + bytes / (kTable.copyGbps * 1e3);
  const Hops& h = pat.ring ? in.ring : in.mesh;
  const size_t p = at(protocol);
  const int c = std::max(1, channels);
  double gbps = hopGbps(in, h) * kTable.efficiency[p];
  if (kTable.maxGbps[p] > 0) gbps = std::min(gbps, kTable.maxGbps[p]);
  if (const double perChannel = kTable.perChannelGbps[at(h.kind)][p]; perChannel > 0) gbps = std::min(gbps, c * perChannel);
  const double slices = std::ceil(traffic / c / static_cast<double>(kTable.sliceBytes[p]));
  return kTable.launchUs[p] + pat.hops * kTable.hopUs[at(h.kind)][p] + traffic / (gbps * 1e3) + slices * kTable.sliceUs[p];
}

Candidates candidates(const TunerInput& in) {
  Candidates out;
  const Coll coll = in.coll;
  const int n = std::max(1, in.nRanks);
  const Algorithm* fallback = coll == Coll::SendRecv ? nullptr : defaultAlgorithm(coll, n);
  // One rank (a copy) has nothing to choose; host memory (the CPU engine) only what NCCL_ALGO asks.
  if (in.hostMemory || n == 1) {
    out.items[out.size++] = choiceOf(in, n > 1 ? hostAlgorithm(in, fallback, &out.warning) : fallback, Protocol::Simple);
    return out;
  }
  // Algorithms in preference order: the collective's default first, then the registry's order.
  constexpr int kMaxAlgorithms = Candidates::kCapacity / kNumProtocols;
  const Algorithm* algos[kMaxAlgorithms] = {};
  int nAlgos = 0;
  if (coll == Coll::SendRecv) {
    algos[nAlgos++] = nullptr;
  } else {
    if (fallback) algos[nAlgos++] = fallback;
    for (const Algorithm* a : algorithms())
      if (a != fallback && a->supports(coll, n) && nAlgos < kMaxAlgorithms) algos[nAlgos++] = a;
  }
  const ProtocolSet executor = in.executorProtocols ? in.executorProtocols : protocolBit(Protocol::Simple);
  const AlgorithmSet userAlgos = in.constraints ? in.constraints->algorithmsFor(coll) : kAllAlgorithms;
  const ProtocolSet userProtos = in.constraints ? in.constraints->protocolsFor(coll) : kAllProtocols;
  struct Pair {
    const Algorithm* algorithm;
    Protocol protocol;
    bool user;        // NCCL_ALGO / NCCL_PROTO allow it
    bool considered;  // weighed by default (kConsidered)
  };
  Pair pairs[Candidates::kCapacity];
  int nPairs = 0;
  bool anyUser = false, ll128Blocked = false;
  AlgorithmSet supported = 0;
  ProtocolSet runnable = 0;
  for (int i = 0; i < nAlgos; ++i) {
    const Algorithm* a = algos[i];
    const int bit = algorithmIndex(a);
    if (bit >= 0) supported |= AlgorithmSet{1} << bit;
    const LinkKind kind = patternOf(a, coll, in).ring ? in.ring.kind : in.mesh.kind;
    const bool weighed = coll == Coll::SendRecv || considered(coll, a, n, in.bytes);
    for (Protocol p : kPreference) {
      if (!(executor & protocolBit(p))) continue;
      if (p == Protocol::LL128 && !ll128Allowed(kind)) {
        ll128Blocked = true;
        continue;
      }
      runnable |= protocolBit(p);
      const bool user = (userProtos & protocolBit(p)) && (a == nullptr || (bit >= 0 && (userAlgos >> bit) & 1));
      anyUser = anyUser || user;
      pairs[nPairs++] = {a, p, user, weighed};
    }
  }
  std::string possible;
  if (!anyUser && in.constraints) {
    for (int i = 0; i < nPairs; ++i)
      possible += (possible.empty() ? "" : ", ") + std::string(pairs[i].algorithm ? pairs[i].algorithm->name : "p2p") + "/" +
                  protocolName(pairs[i].protocol);
    // Nothing runs over these hops at all (LL128 the only protocol, over PCIe): the fallback below.
    if (nPairs == 0) possible = std::string(fallback ? fallback->name : "p2p") + "/Simple";
    out.warning = nothingPossible(in, userAlgos, userProtos, supported, runnable, ll128Blocked, possible);
  }
  // Of what the user allows (everything, when that is nothing), the algorithms measured for the
  // collective; all of them when the user allowed none of those.
  auto allowed = [&](const Pair& pr) { return pr.user || !anyUser; };
  bool anyConsidered = false;
  for (int i = 0; i < nPairs; ++i) anyConsidered = anyConsidered || (allowed(pairs[i]) && pairs[i].considered);
  for (int i = 0; i < nPairs; ++i) {
    const Pair& pr = pairs[i];
    if (!allowed(pr) || (anyConsidered && !pr.considered)) continue;
    out.items[out.size++] = choiceOf(in, pr.algorithm, pr.protocol);
  }
  if (out.size == 0) out.items[out.size++] = choiceOf(in, fallback, Protocol::Simple);  // no algorithm at all
  return out;
}

TunerResult tune(const TunerInput& in) {
  Candidates all = candidates(in);
  TunerResult r;
  r.warning = std::move(all.warning);
  int best = 0, second = -1;
  for (int i = 1; i < all.size; ++i) {
    if (all.items[i].microseconds < all.items[best].microseconds) {
      second = best;
      best = i;
    } else if (second < 0 || all.items[i].microseconds < all.items[second].microseconds) {
      second = i;
    }
  }
  r.best = all.items[best];
  if (second >= 0) {
    r.hasRunnerUp = true;
    r.runnerUp = all.items[second];
  }
  return r;
}

}  // namespace braid::algo
