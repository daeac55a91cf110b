// MPS: whether the CUDA Multi-Process Service runs. Separate processes on one GPU run their
// kernels in turns without it (braid allows several ranks per GPU), and a pipe left behind by a
// dead daemon makes CUDA programs fail to start.
#include <cstdlib>

#include "host_files.h"
#include "inventory.h"
#include "report.h"

namespace braid::doctor {

namespace {

// In a container the daemon may run outside, sharing only the pipe folder: /proc shows it not.
bool inContainer() {
  if (exists("/.dockerenv") || exists("/run/.containerenv")) return true;
  auto init = readLine("/proc/1/comm");
  return !init || (*init != "systemd" && *init != "init");
}

}  // namespace

void inventoryMps(const InventoryOptions&, Report* r, InventoryFindings*) {
  const char* dirEnv = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  std::string dir = dirEnv && *dirEnv ? dirEnv : "/tmp/nvidia-mps";
  bool pipe = exists(dir + "/control");
  std::vector<int> control = processesNamed("nvidia-cuda-mps-control");
  std::vector<int> server = processesNamed("nvidia-cuda-mps-server");
  addFact(r, "mps", "pipe", dir + "/control" + (pipe ? " present" : " absent"));
  if (!control.empty()) {
    addFact(r, "mps", "daemon", "running (pid " + std::to_string(control.front()) + (server.empty() ? "" : ", a server runs") + ")",
            Severity::Ok, "processes share each GPU at once: several ranks per GPU are fast");
    return;
  }
  if (pipe && !dirEnv && !inContainer()) {
    addFact(r, "mps", "daemon", "not running, but its pipe exists", Severity::Warning,
            "a dead MPS daemon's pipe makes CUDA programs fail or wait at start; fix: restart it "
            "(nvidia-cuda-mps-control -d) or remove " + dir);
    return;
  }
  if (pipe) {
    addFact(r, "mps", "daemon", "not seen in /proc, pipe present", Severity::Ok,
            "the daemon may run outside this container or PID namespace; if CUDA programs hang at start, "
            "restart it (nvidia-cuda-mps-control -d)");
    return;
  }
  addFact(r, "mps", "daemon", "not running", Severity::Ok,
          "needed only for several ranks of separate processes on one GPU (they run in turns, ~2.3 ms per "
          "collective, without it): nvidia-cuda-mps-control -d");
}

}  // namespace braid::doctor
