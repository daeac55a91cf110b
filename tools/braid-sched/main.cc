// braid-sched: prints what an algorithm does on each rank, and the verifier's verdict.
//
//   braid-sched --coll allreduce --ranks 4 --count 1000 [--algo ring] [--channels 2]
//               [--root 0] [--rank R] [--verify] [--quiet] [--align N] [--max-step N]
//               [--ring 0,2,1,3] [--slice N] [--fifo N] [--nodes 3+1+2 | --ranks-per-node R]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/schedule.h"
#include "algo/tree.h"
#include "algo/verifier.h"

using namespace braid::algo;

namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: braid-sched --coll C --ranks N --count K [options]\n"
               "  --coll C        allreduce allgather reducescatter broadcast reduce alltoall gather scatter\n"
               "  --ranks N       number of ranks (1..1024)\n"
               "  --count K       NCCL's count argument\n"
               "  --algo NAME     algorithm (default: the collective's default); --list shows them\n"
               "  --channels N    lanes the algorithm may use (default 1)\n"
               "  --root R        root of broadcast/reduce/gather/scatter (default 0)\n"
               "  --rank R        print only rank R's plan (default: all ranks)\n"
               "  --align N       block alignment in elements (default 1)\n"
               "  --max-step N    most elements per step (default 0 = no limit)\n"
               "  --ring a,b,...  ring order (default identity)\n"
               "  --nodes a+b+... ranks of each node (host), in rank order (default: one node)\n"
               "  --ranks-per-node R  nodes of R ranks each (the last may have fewer)\n"
               "  --verify        run the verifier, out of place and in place\n"
               "  --slice N --fifo N  verifier FIFO model: elements per slice, slices per connection\n"
               "  --quiet         don't print the plans\n");
}

bool parseColl(const std::string& name, Coll* coll) {
  const Coll all[] = {Coll::Broadcast,     Coll::Reduce,   Coll::AllGather, Coll::ReduceScatter,
                      Coll::AllReduce,     Coll::AlltoAll, Coll::Scatter,   Coll::Gather};
  for (Coll c : all) {
    const char* n = collName(c);
    if (name.size() == std::strlen(n) && strncasecmp(name.c_str(), n, name.size()) == 0) {
      *coll = c;
      return true;
    }
  }
  if (strcasecmp(name.c_str(), "bcast") == 0) return *coll = Coll::Broadcast, true;
  return false;
}

bool parseNumber(const char* text, uint64_t* value) {
  char* end = nullptr;
  *value = std::strtoull(text, &end, 10);
  return end != text && *end == '\0';
}

bool parseRing(const std::string& text, std::vector<int>* ring) {
  if (text.empty()) return true;  // identity
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    uint64_t v = 0;
    if (!parseNumber(text.substr(pos, comma - pos).c_str(), &v)) return false;
    ring->push_back(static_cast<int>(v));
    pos = comma + 1;
  }
  return true;
}

// "3+1+2": node sizes.
bool parseNodes(const std::string& text, std::vector<int>* sizes) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t plus = std::min(text.find('+', pos), text.size());
    uint64_t v = 0;
    if (!parseNumber(text.substr(pos, plus - pos).c_str(), &v) || v == 0 || v > 1024) return false;
    sizes->push_back(static_cast<int>(v));
    pos = plus + 1;
  }
  return !sizes->empty();
}

