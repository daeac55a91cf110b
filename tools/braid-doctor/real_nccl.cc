#include "real_nccl.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>

namespace braid {

namespace {

// Strings in braid's .rodata that NVIDIA's libnccl.so.2 does not hold: the names of braid's own
// environment variables and the start of its version line (src/core/log.cc).
const char* const kBraidMarkers[] = {"BRAID_INIT_TIMEOUT", "BRAID_HOSTID", "NCCL INFO braid "};
constexpr size_t kRodataLimit = 256u << 20;

std::string realPathOf(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

std::string baseName(const std::string& p) { return p.substr(p.rfind('/') + 1); }

bool readAt(int fd, void* buf, size_t n, off_t off) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, static_cast<char*>(buf) + done, n - done, off + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<size_t>(got);
  }
  return true;
}

// The bytes of the ELF64 section `name`; false with `why` when the file is no ELF64 object or
// the section is missing.
bool readSection(const std::string& path, const char* name, std::string* out, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  Elf64_Ehdr eh;
  if (!readAt(fd, &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64) {
    *why = "not a 64-bit ELF shared object";
    return false;
  }
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 || eh.e_shstrndx >= eh.e_shnum) {
    *why = "ELF section table unreadable";
    return false;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!readAt(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), static_cast<off_t>(eh.e_shoff))) {
    *why = "ELF section table truncated";
    return false;
  }
  const Elf64_Shdr& strSec = sh[eh.e_shstrndx];
  if (strSec.sh_size > (1u << 20)) {
    *why = "ELF section names too large";
    return false;
  }
  std::string names(strSec.sh_size, '\0');
  if (!readAt(fd, names.data(), names.size(), static_cast<off_t>(strSec.sh_offset))) {
    *why = "ELF section names truncated";
    return false;
  }
  for (const auto& s : sh) {
    if (s.sh_name >= names.size() || std::strcmp(names.c_str() + s.sh_name, name) != 0) continue;
    if (s.sh_type == SHT_NOBITS || s.sh_size > kRodataLimit) {
      *why = std::string(name) + " unusable";
      return false;
    }
    out->assign(s.sh_size, '\0');
    if (!readAt(fd, out->data(), out->size(), static_cast<off_t>(s.sh_offset))) {
      *why = std::string(name) + " truncated";
      return false;
    }
    return true;
  }
  *why = std::string("no ") + name + " section";
  return false;
}

void addGlob(const std::string& pattern, std::vector<std::string>* dirs) {
  glob_t g;
  if (::glob(pattern.c_str(), GLOB_NOSORT | GLOB_ONLYDIR, nullptr, &g) == 0) {
    std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    std::sort(found.begin(), found.end());
    dirs->insert(dirs->end(), found.begin(), found.end());
  }
  ::globfree(&g);
}

// libnccl.so.2 first (the soname programs load), then the other libnccl.so* names.
std::vector<std::string> ncclFilesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return names;
  for (int n = 0; n < 100000; ++n) {
    dirent* e = ::readdir(d);
    if (!e) break;
    std::string name = e->d_name;
    if (name.rfind("libnccl.so", 0) == 0) names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    bool ra = a == "libnccl.so.2", rb = b == "libnccl.so.2";
    return ra != rb ? ra : a < b;
  });
  for (auto& n : names) n = dir + "/" + n;
  return names;
}

// Loads one candidate and asks its version; fills `c` either way.
void tryCandidate(RealNcclCandidate* c) {
  std::string why;
  if (isBraidLibrary(c->realPath, &why)) {
    c->why = "braid's own library (" + why + ")";
    return;
  }
  if (!why.empty()) {  // not an ELF, unreadable, ...
    c->why = why;
    return;
  }
  ::dlerror();
  void* h = ::dlopen(c->realPath.c_str(), RTLD_LOCAL | RTLD_NOW);
  if (!h) {
    const char* e = ::dlerror();
    c->why = std::string("dlopen failed: ") + (e ? e : "unknown error");
    return;
  }
  using GetVersion = int (*)(int*);
  auto getVersion = reinterpret_cast<GetVersion>(::dlsym(h, "ncclGetVersion"));
  if (!getVersion) {
    c->why = "no ncclGetVersion: not an NCCL library";
    ::dlclose(h);
    return;
  }
  int code = 0;
  int rc = getVersion(&code);
  if (rc != 0 || code <= 0) {
    c->why = "ncclGetVersion failed (result " + std::to_string(rc) + ")";
    ::dlclose(h);
    return;
  }
  c->version = code;
  c->accepted = true;  // kept loaded: the caller may use it
}

}  // namespace

