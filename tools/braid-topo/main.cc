// braid-topo: shows what braid knows about a machine's topology, in nvidia-smi's and NCCL's
// terms, and the rings and trees braid would build for N ranks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "topo/detect.h"
#include "topo/matrix.h"
#include "topo/search.h"
#include "topo/topo.h"

namespace {

using namespace braid::topo;

void usage(FILE* f) {
  std::fprintf(f,
               "usage: braid-topo [--xml FILE] [--dump FILE] [--ranks N] [--nodes H] [--channels C]\n"
               "                  [--describe] [--time]\n"
               "  --xml FILE     read an NCCL topology XML (NCCL_TOPO_FILE format) instead of detecting\n"
               "  --dump FILE    write the topology as NCCL XML (NCCL_TOPO_DUMP_FILE format)\n"
               "  --ranks N      ranks per host for the rings and trees (default: one per GPU)\n"
               "  --nodes H      pretend there are H identical hosts (default 1)\n"
               "  --channels C   channels to build (default: as many as the search finds, up to 16)\n"
               "  --describe     print the graph's nodes and links\n"
               "  --time         time loading and searching (100 repetitions)\n"
               "Without --xml the machine is detected live (NCCL_TOPO_FILE is honoured).\n");
}

bool parseInt(const char* s, int lo, int hi, int* out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// Ranks spread over the GPUs of each host: contiguous blocks, several per GPU when N > GPUs.
std::vector<RankLocation> makeRanks(const System& sys, int perHost, int hosts) {
  std::vector<RankLocation> ranks;
  std::vector<int> gpus = sys.gpus;
  std::sort(gpus.begin(), gpus.end(), [&](int a, int b) { return sys.node(a).busId < sys.node(b).busId; });
  for (int h = 0; h < hosts; ++h)
    for (int i = 0; i < perHost; ++i) {
      RankLocation r;
      r.rank = h * perHost + i;
      r.hostHash = 0x1000 + static_cast<uint64_t>(h);
      if (!gpus.empty()) {
        size_t g = gpus.size() >= static_cast<size_t>(perHost) ? static_cast<size_t>(i)
                                                              : static_cast<size_t>(i) * gpus.size() / static_cast<size_t>(perHost);
        r.busId = sys.node(gpus[g]).busId;
        r.cudaDev = sys.node(gpus[g]).dev;
      }
      ranks.push_back(r);
    }
  return ranks;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string xmlFile, dumpFile;
  int ranksPerHost = -1, hosts = 1, channels = -1;
  bool describe = false, timing = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto need = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "braid-topo: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--xml") xmlFile = need("--xml");
    else if (a == "--dump") dumpFile = need("--dump");
    else if (a == "--ranks") {
      if (!parseInt(need("--ranks"), 1, 4096, &ranksPerHost)) { std::fprintf(stderr, "braid-topo: --ranks takes 1..4096\n"); return 2; }
    } else if (a == "--nodes") {
      if (!parseInt(need("--nodes"), 1, 1024, &hosts)) { std::fprintf(stderr, "braid-topo: --nodes takes 1..1024\n"); return 2; }
    } else if (a == "--channels") {
      if (!parseInt(need("--channels"), 1, 64, &channels)) { std::fprintf(stderr, "braid-topo: --channels takes 1..64\n"); return 2; }
    } else if (a == "--describe") describe = true;
    else if (a == "--time") timing = true;
    else if (a == "-h" || a == "--help") { usage(stdout); return 0; }
    else { std::fprintf(stderr, "braid-topo: unknown argument %s\n", a.c_str()); usage(stderr); return 2; }
  }

  auto t0 = std::chrono::steady_clock::now();
  System sys;
  std::string error;
  if (!xmlFile.empty()) {
    if (!loadSystemFile(xmlFile, &sys, &error)) {
      std::fprintf(stderr, "braid-topo: %s\n", error.c_str());
      return 1;
    }
  } else {
    sys = loadSystem(0);
  }
  double loadMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  PathMatrix pm(sys, p2pPolicyFromEnv(sys).nvbAllowed);
  std::printf("Topology from %s: %zu GPUs, %zu NICs, %zu NUMA nodes, %zu host%s\n", sys.source.c_str(), sys.gpus.size(),
              pm.nicIds().size(), sys.cpus.size(), sys.hosts.size(), sys.hosts.size() == 1 ? "" : "s");
  for (const auto& d : sys.diagnostics)
    std::printf("  %s %s\n", d.level == Diagnostic::Warn ? "warning:" : "note:", d.text.c_str());
  if (describe) std::printf("\n%s", describeSystem(sys).c_str());

