#include "fallback/real_nccl.h"

#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>

#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <utility>

#include "nccl.h"

namespace braid::fallback {
namespace {

constexpr int kOldestVersion = 22800;  // 2.28.0: braid's ABI (nccl.h 2.28.9)

bool isFile(const std::string& path, struct stat* st) { return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode); }

std::vector<std::string> globPaths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  return out;
}

std::vector<std::string> splitColons(const char* text) {
  std::vector<std::string> out;
  std::stringstream in(text ? text : "");
  for (std::string item; std::getline(in, item, ':');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The folders an ld.so.conf names, following its `include` lines (bounded depth: a loop of
// includes cannot recurse forever).
void ldConfFolders(const std::string& file, int depth, std::vector<std::string>* out) {
  std::ifstream in(file);
  for (std::string line; depth < 8 && std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string first;
    if (!(words >> first)) continue;
    if (first == "include") {
      for (std::string pattern; words >> pattern;) {
        if (pattern[0] != '/') pattern = file.substr(0, file.rfind('/') + 1) + pattern;
        for (const auto& f : globPaths(pattern)) ldConfFolders(f, depth + 1, out);
      }
    } else if (first[0] == '/') {
      out->push_back(first);
    }
  }
}

// The file this code was loaded from (libbraid.so, or the program it is linked into).
bool ownFile(struct stat* st) {
  Dl_info info{};
  return ::dladdr(reinterpret_cast<void*>(&ownFile), &info) != 0 && info.dli_fname != nullptr &&
         ::stat(info.dli_fname, st) == 0;
}

bool underSanitizer() {
  return ::dlsym(RTLD_DEFAULT, "__asan_init") != nullptr || ::dlsym(RTLD_DEFAULT, "__tsan_init") != nullptr;
}

}  // namespace

std::string versionText(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

void* RealNccl::symbol(const char* pname) const { return handle ? ::dlsym(handle, pname) : nullptr; }

std::vector<std::string> candidatePaths(const EnvLookup& env, const std::string& ldSoConf) {
  auto value = [&env](const char* name) -> const char* {
    const char* v = env(name);
    return v && *v ? v : nullptr;
  };
  std::vector<std::string> files;
  std::set<std::pair<dev_t, ino_t>> seen;
  auto add = [&](const std::string& path) {
    struct stat st {};
    if (isFile(path, &st) && seen.insert({st.st_dev, st.st_ino}).second) files.push_back(path);
  };
  if (const char* forced = value("BRAID_NCCL_LIBRARY")) {
    files.emplace_back(forced);  // that file only, even if missing: tryLoad says why
    return files;
  }
  std::vector<std::string> folders = splitColons(value("LD_LIBRARY_PATH"));
  ldConfFolders(ldSoConf, 0, &folders);
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = value(var)) {
      folders.push_back(std::string(root) + "/lib64");
      folders.push_back(std::string(root) + "/lib");
    }
  for (const char* f : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib",
                        "/usr/local/cuda/targets/sbsa-linux/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                        "/usr/lib64", "/usr/lib", "/usr/local/lib"})
    folders.emplace_back(f);
  std::vector<std::string> pythonRoots;
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char* root = value(var)) {
      folders.push_back(std::string(root) + "/lib");
      pythonRoots.emplace_back(root);
    }
  if (const char* home = value("HOME")) pythonRoots.push_back(std::string(home) + "/.local");
  // /opt/*/.venv: images that keep a framework's environment there (/opt/torch/.venv).
  for (const char* r : {"/usr/local", "/usr", "/opt/conda", "/opt/*/.venv", "/opt/*"}) pythonRoots.emplace_back(r);
  for (const auto& root : pythonRoots)
    for (const char* kind : {"site-packages", "dist-packages"}) {
      for (const auto& f : globPaths(root + "/lib/python3*/" + kind + "/nvidia/nccl/lib")) folders.push_back(f);
      for (const auto& f : globPaths(root + "/lib/python3/" + kind + "/nvidia/nccl/lib")) folders.push_back(f);
    }
  for (const auto& folder : folders)
    for (const char* name : {"/libnccl.so.2", "/libnccl.so"}) add(folder + name);
  return files;
}

std::string tryLoad(const std::string& path, RealNccl* out) {
  struct stat st {}, self {};
  if (::stat(path.c_str(), &st) != 0) return "cannot open it (no such file, or no permission)";
  if (ownFile(&self) && st.st_dev == self.st_dev && st.st_ino == self.st_ino) return "it is braid itself";
  if (underSanitizer())
    return "not loaded under a sanitizer: the real NCCL needs RTLD_DEEPBIND (so that its calls to its own exported "
           "names stay its own), which the sanitizer runtimes refuse";
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    return std::string("dlopen failed: ") + (e ? e : "unknown error");
  }
  std::string why;
  using GetVersion = ncclResult_t (*)(int*);
  int version = 0;
  if (::dlsym(handle, "braidVersion") != nullptr) {
    why = "it is a copy of braid (it exports braidVersion)";
  } else if (auto getVersion = reinterpret_cast<GetVersion>(::dlsym(handle, "pncclGetVersion")); getVersion == nullptr) {
    why = "it has no pncclGetVersion: not an NCCL library";
  } else if (getVersion(&version) != ncclSuccess) {
    why = "its ncclGetVersion failed";
  } else if (version < kOldestVersion) {
    why = "it is NCCL " + versionText(version) + ", older than 2.28 (braid's ABI)";
  }
  if (!why.empty()) {
    ::dlclose(handle);
    return why;
  }
  out->handle = handle;
  out->path = path;
  out->version = version;
  return "";
}

const RealNccl* realNccl(std::string* report) {
  static std::once_flag once;
  static RealNccl lib;
  static std::string text;
  std::call_once(once, [] {
    auto paths = candidatePaths([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
    for (const auto& path : paths) {
      std::string why = tryLoad(path, &lib);
      if (why.empty()) {
        text = "the real NCCL " + versionText(lib.version) + " from " + path;
        return;
      }
      text += (text.empty() ? "" : "; ") + path + ": " + why;
    }
    if (paths.empty())
      text = "no libnccl.so.2 found (searched LD_LIBRARY_PATH, ld.so.conf's folders, the CUDA toolkit, the system's "
             "library folders and Python environments' nvidia/nccl/lib)";
    text = "no usable real NCCL: " + text + ". Fix: set BRAID_NCCL_LIBRARY=/path/to/libnccl.so.2 (NCCL 2.28 or newer)";
  });
  if (report) *report = text;
  return lib.handle ? &lib : nullptr;
}

}  // namespace braid::fallback
