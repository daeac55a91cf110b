// braid-perf: nccl-tests-style benchmark and checker for any NCCL-compatible library.
//
//   braid-perf [flags]              runs -np N local ranks (default 4): as threads of this
//                                   process or as processes (--ranks; chooseRankLayout)
//   mpirun -np N braid-perf [flags] runs as one rank per process
//
// Rank processes are this same program, re-executed through the launcher with BRAID_LAUNCH_* set.
#include <cuda_runtime.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "nccl.h"
#include "perf/perf_args.h"
#include "perf/perf_errors.h"
#include "perf/perf_launch_mode.h"
#include "perf/perf_json_read.h"
#include "perf/perf_mpi.h"
#include "perf/perf_rank_layout.h"
#include "perf/perf_runner.h"
#include "perf/perf_thread_ranks.h"
#include "tests/common/rank_env.h"
#include "tests/launcher/launcher.h"

namespace braid::perf {
namespace {

volatile std::sig_atomic_t gCancel = 0;

void onStopSignal(int) { gCancel = 1; }

std::string selfPath(const char* argv0) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return argv0;  // no /proc: hope argv[0] is a path
  path[n] = '\0';
  return path;
}

// Parent mode with processes: start the ranks, stream rank 0's output, report the others' failures.
int runLocalRanks(const PerfOptions& options, int nRanks, const char* argv0) {
  ncclUniqueId id{};
  ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) {
    std::fprintf(stderr, "braid-perf: ncclGetUniqueId failed: %s\n", ncclGetErrorString(result));
    return kExitFailure;
  }
  test::LaunchSpec spec;
  spec.nRanks = nRanks;
  spec.argv.push_back(selfPath(argv0));
  spec.argv.insert(spec.argv.end(), options.rankArgs.begin(), options.rankArgs.end());
  spec.uniqueIdHex = test::uniqueIdToHex(id);
  // The ranks enforce -T themselves; this only catches a rank that cannot.
  spec.timeoutSeconds = options.timeoutSeconds > 0 ? options.timeoutSeconds + 30.0 : 0;
  spec.maxCapturedBytes = 0;  // streamed, not kept
  spec.onLine = [](int rank, std::string_view line) {
    std::FILE* to = rank == 0 ? stdout : stderr;
    if (rank == 0)
      std::fprintf(to, "%.*s\n", static_cast<int>(line.size()), line.data());
    else
      std::fprintf(to, "[rank %d] %.*s\n", rank, static_cast<int>(line.size()), line.data());
    std::fflush(to);
  };
  struct sigaction stop {};
  stop.sa_handler = onStopSignal;
  sigemptyset(&stop.sa_mask);
  if (sigaction(SIGINT, &stop, nullptr) != 0 || sigaction(SIGTERM, &stop, nullptr) != 0) {
    std::perror("braid-perf: sigaction");
    return kExitFailure;
  }
  spec.cancel = &gCancel;