  std::printf("\n%s", smiMatrix(sys, pm).c_str());
  std::printf("\nPaths as NCCL sees them:\n%s", ncclMatrix(sys, pm).c_str());
  std::printf("\nAffinity:\n%s", affinityReport(sys, pm).c_str());

  int perHost = ranksPerHost > 0 ? ranksPerHost : std::max<int>(1, static_cast<int>(sys.gpus.size()));
  std::vector<RankLocation> ranks = makeRanks(sys, perHost, hosts);
  int nChannels = channels;
  if (nChannels < 0) {
    // As many channels as the search finds on one host, as NCCL's graph dump shows them.
    std::vector<int> gpus;
    for (const auto& r : ranks)
      if (int g = sys.findBusId(r.busId); g >= 0 && std::find(gpus.begin(), gpus.end(), g) == gpus.end() && r.hostHash == ranks[0].hostHash)
        gpus.push_back(g);
    SearchOptions opt;
    opt.p2p = p2pPolicyFromEnv(sys);
    nChannels = gpus.empty() ? 1 : static_cast<int>(searchRings(sys, gpus, opt).channels.size());
  }
  auto t1 = std::chrono::steady_clock::now();
  RingInfo info;
  auto rings = ringOrders(sys, ranks, nChannels, &info);
  double searchMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();

  double total = 0;
  for (double b : info.bw) total += b;
  std::printf("\nRings for %d rank%s on %d host%s, %d channel%s (%d searched, %d distinct orders), worst hop %s, "
              "%.1f GB/s in all%s:\n",
              perHost * hosts, perHost * hosts == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s", nChannels,
              nChannels == 1 ? "" : "s", info.searchedRings, info.distinctRings, ncclPathName(info.worstIntra), total,
              info.fallback ? " (fallback)" : "");
  if (info.fallback) std::printf("  %s\n", info.note.c_str());
  for (size_t c = 0; c < rings.size(); ++c) {
    std::printf("  channel %2zu: %s  (%.1f GB/s", c, join(rings[c]).c_str(), info.bw[c]);
    if (!info.nicIn[c].empty()) std::printf(", in %s, out %s", info.nicIn[c].c_str(), info.nicOut[c].c_str());
    std::printf(")\n");
  }
  // Trees: inside a host the ring's order is a chain; hosts form NCCL-style double binary trees.
  std::printf("\nTrees (chain inside each host, double binary tree across hosts):\n");
  for (size_t c = 0; c < rings.size(); ++c) {
    std::printf("  channel %2zu (tree %zu):", c, c % 2);
    for (int h = 0; h < hosts; ++h) {
      std::vector<int> chain(rings[c].begin() + h * perHost, rings[c].begin() + (h + 1) * perHost);
      TreeLinks t = doubleBinaryTree(hosts, h, static_cast<int>(c % 2));
      std::printf("  host %d [%s]", h, join(chain).c_str());
      if (hosts > 1) std::printf(" up %d down %d,%d", t.parent, t.child[0], t.child[1]);
    }
    std::printf("\n");
  }

  if (timing) {
    const int reps = 100;
    auto s0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      System s;
      if (!xmlFile.empty()) {
        if (!loadSystemFile(xmlFile, &s, &error)) return 1;
      } else {
        resetSystemCache();
        s = loadSystem(-1);
      }
      RingInfo ri;
      auto r = ringOrders(s, ranks, nChannels, &ri);
      if (r.empty()) return 1;
    }
    double perMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count() / reps;
    std::printf("\nTiming: first load %.2f ms, first search %.2f ms; load+search %.3f ms each (mean of %d)\n", loadMs,
                searchMs, perMs, reps);
  }

  if (!dumpFile.empty()) {
    if (!writeXmlFile(dumpFile, sys.xml, &error)) {
      std::fprintf(stderr, "braid-topo: %s\n", error.c_str());
      return 1;
    }
    std::printf("\nTopology written to %s\n", dumpFile.c_str());
  }
  return 0;
}
