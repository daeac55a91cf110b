// Finds the real NCCL (libnccl.so.2 of NVIDIA, not braid's) on this machine: where it is and
// which version it reports, or every candidate tried and why it was refused.
//
// Self-contained on purpose (plain structs, only the C++ and POSIX libraries): it moves to
// src/fallback (issue 14), which loads the real NCCL behind braid's handles.
//
// braid exports exactly the names libnccl.so.2 exports (nccl* and pnccl*, src/api/exports.map),
// so no exported symbol tells the two apart, and ncclGetVersion gives NCCL's code in both. braid
// is recognised before it is loaded: by its file name (libbraid*, through symlinks) or by
// strings only braid's library holds (its environment variables' names, its version log line)
// in the ELF .rodata section. A candidate is never dlopen'ed when it is braid's.
#pragma once
#include <string>
#include <vector>

namespace braid {

struct RealNcclCandidate {
  std::string path;      // as found (the directory entry)
  std::string realPath;  // after symlinks
  bool accepted = false;
  int version = 0;       // ncclGetVersion's code (22809 for 2.28.9); 0 when not called
  std::string why;       // why it was refused, or "" when accepted
};

struct RealNcclSearchOptions {
  std::string explicitPath;          // BRAID_NCCL_LIBRARY: when set, only this one is tried
  std::string ldLibraryPath;         // LD_LIBRARY_PATH
  std::vector<std::string> extraDirs;  // searched after the standard places (tests)
  bool standardDirs = true;          // /usr/lib/x86_64-linux-gnu, /usr/local/cuda/lib64, ...
};

struct RealNcclSearch {
  std::string path;     // the accepted library; empty when none
  int version = 0;
  bool explicitPath = false;  // the search was BRAID_NCCL_LIBRARY's
  std::vector<RealNcclCandidate> tried;  // in search order, the accepted one last
};

// The options from the environment (BRAID_NCCL_LIBRARY, LD_LIBRARY_PATH).
RealNcclSearchOptions realNcclOptionsFromEnv();
// Directories searched, in order: LD_LIBRARY_PATH's entries, the system's and CUDA's library
// folders, then site-packages/nvidia/nccl/lib of the Python installations found by glob.
std::vector<std::string> realNcclSearchDirs(const RealNcclSearchOptions& opt);
// Stops at the first accepted candidate. Never throws; loads with RTLD_LOCAL|RTLD_NOW and keeps
// the accepted library loaded (the refused ones are closed).
RealNcclSearch findRealNccl(const RealNcclSearchOptions& opt);
// True (with the reason) when the file is braid's library, judged without loading it.
bool isBraidLibrary(const std::string& path, std::string* why);
// "2.28.9" from 22809 (and from the older 2.x codes, major*1000+minor*100+patch).
std::string ncclVersionString(int code);

}  // namespace braid
