// Runs a helper program (nvcc, lspci, ucx_info, the doctor's own probe modes) with a time limit:
// its stdout and stderr together, bounded in size; killed when it overruns. Uses posix_spawn,
// never fork, because CUDA may already be initialised in the doctor.
#pragma once
#include <string>
#include <vector>

namespace braid::doctor {

struct CommandResult {
  bool started = false;   // false: not found or not executable (see error)
  bool timedOut = false;  // killed after the limit
  int exitCode = -1;      // the exit status, or 128+signal
  std::string output;     // stdout and stderr, at most 256 KiB
  std::string error;      // why it did not start or finish
};

// argv[0] is looked up in PATH when it has no '/'. `cwd` empty: the doctor's own.
CommandResult runCommand(const std::vector<std::string>& argv, double timeoutSeconds, const std::string& cwd = {});
// The first executable `name` in PATH, then in `extraDirs`; empty when none.
std::string findProgram(const std::string& name, const std::vector<std::string>& extraDirs = {});

}  // namespace braid::doctor
