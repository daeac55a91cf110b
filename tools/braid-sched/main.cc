// braid-sched: prints what an algorithm does on each rank, and the verifier's verdict.
//
//   braid-sched --coll allreduce --ranks 4 --count 1000 [--algo ring] [--channels 2]
//               [--root 0] [--rank R] [--verify] [--quiet] [--align N] [--max-step N]
//               [--ring 0,2,1,3] [--slice N] [--fifo N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algo/algorithm.h"
#include "algo/schedule.h"
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

}  // namespace

int main(int argc, char** argv) {
  CollArgs args;
  std::string algoName;
  int onlyRank = -1;
  bool doVerify = false, quiet = false, haveColl = false, haveCount = false;
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