// The tree algorithm's shape: the nodes' chains and each rank's parent, in both trees.
void printTrees(const CollArgs& args) {
  for (int t = 0; t < kTrees; ++t) {
    const NodeLayout layout = treeLayout(args, t);
    const std::vector<int> parents = treeParents(layout.nodes(), t);
    std::printf("# tree %d (lanes %d, %d, ...): %d node%s, chains", t, t, t + kTrees, layout.nodes(),
                layout.nodes() == 1 ? "" : "s");
    for (int m = 0; m < layout.nodes(); ++m) {
      std::printf(" [");
      for (size_t i = 0; i < layout.members[static_cast<size_t>(m)].size(); ++i)
        std::printf("%s%d", i ? " " : "", layout.members[static_cast<size_t>(m)][i]);
      std::printf("]");
    }
    std::printf("; parent<-rank:");
    for (int r = 0; r < args.nRanks; ++r) {
      const RankTreeLinks l = rankTreeLinks(layout, parents, r);
      if (l.parent == kNoPeer) std::printf(" root %d", r);
      else std::printf(" %d<-%d", l.parent, r);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CollArgs args;
  std::string algoName;
  int onlyRank = -1;
  bool doVerify = false, quiet = false, haveColl = false, haveCount = false;
  std::vector<int> nodeSizes;
  uint64_t ranksPerNode = 0;
  VerifyOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "braid-sched: %s needs a value\n", flag.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto number = [&]() -> uint64_t {
      const char* text = value();
      uint64_t v = 0;
      if (!parseNumber(text, &v)) {
        std::fprintf(stderr, "braid-sched: %s wants a number, got '%s'\n", flag.c_str(), text);
        std::exit(2);
      }
      return v;
    };
    if (flag == "--coll") {
      const char* name = value();
      if (!parseColl(name, &args.coll)) {
        std::fprintf(stderr, "braid-sched: unknown collective '%s'\n", name);
        return 2;
      }
      haveColl = true;
    } else if (flag == "--ranks") {
      args.nRanks = static_cast<int>(number());
    } else if (flag == "--count") {
      args.count = number();
      haveCount = true;
    } else if (flag == "--algo") {
      algoName = value();
    } else if (flag == "--channels") {
      args.nChannels = static_cast<int>(number());
    } else if (flag == "--root") {
      args.root = static_cast<int>(number());
    } else if (flag == "--rank") {
      onlyRank = static_cast<int>(number());
    } else if (flag == "--align") {
      args.alignElems = static_cast<uint32_t>(number());
    } else if (flag == "--max-step") {
      args.maxStepElems = number();
    } else if (flag == "--ring") {
      if (!parseRing(value(), &args.ring)) {
        std::fprintf(stderr, "braid-sched: --ring wants comma-separated ranks\n");
        return 2;
      }
    } else if (flag == "--nodes") {
      if (!parseNodes(value(), &nodeSizes)) {
        std::fprintf(stderr, "braid-sched: --nodes wants node sizes like 3+1+2\n");
        return 2;
      }
    } else if (flag == "--ranks-per-node") {
      ranksPerNode = number();
    } else if (flag == "--slice") {
      options.sliceElems = number();
    } else if (flag == "--fifo") {
      options.fifoSlices = static_cast<uint32_t>(number());
    } else if (flag == "--verify") {
      doVerify = true;
    } else if (flag == "--quiet") {
      quiet = true;
    } else if (flag == "--list") {
      for (const Algorithm* a : algorithms()) {
        std::printf("%-8s", a->name);
        for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce,
                       Coll::AlltoAll, Coll::Gather, Coll::Scatter})
          if (a->supports(c, 2)) std::printf(" %s", collName(c));
        std::printf("\n");
      }
      return 0;
    } else if (flag == "--help" || flag == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "braid-sched: unknown option '%s'\n", flag.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (!haveColl || !haveCount || args.nRanks < 1) {
    usage(stderr);
    return 2;
  }
  if (!nodeSizes.empty() && ranksPerNode > 0) {
    std::fprintf(stderr, "braid-sched: give --nodes or --ranks-per-node, not both\n");
    return 2;
  }
  if (!nodeSizes.empty()) {
    for (size_t m = 0; m < nodeSizes.size(); ++m) args.nodeOf.insert(args.nodeOf.end(), static_cast<size_t>(nodeSizes[m]), static_cast<int>(m));
    if (static_cast<int>(args.nodeOf.size()) != args.nRanks) {
      std::fprintf(stderr, "braid-sched: --nodes adds up to %zu ranks, --ranks is %d\n", args.nodeOf.size(), args.nRanks);
      return 2;
    }
  } else if (ranksPerNode > 0) {
    for (int r = 0; r < args.nRanks; ++r) args.nodeOf.push_back(static_cast<int>(static_cast<uint64_t>(r) / ranksPerNode));
  }
  if (onlyRank >= args.nRanks) {
    std::fprintf(stderr, "braid-sched: --rank %d is outside 0..%d\n", onlyRank, args.nRanks - 1);
    return 2;
  }
  const Algorithm* algo = algoName.empty() ? defaultAlgorithm(args.coll, args.nRanks) : findAlgorithm(algoName);
  if (!algo) {
    std::fprintf(stderr, "braid-sched: no algorithm '%s' (try --list)\n", algoName.c_str());
    return 2;
  }
  if (!algo->supports(args.coll, args.nRanks)) {
    std::fprintf(stderr, "braid-sched: %s does not support %s on %d ranks\n", algo->name, collName(args.coll),
                 args.nRanks);
    return 2;
  }
  if (!quiet) {
    if (std::strcmp(algo->name, "tree") == 0) printTrees(args);
    for (int r = 0; r < args.nRanks; ++r) {
      if (onlyRank >= 0 && r != onlyRank) continue;
      CollArgs rankArgs = args;
      rankArgs.rank = r;
      std::fputs(dump(algo->build(rankArgs), rankArgs).c_str(), stdout);
    }
  }
  int status = 0;
  if (doVerify) {
    for (bool inPlace : {false, true}) {
      if (inPlace && !collHasInPlace(args.coll)) continue;
      options.inPlace = inPlace;
      const VerifyResult result = verify(args, *algo, options);
      std::printf("verify %s %s %s: %s\n", algo->name, collName(args.coll), inPlace ? "in-place" : "out-of-place",
                  result.summary().c_str());
      if (!result.ok) status = 1;
    }
  }
  return status;
}
