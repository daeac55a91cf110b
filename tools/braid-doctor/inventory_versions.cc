// Versions: the NVIDIA driver, the CUDA runtime the doctor was built with, the toolkit on the
// machine, braid itself and the real NCCL if one is installed.
#include <algorithm>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>

#include "braid/version.h"
#include "host_files.h"
#include "inventory.h"
#include "fallback/real_nccl.h"
#include "report.h"
#include "subprocess.h"

namespace braid::doctor {

namespace {

std::string cudaVersionString(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0, V13.0.88".
std::string nvccRelease(const std::string& out) {
  size_t at = out.find("release ");
  if (at == std::string::npos) return trim(out.substr(0, 120));
  return trim(out.substr(at + 8, out.find('\n', at) - at - 8));
}

void driverVersions(Report* r) {
  int driver = 0, runtime = 0;
  cudaError_t de = cudaDriverGetVersion(&driver);
  cudaError_t re = cudaRuntimeGetVersion(&runtime);
  auto proc = readLine("/proc/driver/nvidia/version");
  if (de != cudaSuccess)
    addFact(r, "versions", "CUDA driver", std::string("unknown: cudaDriverGetVersion: ") + cudaGetErrorString(de),
            Severity::Warning, "the driver library (libcuda.so.1) could not be asked");
  else if (driver == 0)
    addFact(r, "versions", "CUDA driver", "none", Severity::Ok,
            proc ? "the kernel module is loaded but libcuda.so.1 is missing: install the driver's user-space part"
                 : "no NVIDIA driver on this machine");
  else
    addFact(r, "versions", "CUDA driver", "CUDA " + cudaVersionString(driver) + " API");
  if (proc) addFact(r, "versions", "kernel module", *proc);
  if (re != cudaSuccess)
    addFact(r, "versions", "CUDA runtime", std::string("unknown: ") + cudaGetErrorString(re), Severity::Warning);
  else {
    Severity s = Severity::Ok;
    std::string verdict = "linked into braid-doctor (static)";
    if (driver > 0 && driver / 1000 < runtime / 1000) {
      s = Severity::Error;
      verdict = "the driver supports CUDA " + cudaVersionString(driver) + " only; fix: update the NVIDIA driver";
    } else if (driver > 0 && driver < runtime) {
      verdict = "runs on the older driver of the same major version (minor version compatibility); "
                "features newer than CUDA " + cudaVersionString(driver) + " are unavailable";
    }
    addFact(r, "versions", "CUDA runtime", cudaVersionString(runtime), s, verdict);
  }
}

void toolkitVersion(const InventoryOptions& opt, Report* r) {
  std::string nvcc = findProgram("nvcc", {"/usr/local/cuda/bin"});
  if (nvcc.empty()) {
    addFact(r, "versions", "CUDA toolkit", "not found", Severity::Ok, "no nvcc in PATH or /usr/local/cuda/bin");
    return;
  }
  CommandResult c = runCommand({nvcc, "--version"}, std::min(opt.budgetSeconds, 5.0));
  if (!c.started || c.timedOut || c.exitCode != 0)
    addFact(r, "versions", "CUDA toolkit", nvcc + ": " + (c.error.empty() ? "exit " + std::to_string(c.exitCode) : c.error),
            Severity::Ok, "the toolkit is only needed to build");
  else
    addFact(r, "versions", "CUDA toolkit", nvccRelease(c.output) + " (" + nvcc + ")");
}

// The real NCCL as braid's fallback finds it (src/fallback/real_nccl.h: the same search, the
// same refusals), loaded here to ask its version.
void realNcclVersion(Report* r, InventoryFindings* found) {
  const char* forced = std::getenv("BRAID_NCCL_LIBRARY");
  std::vector<std::pair<std::string, std::string>> refused;  // path, why
  fallback::RealNccl lib;
  for (const std::string& path : fallback::candidatePaths([](const char* name) { return static_cast<const char*>(std::getenv(name)); })) {
    std::string why = fallback::tryLoad(path, &lib);
    if (why.empty()) break;
    refused.emplace_back(path, why);
  }
  if (lib.handle != nullptr) {
    found->realNccl = lib.path;
    addFact(r, "versions", "real NCCL", fallback::versionText(lib.version) + " (" + lib.path + ")", Severity::Ok,
            "used for the comparison with braid");
    for (const auto& [path, why] : refused)  // before the accepted one: braid's own, old or broken copies
      addFact(r, "versions", "NCCL candidate", path, Severity::Ok, "refused: " + why);
  } else if (forced != nullptr && *forced != '\0') {
    addFact(r, "versions", "real NCCL", refused.front().first + ": " + refused.front().second, Severity::Warning,
            "BRAID_NCCL_LIBRARY must name NVIDIA's libnccl.so.2 (2.28 or newer); fix the path or unset it");
  } else {
    std::string tried;
    for (const auto& [path, why] : refused) tried += (tried.empty() ? "" : "; ") + path + ": " + why;
    addFact(r, "versions", "real NCCL", "not found", Severity::Ok,
            tried.empty() ? "no libnccl.so.2 in LD_LIBRARY_PATH, ld.so.conf's, CUDA's, the system's or Python's library "
                            "folders; install NCCL 2.28 to compare braid with it"
                          : "refused: " + tried);
  }
}

}  // namespace

void inventoryVersions(const InventoryOptions& opt, Report* r, InventoryFindings* found) {
  driverVersions(r);
  toolkitVersion(opt, r);
  addFact(r, "versions", "braid", BRAID_VERSION_STRING, Severity::Ok, "NCCL API 2.28.9 compatible");
  realNcclVersion(r, found);
}

}  // namespace braid::doctor