  std::vector<test::RankResult> results;
  try {
    results = test::runRanks(spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-perf: cannot start the ranks: %s\n", e.what());
    return kExitFailure;
  }
  std::vector<int> exits;
  for (const auto& r : results) {
    if (test::succeeded(r)) {
      exits.push_back(0);
      continue;
    }
    exits.push_back(r.exitCode >= 0 && !r.timedOut ? r.exitCode : kExitFailure);  // a signal or a hang: failure
    std::fprintf(stderr, "braid-perf: rank %d %s\n", r.rank, test::describeEnd(r).c_str());
  }
  return combineRankExits(exits);
}

// Parent mode: threads or processes (--ranks, else chooseRankLayout's rule).
int runParent(const PerfOptions& options, char** argv, int argc) {
  int gpus = 0;
  // Only when the choice depends on it: the CUDA runtime is then initialised before the launcher
  // forks, which is safe because the children only exec.
  if (options.ranksAs == RanksAs::Auto && options.memory != MemoryKind::Host && cudaGetDeviceCount(&gpus) != cudaSuccess)
    gpus = 0;
  const RankLayout layout = chooseRankLayout(options.launchRanks, options.ranksAs, options.memory, gpus);
  if (layout.threads) return runThreadRanks(options, layout.nRanks, std::vector<std::string>(argv, argv + argc));
  return runLocalRanks(options, layout.nRanks, argv[0]);
}

// Under mpirun: the unique id from NCCL_COMM_ID on every rank, or rank 0's through MPI_Bcast.
bool uniqueIdUnderMpi(const LaunchContext& context, OpenMpi& mpi, ncclUniqueId* id) {
  if (std::getenv("NCCL_COMM_ID") != nullptr) {
    ncclResult_t result = ncclGetUniqueId(id);
    if (result == ncclSuccess) return true;
    std::fprintf(stderr, "braid-perf rank %d: ncclGetUniqueId failed: %s\n", context.rank, ncclGetErrorString(result));
    return false;
  }
  std::string error;
  if (!mpi.start(&error)) {
    std::fprintf(stderr,
                 "braid-perf rank %d: started by mpirun (%s), but %s.\n"
                 "  braid-perf shares the unique id through Open MPI's libmpi.so.40 (loaded at run time);\n"
                 "  with another MPI, set NCCL_COMM_ID=<host of rank 0>:<free port> for every rank.\n",
                 context.rank, context.source.c_str(), error.c_str());
    return false;
  }
  if (mpi.rank() != context.rank || mpi.size() != context.nRanks) {
    std::fprintf(stderr, "braid-perf rank %d: MPI says rank %d of %d, the environment %d of %d\n", context.rank,
                 mpi.rank(), mpi.size(), context.rank, context.nRanks);
    return false;
  }
  ncclResult_t result = context.rank == 0 ? ncclGetUniqueId(id) : ncclSuccess;
  // Rank 0 broadcasts even after a failure (a zero id), so that no rank waits forever.
  if (!mpi.broadcast(id, sizeof *id, 0)) {
    std::fprintf(stderr, "braid-perf rank %d: MPI_Bcast of the unique id failed\n", context.rank);
    return false;
  }
  if (result != ncclSuccess) {
    std::fprintf(stderr, "braid-perf rank 0: ncclGetUniqueId failed: %s\n", ncclGetErrorString(result));
    return false;
  }
  return true;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ParseResult parsed = parseArgs(args);
  if (!parsed.ok) {
    std::fprintf(stderr, "braid-perf: %s\n%s", parsed.error.c_str(), usage(argv[0]).c_str());
    return kExitUsage;
  }
  const PerfOptions& options = parsed.options;
  if (options.help) {
    std::printf("%s", usage(argv[0]).c_str());
    return 0;
  }
  LaunchContext context;
  std::string error;
  if (!detectLaunch([](const char* name) { return static_cast<const char*>(std::getenv(name)); }, &context, &error)) {
    std::fprintf(stderr, "braid-perf: %s\n", error.c_str());
    return kExitUsage;
  }
  if (!options.plotComparePath.empty()) {  // before the run, not after it
    ReportSeries other;
    if (!loadReportSeries(options.plotComparePath, &other, &error)) {
      std::fprintf(stderr, "braid-perf: --plot-compare: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  if (context.mode == LaunchMode::Parent) return runParent(options, argv, argc);
  if (options.launchRanks > 0) {
    std::fprintf(stderr, "braid-perf: -np starts local ranks; it cannot be used when %s already makes this a rank\n",
                 context.source.c_str());
    return kExitUsage;
  }
  if (options.ranksAs == RanksAs::Threads) {
    std::fprintf(stderr, "braid-perf: --ranks threads runs the ranks in one process; %s already makes this process "
                 "one rank (run braid-perf without mpirun or braid-launch)\n", context.source.c_str());
    return kExitUsage;
  }

  RankSetup setup;
  setup.rank = context.rank;
  setup.nRanks = context.nRanks;
  setup.localRank = context.localRank;
  setup.commandLine.assign(argv, argv + argc);
  OpenMpi mpi;  // lives until the ranks are done: MPI_Finalize runs at the end
  if (context.mode == LaunchMode::Launched) {
    test::RankEnv env;
    if (!test::readRankEnv(&env, &error) || !env.hasUniqueId) {
      std::fprintf(stderr, "braid-perf rank %d: %s\n", context.rank,
                   error.empty() ? "BRAID_UNIQUE_ID is not set" : error.c_str());
      return kExitUsage;
    }
    setup.id = env.uniqueId;
  } else if (!uniqueIdUnderMpi(context, mpi, &setup.id)) {
    return kExitFailure;
  }
  // Rank 0's lines go out as soon as they are printed, also through a pipe.
  if (setvbuf(stdout, nullptr, _IOLBF, 0) != 0) std::fprintf(stderr, "braid-perf: cannot line-buffer stdout\n");
  return runRank(options, setup);
}

}  // namespace
}  // namespace braid::perf

int main(int argc, char** argv) { return braid::perf::run(argc, argv); }
