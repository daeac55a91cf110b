// braid-launch -np N [-t SECONDS] [--grace SECONDS] [--env K=V]... -- program args...
//
// Starts N ranks of `program` on this machine. Each gets BRAID_LAUNCH_RANK, BRAID_LAUNCH_NRANKS
// and BRAID_UNIQUE_ID (from ncclGetUniqueId here, so the bootstrap root lives in this process).
// Every output line is printed as "[rank r] line". Exit status: 0 when every rank exited 0;
// 124 when a rank timed out; otherwise the first failing rank's code (128+signal if killed).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/rank_env.h"
#include "tests/launcher/launcher.h"

namespace {

volatile std::sig_atomic_t gCancel = 0;

void onStopSignal(int) { gCancel = 1; }

void usage(FILE* to) {
  std::fprintf(to,
               "usage: braid-launch -np N [-t SECONDS] [--grace SECONDS] [--env K=V]... [--no-id] -- program args...\n"
               "  -np N          start N ranks (1..4096)\n"
               "  -t SECONDS     kill the ranks still running after SECONDS (default: no limit)\n"
               "  --grace S      between SIGTERM and SIGKILL on timeout (default 2)\n"
               "  --env K=V      set K=V in every rank (repeatable)\n"
               "  --no-id        do not call ncclGetUniqueId; BRAID_UNIQUE_ID stays unset\n");
}

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "braid-launch: %s\n", message.c_str());
  usage(stderr);
  std::exit(2);
}

bool parseSeconds(const char* text, double* out) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value >= 0) || value > 1e9) return false;
  *out = value;
  return true;
}

struct CliOptions {
  braid::test::LaunchSpec spec;
  bool wantId = true;
};

CliOptions parseArgs(int argc, char** argv) {
  CliOptions options;
  options.spec.nRanks = 0;
  int i = 1;
  auto value = [&](const char* flag) -> const char* {
    if (i + 1 >= argc) die(std::string(flag) + " needs a value");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "-np" || arg == "-n") {
      const char* text = value(arg.c_str());
      if (!braid::test::parseBoundedInt(text, 1, 4096, &options.spec.nRanks))
        die(std::string("-np wants a rank count in 1..4096, got '") + text + "'");
    } else if (arg == "-t" || arg == "--timeout") {
      const char* text = value(arg.c_str());
      if (!parseSeconds(text, &options.spec.timeoutSeconds)) die(std::string("bad timeout '") + text + "'");
    } else if (arg == "--grace") {
      const char* text = value(arg.c_str());
      if (!parseSeconds(text, &options.spec.graceSeconds)) die(std::string("bad grace period '") + text + "'");
    } else if (arg == "--env") {
      std::string kv = value("--env");
      size_t eq = kv.find('=');
      if (eq == 0 || eq == std::string::npos) die("--env wants K=V, got '" + kv + "'");
      options.spec.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (arg == "--no-id") {
      options.wantId = false;
    } else if (arg == "-h" || arg == "--help") {
      usage(stdout);
      std::exit(0);
    } else {
      break;  // the program; "--" is optional when it does not start with '-'
    }
  }
  if (i < argc && argv[i][0] == '-' && std::string(argv[i - 1]) != "--") die(std::string("unknown option ") + argv[i]);
  if (options.spec.nRanks == 0) die("-np N is required");
  if (i >= argc) die("no program given");
  for (; i < argc; ++i) options.spec.argv.emplace_back(argv[i]);
  return options;
}

int exitStatusFor(const std::vector<braid::test::RankResult>& results) {
  for (const auto& r : results)
    if (r.timedOut) return 124;
  for (const auto& r : results) {
    if (r.signal != 0) return 128 + r.signal;
    if (r.exitCode != 0) return r.exitCode > 0 ? r.exitCode : 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CliOptions options = parseArgs(argc, argv);
  braid::test::LaunchSpec& spec = options.spec;

  if (options.wantId) {
    ncclUniqueId id{};
    ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) {
      std::fprintf(stderr, "braid-launch: ncclGetUniqueId failed: %s (%s)\n", ncclGetErrorString(result),
                   ncclGetLastError(nullptr));
      return 2;
    }
    spec.uniqueIdHex = braid::test::uniqueIdToHex(id);
  }

  // Ctrl-C and kill stop the ranks (their own process groups do not see the terminal's signal).
  struct sigaction stop {};
  stop.sa_handler = onStopSignal;
  sigemptyset(&stop.sa_mask);
  if (sigaction(SIGINT, &stop, nullptr) != 0 || sigaction(SIGTERM, &stop, nullptr) != 0 ||
      sigaction(SIGHUP, &stop, nullptr) != 0) {
    std::perror("braid-launch: sigaction");
    return 2;
  }
  spec.cancel = &gCancel;
  spec.onLine = [](int rank, std::string_view line) {
    std::printf("[rank %d] %.*s\n", rank, static_cast<int>(line.size()), line.data());
    std::fflush(stdout);
  };
  spec.maxCapturedBytes = 0;  // everything is printed as it arrives; nothing to keep

  std::vector<braid::test::RankResult> results;
  try {
    results = braid::test::runRanks(spec);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-launch: %s\n", e.what());
    return 2;
  }
  for (const auto& r : results)
    if (!braid::test::succeeded(r))
      std::fprintf(stderr, "braid-launch: rank %d %s\n", r.rank, braid::test::describeEnd(r).c_str());
  if (gCancel) std::fprintf(stderr, "braid-launch: interrupted; ranks stopped\n");
  if (std::any_of(results.begin(), results.end(), [](const auto& r) { return r.timedOut; }))
    std::fprintf(stderr, "braid-launch: timeout of %g s passed\n", spec.timeoutSeconds);
  return exitStatusFor(results);
}
