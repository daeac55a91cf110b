// The real NCCL, found and loaded at run time (issue 14 item 1). One library per process:
// BRAID_NCCL_LIBRARY when set (that file only), else the first usable libnccl.so.2 among the
// usual places (candidatePaths). A file is refused when it is braid itself or another copy of
// braid (it exports braidVersion), when dlopen fails, when it has no pncclGetVersion, or when
// its version is older than 2.28 (braid's ABI).
//
// Loaded with RTLD_DEEPBIND: libnccl.so.2 calls several of its own exported names through
// its PLT (ncclGetUniqueId, ncclBroadcast, ncclCommRegister, ... : `objdump -R`), and with
// braid in the global scope (LD_PRELOAD, or linked as libnccl.so.2) those calls would bind to
// braid's functions and receive the real NCCL's handles. DEEPBIND makes the library's own
// definitions win for its own references. braid then calls the strong pnccl* names, which
// are the library's definitions whatever the weak nccl* names resolve to. The sanitizer
// runtimes refuse DEEPBIND (they interpose malloc), so under ASan/TSan nothing is loaded.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace braid::fallback {

struct RealNccl {
  void* handle = nullptr;
  std::string path;
  int version = 0;  // ncclGetVersion's code: 22809 for 2.28.9
  // The library's definition of a strong profiling name ("pncclAllReduce"), or nullptr.
  void* symbol(const char* pname) const;
};

// Where the real NCCL may be, in search order, before any file is opened (pure but for the
// filesystem globs): BRAID_NCCL_LIBRARY alone when set; else libnccl.so.2 (then libnccl.so)
// in LD_LIBRARY_PATH's folders, the dynamic loader's configured folders (/etc/ld.so.conf and
// what it includes), the CUDA toolkit (CUDA_HOME, CUDA_PATH, /usr/local/cuda), the system's
// library folders, and Python environments' nvidia/nccl/lib (VIRTUAL_ENV, CONDA_PREFIX,
// site-packages and dist-packages under /usr, /usr/local, /opt/conda, /opt/*(/.venv) and ~/.local).
// Files that do not exist are left out; a file reached twice is listed once.
using EnvLookup = std::function<const char*(const char*)>;
std::vector<std::string> candidatePaths(const EnvLookup& env, const std::string& ldSoConf = "/etc/ld.so.conf");

// Why `path` cannot be braid's real NCCL, or "" when it can; on success *out holds it loaded.
std::string tryLoad(const std::string& path, RealNccl* out);

// "2.28.9" from ncclGetVersion's 22809.
std::string versionText(int code);

// The process's real NCCL, loaded on the first call (thread-safe), or nullptr; *report (may
// be null) says which files were tried and why each was refused, or which one was loaded.
const RealNccl* realNccl(std::string* report = nullptr);

}  // namespace braid::fallback
