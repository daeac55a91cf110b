// Starts N rank processes of one program, captures their output, collects how each ended,
// and kills stragglers after a timeout. Used by braid-launch, braid-perf -np and the
// multi-process tests. Knows nothing about NCCL: the unique id arrives as a hex string.
#pragma once
#include <csignal>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace braid::test {

struct LaunchSpec {
  int nRanks = 1;
  // Program and its arguments. argv[0] is looked up in PATH unless it contains a '/'.
  std::vector<std::string> argv;
  // Set in every rank, after the launcher's own environment (so they override it).
  std::vector<std::pair<std::string, std::string>> env;
  // BRAID_UNIQUE_ID for every rank; left unset when empty.
  std::string uniqueIdHex;
  // Wall-clock limit for the whole run, from the first fork; 0 means none. When it passes,
  // every rank still running gets SIGTERM (its whole process group), then SIGKILL after
  // graceSeconds.
  double timeoutSeconds = 0;
  double graceSeconds = 2.0;
  // Called with each complete line of a rank's output (stdout and stderr merged, without
  // the newline), as it arrives, on the thread that called runRanks.
  std::function<void(int rank, std::string_view line)> onLine;
  // Output kept per rank in RankResult::output; beyond it, the rest is dropped (onLine still
  // sees it) and a note is appended.
  size_t maxCapturedBytes = 64u << 20;
  // A flag that a signal handler may set: the ranks are then stopped as on a timeout, but
  // not marked timedOut.
  const volatile std::sig_atomic_t* cancel = nullptr;
};

struct RankResult {
  int rank = 0;
  int exitCode = -1;     // the exit status when the rank exited normally, else -1
  int signal = 0;        // the signal that ended the rank, else 0
  bool timedOut = false; // the rank was still running when the timeout passed
  std::string output;    // stdout and stderr, interleaved as written
};

// Runs the ranks to completion. Throws std::invalid_argument for a bad spec and
// std::system_error when processes or pipes cannot be created (ranks already started are
// then killed and reaped). A program that cannot be executed is not an exception: its ranks
// end with exit code 127 and the reason in their output.
std::vector<RankResult> runRanks(const LaunchSpec& spec);

bool succeeded(const RankResult& result);
bool allSucceeded(const std::vector<RankResult>& results);
// "exited with code 3", "killed by signal 11 (SIGSEGV)", "timed out (killed by signal 9 ...)".
std::string describeEnd(const RankResult& result);
std::string signalName(int signal);

}  // namespace braid::test