bool isBraidLibrary(const std::string& path, std::string* why) {
  why->clear();
  std::string real = realPathOf(path);
  if (real.empty()) {
    *why = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  if (baseName(real).rfind("libbraid", 0) == 0) {
    *why = "its file is " + baseName(real);
    return true;
  }
  std::string rodata;
  if (!readSection(real, ".rodata", &rodata, why)) return false;
  for (const char* m : kBraidMarkers)
    if (rodata.find(m) != std::string::npos) {
      *why = std::string("its .rodata holds \"") + m + "\"";
      return true;
    }
  return false;
}

std::string ncclVersionString(int code) {
  if (code <= 0) return "unknown";
  int major, minor, patch = code % 100;
  if (code >= 10000) {
    major = code / 10000;
    minor = (code % 10000) / 100;
  } else {
    major = code / 1000;
    minor = (code % 1000) / 100;
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

RealNcclSearchOptions realNcclOptionsFromEnv() {
  RealNcclSearchOptions o;
  if (const char* e = std::getenv("BRAID_NCCL_LIBRARY")) o.explicitPath = e;
  if (const char* e = std::getenv("LD_LIBRARY_PATH")) o.ldLibraryPath = e;
  return o;
}

std::vector<std::string> realNcclSearchDirs(const RealNcclSearchOptions& opt) {
  std::vector<std::string> dirs;
  size_t start = 0;
  const std::string& lp = opt.ldLibraryPath;
  while (start < lp.size()) {
    size_t colon = lp.find(':', start);
    if (colon == std::string::npos) colon = lp.size();
    if (colon > start) dirs.push_back(lp.substr(start, colon - start));
    start = colon + 1;
  }
  if (opt.standardDirs) {
    dirs.push_back("/usr/lib/x86_64-linux-gnu");
    dirs.push_back("/usr/local/cuda/lib64");
    addGlob("/usr/local/cuda/targets/*/lib", &dirs);
    // pip's nvidia-nccl-cu* wheels: site-packages/nvidia/nccl/lib of the usual Pythons.
    std::vector<std::string> roots = {"/usr/lib", "/usr/local/lib", "/opt/conda/lib"};
    for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
      if (const char* v = std::getenv(var)) roots.push_back(std::string(v) + "/lib");
    if (const char* home = std::getenv("HOME")) {
      roots.push_back(std::string(home) + "/.local/lib");
      addGlob(std::string(home) + "/.pyenv/versions/*/lib", &roots);
    }
    for (const auto& r : roots)
      for (const char* sub : {"site-packages", "dist-packages"}) addGlob(r + "/python3*/" + sub + "/nvidia/nccl/lib", &dirs);
    addGlob("/usr/lib/python3/dist-packages/nvidia/nccl/lib", &dirs);
  }
  dirs.insert(dirs.end(), opt.extraDirs.begin(), opt.extraDirs.end());
  return dirs;
}

RealNcclSearch findRealNccl(const RealNcclSearchOptions& opt) {
  RealNcclSearch s;
  std::vector<std::string> files;
  if (!opt.explicitPath.empty()) {
    s.explicitPath = true;
    files.push_back(opt.explicitPath);
  } else {
    for (const auto& d : realNcclSearchDirs(opt))
      for (auto& f : ncclFilesIn(d)) files.push_back(f);
  }
  std::set<std::string> seen;  // one try per real file (libnccl.so and libnccl.so.2 are one)
  for (const auto& f : files) {
    RealNcclCandidate c;
    c.path = f;
    errno = 0;
    c.realPath = realPathOf(f);
    if (c.realPath.empty()) {
      c.why = std::string("cannot open: ") + std::strerror(errno ? errno : ENOENT);
      s.tried.push_back(c);
      continue;
    }
    if (!seen.insert(c.realPath).second) continue;
    tryCandidate(&c);
    s.tried.push_back(c);
    if (c.accepted) {
      s.path = c.path;
      s.version = c.version;
      break;
    }
  }
  return s;
}

}  // namespace braid
