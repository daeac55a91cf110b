// Storage: GPUDirect Storage. libcufile.so.0 (dlopen'ed, may be absent), its driver opened and
// closed in a probe process of the doctor's own (bounded, its cufile.log in a temporary folder),
// and nvidia-fs: loaded means cuFile can read into GPU memory directly, else it runs in
// compatibility mode (through a host bounce buffer).
#include <algorithm>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "host_files.h"
#include "inventory.h"
#include "report.h"
#include "subprocess.h"

namespace braid::doctor {

namespace {

// cufile.h's CUfileError_t: the cuFile status and the CUDA driver status (both C enums), by value.
struct CuFileStatus {
  int err;
  int cuErr;
};
using CuFileDriverCall = CuFileStatus (*)();
using CuFileGetVersion = CuFileStatus (*)(int*);

// key=value lines of the probe's output.
std::string valueOf(const std::string& out, const std::string& key) {
  size_t at = out.find(key + "=");
  if (at == std::string::npos) return {};
  size_t b = at + key.size() + 1;
  return trim(out.substr(b, out.find('\n', b) - b));
}

}  // namespace

int gdsProbeMain() {
  void* h = ::dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    std::printf("library=absent\nwhy=%s\n", e ? e : "dlopen failed");
    return 0;
  }
  std::printf("library=present\n");
  if (auto getVersion = reinterpret_cast<CuFileGetVersion>(::dlsym(h, "cuFileGetVersion"))) {
    int v = 0;
    if (getVersion(&v).err == 0) std::printf("version=%d\n", v);
  }
  auto open = reinterpret_cast<CuFileDriverCall>(::dlsym(h, "cuFileDriverOpen"));
  auto close = reinterpret_cast<CuFileDriverCall>(::dlsym(h, "cuFileDriverClose_v2"));
  if (!close) close = reinterpret_cast<CuFileDriverCall>(::dlsym(h, "cuFileDriverClose"));
  if (!open || !close) {
    std::printf("open=missing\nwhy=libcufile.so.0 lacks cuFileDriverOpen/Close\n");
    return 0;
  }
  std::fflush(stdout);
  CuFileStatus s = open();
  if (s.err != 0) {
    std::printf("open=failed\nerr=%d\ncuErr=%d\n", s.err, s.cuErr);
    return 0;
  }
  std::printf("open=ok\n");
  CuFileStatus c = close();
  std::printf("close=%s\n", c.err == 0 ? "ok" : "failed");
  std::fflush(stdout);
  return 0;
}

void inventoryStorage(const InventoryOptions& opt, Report* r, InventoryFindings* found) {
  bool nvfs = exists("/proc/driver/nvidia-fs");
  auto nvfsVersion = readLine("/proc/driver/nvidia-fs/version");
  addFact(r, "storage", "nvidia-fs", nvfs ? "loaded" + (nvfsVersion ? " (" + *nvfsVersion + ")" : std::string()) : "not loaded",
          Severity::Ok,
          nvfs ? "cuFile can read into GPU memory directly (direct mode)"
               : "cuFile runs in compatibility mode (through host memory); for direct reads: modprobe nvidia-fs");
  void* h = ::dlopen("libcufile.so.0", RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    addFact(r, "storage", "libcufile.so.0", "not found", Severity::Ok,
            std::string("GPUDirect Storage is not installed (") + (e ? e : "dlopen failed") + ")");
    return;
  }
  ::dlclose(h);
  addFact(r, "storage", "libcufile.so.0", "present");
  if (found->cudaDevices == 0) {
    addSkip(r, "cuFile driver", found->noGpuReason);
    return;
  }
  if (opt.selfPath.empty()) {
    addSkip(r, "cuFile driver", "the doctor's own path is unknown (needed for its probe process)");
    return;
  }
  char dir[] = "/tmp/braid-doctor-gds-XXXXXX";
  if (!::mkdtemp(dir)) {
    addSkip(r, "cuFile driver", "mkdtemp failed: cannot keep cufile.log out of the current folder");
    return;
  }
  CommandResult c = runCommand({opt.selfPath, "--gds-probe"}, std::min(opt.budgetSeconds, 10.0), dir);
  std::string log = std::string(dir) + "/cufile.log";
  auto logText = readFile(log, 4096);
  ::unlink(log.c_str());
  ::rmdir(dir);
  if (!c.started || c.timedOut || c.exitCode != 0) {
    addFact(r, "storage", "cuFile driver", "probe failed: " + (c.error.empty() ? "exit " + std::to_string(c.exitCode) : c.error),
            Severity::Warning, "cuFileDriverOpen did not finish; check /etc/cufile.json and dmesg");
    return;
  }
  std::string open = valueOf(c.output, "open");
  if (open == "missing") {
    addFact(r, "storage", "cuFile driver", valueOf(c.output, "why"), Severity::Warning, "reinstall GPUDirect Storage");
    return;
  }
  std::string version = valueOf(c.output, "version");
  if (!version.empty()) addFact(r, "storage", "cuFile version", version);
  if (open == "ok")
    addFact(r, "storage", "cuFile driver", std::string("opens; ") + (nvfs ? "direct mode possible" : "compatibility mode"));
  else
    addFact(r, "storage", "cuFile driver",
            "cuFileDriverOpen failed (cuFile error " + valueOf(c.output, "err") + ", CUDA " + valueOf(c.output, "cuErr") + ")",
            Severity::Warning,
            "GPUDirect Storage unusable" + (logText && !logText->empty() ? ": cufile.log says " + trim(logText->substr(0, 300)) : std::string()));
}

}  // namespace braid::doctor
