// braid-perf's command line: nccl-tests' flags (same letters, long names and defaults where
// they make sense here) plus --coll, -np, --ranks, --memory, --json, --plot and --plot-compare.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "nccl.h"
#include "tests/common/reference.h"

namespace braid::perf {

enum class MemoryKind { Auto, Host, Device };
// How braid-perf runs the local ranks it starts itself (--ranks): chosen by chooseRankLayout
// (perf_rank_layout.h) unless given.
enum class RanksAs { Auto, Threads, Processes };

struct PerfOptions {
  check::Collective coll = check::Collective::AllReduce;
  size_t minBytes = 8;            // -b
  size_t maxBytes = 64u << 20;    // -e
  size_t stepFactor = 2;          // -f; sizes multiply by it when > 1 ...
  size_t stepBytes = 1u << 20;    // -i; ... else grow by this many bytes (-i alone implies -f 1)
  int iters = 20;                 // -n
  int warmupIters = 5;            // -w
  int aggIters = 1;               // -m: collectives per group call
  int checkIters = 1;             // -c: verified runs per size (0: no check)
  std::vector<check::ReduceOp> ops{check::ReduceOp::Sum};  // -o, "all": every op
  std::vector<ncclDataType_t> types{ncclFloat32};        // -d, "all": every type
  int root = 0;                   // -r
  int blocking = 0;               // -z: wait for completion after each collective
  bool streamNull = false;        // -y: the default stream instead of a created one
  int poll = 0;                   // --poll: wait by polling the stream, as nccl-tests does
  int timeoutSeconds = 0;         // -T: a rank gives up after this long (0: never)
  int graphLaunches = 0;          // -G: capture the iterations in a CUDA graph, replay it G times
  bool reportCpuTime = false;     // -C: time until the calls return, not until completion
  int average = 1;                // -a: time across ranks: 0 rank 0, 1 mean, 2 min, 3 max
  int launchRanks = 0;            // -np: start this many local ranks (0: not given)
  RanksAs ranksAs = RanksAs::Auto;  // --ranks threads|processes
  MemoryKind memory = MemoryKind::Auto;  // --memory host|device
  std::string jsonPath;           // --json FILE
  std::string plotPath;           // --plot FILE.png: time and bus bandwidth against size (rank 0)
  std::string plotComparePath;    // --plot-compare OTHER.json: another run's series beside ours
  bool help = false;              // -h
  // The arguments without -np N and --ranks: what rank processes are started with.
  std::vector<std::string> rankArgs;
};

struct ParseResult {
  bool ok = false;
  std::string error;
  PerfOptions options;
};

// `args` excludes the program name.
ParseResult parseArgs(const std::vector<std::string>& args);

// "8", "64K", "1M", "1.5G" (powers of 1024, as in nccl-tests); false on anything else.
bool parseSize(std::string_view text, size_t* bytes);

// The message sizes, in bytes, from minBytes to maxBytes.
std::vector<size_t> sizeSteps(const PerfOptions& options);

std::string usage(const std::string& program);
const char* memoryKindName(MemoryKind kind);
const char* ranksAsName(RanksAs how);  // "auto", "threads", "processes"

}  // namespace braid::perf
