// A file read into GPU memory two ways: cuFile (GPUDirect Storage, or its compatibility mode)
// and POSIX reads into pinned memory followed by cudaMemcpy. The file is written once, its
// page-cache pages dropped (posix_fadvise on this file only), read with O_DIRECT where the file
// system allows, and unlinked as soon as it is open, so that no path leaves it behind.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/vfs.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tools/braid-doctor/measure.h"
#include "tools/braid-doctor/measure_util.h"

namespace braid::doctor {
namespace {
using namespace measure;

constexpr size_t kChunk = size_t{16} << 20;  // per read call, a multiple of any O_DIRECT alignment
constexpr unsigned char kPattern = 0x5c;

// The documented cuFile C API (cufile.h), declared here so the build needs no GDS headers.
struct CuFileError {
  int err;     // CUfileOpError, 0 = CU_FILE_SUCCESS
  int cuErr;   // CUresult
};
struct CuFileDescr {
  int type;  // CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1
  union {
    int fd;
    void* handle;
  } handle;
  const void* fsOps;
};
using CuFileHandle = void*;

struct CuFile {
  void* lib = nullptr;
  CuFileError (*driverOpen)() = nullptr;
  CuFileError (*driverClose)() = nullptr;
  CuFileError (*handleRegister)(CuFileHandle*, CuFileDescr*) = nullptr;
  void (*handleDeregister)(CuFileHandle) = nullptr;
  CuFileError (*bufRegister)(const void*, size_t, int) = nullptr;
  CuFileError (*bufDeregister)(const void*) = nullptr;
  ssize_t (*read)(CuFileHandle, void*, size_t, off_t, off_t) = nullptr;

  // libcufile is not closed again: it starts threads of its own that outlive cuFileDriverClose.
  bool load(std::string* why) {
    // The loader's path first, then the toolkit's folders (often not on the loader's path).
    const char* candidates[] = {"libcufile.so.0", "/usr/local/cuda/lib64/libcufile.so.0",
                                "/usr/local/cuda/targets/x86_64-linux/lib/libcufile.so.0",
                                "/usr/local/cuda/targets/sbsa-linux/lib/libcufile.so.0"};
    std::string first;
    for (const char* c : candidates) {
      if ((lib = dlopen(c, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      const char* e = dlerror();
      if (first.empty()) first = e ? e : "unknown";
    }
    if (lib == nullptr) {
      *why = "libcufile.so.0 not loadable (also not in /usr/local/cuda): " + first;
      return false;
    }
    bool ok = sym("cuFileDriverOpen", &driverOpen) && (sym("cuFileDriverClose_v2", &driverClose) ||
                                                       sym("cuFileDriverClose", &driverClose)) &&
              sym("cuFileHandleRegister", &handleRegister) && sym("cuFileHandleDeregister", &handleDeregister) &&
              sym("cuFileBufRegister", &bufRegister) && sym("cuFileBufDeregister", &bufDeregister) &&
              sym("cuFileRead", &read);
    if (!ok) *why = "libcufile.so.0 lacks a cuFile entry point";
    return ok;
  }
  template <typename Fn>
  bool sym(const char* name, Fn* fn) {
    *fn = reinterpret_cast<Fn>(dlsym(lib, name));
    return *fn != nullptr;
  }
};

std::string cuFileText(const char* call, CuFileError e) {
  return std::string(call) + " failed: cuFile error " + std::to_string(e.err) +
         (e.cuErr != 0 ? ", CUresult " + std::to_string(e.cuErr) : "");
}

// The test file: written, flushed, its cached pages dropped, opened for reading, unlinked.
struct TestFile {
  int directFd = -1;  // O_DIRECT when the file system takes it, else a normal descriptor
  bool direct = false;
  bool dropped = false;  // its pages left the page cache after writing
  std::string where;
  ~TestFile() {
    if (directFd >= 0) close(directFd);
  }
  bool create(size_t bytes, std::string* why) {
    const char* env = std::getenv("TMPDIR");
    std::string dir = env && *env ? env : "/var/tmp";
    struct statvfs fs {};
    if (statvfs(dir.c_str(), &fs) != 0) {
      *why = "statvfs(" + dir + "): " + std::strerror(errno);
      return false;
    }
    double freeBytes = static_cast<double>(fs.f_bavail) * fs.f_frsize;
    if (freeBytes < 2.0 * bytes) {
      *why = dir + " has " + sizeText(freeBytes) + " free; the test needs twice " + sizeText(static_cast<double>(bytes));
      return false;
    }
    std::string pattern = dir + "/braid-doctor-storage-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    int fd = mkstemp(name.data());
    if (fd < 0) {
      *why = "mkstemp(" + pattern + "): " + std::strerror(errno);
      return false;
    }
    where = name.data();
    bool ok = fill(fd, bytes, why);
    if (ok && fsync(fd) != 0) {
      ok = false;
      *why = std::string("fsync: ") + std::strerror(errno);
    }
    if (ok) dropped = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;  // only this file's clean pages
    if (ok) {
      directFd = open(where.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      direct = directFd >= 0;
      if (!direct) directFd = open(where.c_str(), O_RDONLY | O_CLOEXEC);
      if (directFd < 0) {
        ok = false;
        *why = "open(" + where + "): " + std::strerror(errno);
      }
    }
    close(fd);
    (void)unlink(where.c_str());  // open descriptors keep it readable; nothing is left behind
    return ok;
  }
  static bool fill(int fd, size_t bytes, std::string* why) {
    std::vector<unsigned char> block(kChunk, kPattern);
    for (size_t done = 0; done < bytes;) {
      ssize_t n = write(fd, block.data(), std::min(kChunk, bytes - done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *why = std::string("write: ") + (n < 0 ? std::strerror(errno) : "no progress");
        return false;
      }
      done += static_cast<size_t>(n);
    }
    return true;
  }
};

bool checkHead(const void* device, std::string* why) {
  unsigned char head[16] = {};
  cudaError_t e = cudaMemcpy(head, device, sizeof head, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    *why = "cudaMemcpy (check): " + cudaText(e);
    return false;
  }
  for (unsigned char b : head)
    if (b != kPattern) {
      *why = "WRONG DATA: the GPU buffer does not hold the file's bytes";
      return false;
    }
  return true;
}

// POSIX pread into pinned memory, then cudaMemcpy, chunk by chunk (one pass, host clock).
bool posixPass(const TestFile& file, size_t bytes, void* device, void* pinned, const Deadline& deadline, double* gbs,
               std::string* why) {
  double t0 = nowSeconds();
  for (size_t off = 0; off < bytes; off += kChunk) {
    if (deadline.passed()) {
      *why = "out of time budget";
      return false;
    }
    size_t n = std::min(kChunk, bytes - off);
    ssize_t got = pread(file.directFd, pinned, n, static_cast<off_t>(off));
    if (got != static_cast<ssize_t>(n)) {
      *why = got < 0 ? std::string("pread: ") + std::strerror(errno) : "pread: short read";
      return false;
    }
    cudaError_t e = cudaMemcpy(static_cast<char*>(device) + off, pinned, n, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      *why = "cudaMemcpy: " + cudaText(e);
      return false;
    }
  }
  *gbs = gbps(static_cast<double>(bytes), nowSeconds() - t0);
  return checkHead(device, why);
}

bool cuFilePass(const CuFile& cf, CuFileHandle fh, size_t bytes, void* device, const Deadline& deadline, double* gbs,
                std::string* why) {
  double t0 = nowSeconds();
  for (size_t off = 0; off < bytes; off += kChunk) {
    if (deadline.passed()) {
      *why = "out of time budget";
      return false;
    }
    size_t n = std::min(kChunk, bytes - off);
    ssize_t got = cf.read(fh, device, n, static_cast<off_t>(off), static_cast<off_t>(off));
    if (got != static_cast<ssize_t>(n)) {
      *why = "cuFileRead at " + sizeText(static_cast<double>(off)) + " returned " + std::to_string(got);
      return false;
    }
  }
  *gbs = gbps(static_cast<double>(bytes), nowSeconds() - t0);
  return checkHead(device, why);
}

Figure storageFigure(const std::string& path, size_t bytes, double gbs) {
  Figure f;
  f.section = "storage";
  f.path = path;
  f.unit = "GB/s";
  f.points.push_back({static_cast<double>(bytes), gbs});
  f.best = gbs;
  return f;
}

void errorFigure(Report* report, const std::string& path, const std::string& why, Severity severity = Severity::Error) {
  Figure f;
  f.section = "storage";
  f.path = path;
  f.unit = "GB/s";
  f.severity = severity;
  f.verdict = why;
  report->figures.push_back(f);
}

// The file system a descriptor lives on, by name where it is a common one.
std::string fileSystemOf(int fd) {
  struct statfs st {};
  if (fstatfs(fd, &st) != 0) return "an unknown file system";
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x794c7630: return "overlayfs";
    case 0x01021994: return "tmpfs";
    case 0x9123683E: return "btrfs";
    case 0x6969: return "nfs";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "file system 0x%lx", static_cast<unsigned long>(st.f_type));
      return hex;
    }
  }
}

}  // namespace

void measureStorage(const MeasureOptions& opt, Report* report) {
  if (skippedByOption(opt, "storage", report)) return;
  if (deviceCountOrSkip("storage", report) == 0) return;
  Deadline deadline(opt.budgetSeconds);
  const size_t bytes = opt.quick ? size_t{64} << 20 : size_t{1} << 30;
  TestFile file;
  std::string why;
  if (!file.create(bytes, &why)) {
    report->skipped.push_back({"storage", why});
    return;
  }
  const std::string how = std::string(file.direct ? "O_DIRECT" : "buffered (O_DIRECT refused by the file system)") +
                          ", " + sizeText(static_cast<double>(bytes)) + " in " + sizeText(kChunk) + " reads, " +
                          file.where.substr(0, file.where.rfind('/'));
  const std::string cached = file.direct    ? "not cached (O_DIRECT)"
                             : file.dropped ? "read from the device: its pages were dropped from the cache after writing"
                                            : "probably cached (just written, the cache could not be dropped): memory speed";
  DeviceBuffer device;
  PinnedBuffer pinned;
  CudaCheck c;
  if (!c(device.allocate(0, bytes), "cudaMalloc(" + sizeText(static_cast<double>(bytes)) + ") on GPU0") ||
      !c(pinned.allocate(kChunk), "cudaHostAlloc(16 MB)")) {
    addCudaError(report, "storage", "storage buffers", c.call(), c.error());
    return;
  }
  double posixGbs = 0;
  bool posixOk = posixPass(file, bytes, device.ptr, pinned.ptr, deadline, &posixGbs, &why);
  if (posixOk) {
    Figure f = storageFigure("POSIX read + cudaMemcpy -> GPU0", bytes, posixGbs);
    f.expectedWhy = "the storage's own rate (no fixed expectation)";
    f.verdict = how + "; " + cached + "; host clock, one pass";
    report->figures.push_back(f);
  } else if (deadline.passed()) {
    report->skipped.push_back({"storage POSIX read", "not finished within its time budget"});
  } else {
    errorFigure(report, "POSIX read + cudaMemcpy -> GPU0", why);
  }
  if (cudaMemset(device.ptr, 0, bytes) != cudaSuccess) (void)cudaGetLastError();  // cuFile must refill it

  const bool nvidiaFs = access("/proc/driver/nvidia-fs", F_OK) == 0;
  CuFile cf;
  if (!cf.load(&why)) {
    report->skipped.push_back({"storage cuFile", why});
    report->facts.push_back({"storage", "cuFile", "not available", Severity::Ok, why});
    return;
  }
  CuFileError e = cf.driverOpen();
  if (e.err != 0) {
    errorFigure(report, "cuFile read -> GPU0", cuFileText("cuFileDriverOpen", e));
    return;
  }
  const std::string mode = nvidiaFs ? "direct (GDS): /proc/driver/nvidia-fs present"
                                    : "compatibility mode: no /proc/driver/nvidia-fs, cuFile reads through POSIX";
  report->facts.push_back({"storage", "cuFile mode", mode, Severity::Ok, ""});
  CuFileDescr descr{};
  descr.type = 1;  // CU_FILE_HANDLE_TYPE_OPAQUE_FD
  descr.handle.fd = file.directFd;
  CuFileHandle fh = nullptr;
  e = cf.handleRegister(&fh, &descr);
  if (e.err != 0) {
    // The machine's set-up, not a fault of the doctor's: a warning with what to look at.
    errorFigure(report, "cuFile read -> GPU0",
                cuFileText("cuFileHandleRegister", e) + (file.direct ? "" : " (not O_DIRECT)") + " on " +
                    fileSystemOf(file.directFd) + ": cuFile does not take files here (" +
                    (nvidiaFs ? "check the file system with gdscheck -p" : "compatibility mode: allow_compat_mode in cufile.json, and a file system it supports; gdscheck -p") + ")",
                Severity::Warning);
    (void)cf.driverClose();
    return;
  }
  e = cf.bufRegister(device.ptr, bytes, 0);
  bool registered = e.err == 0;
  double cuGbs = 0;
  bool ok = cuFilePass(cf, fh, bytes, device.ptr, deadline, &cuGbs, &why);
  if (ok) {
    Figure f = storageFigure(std::string("cuFile read -> GPU0 (") + (nvidiaFs ? "GDS" : "compatibility mode") + ")",
                             bytes, cuGbs);
    if (posixOk) {
      f.expected = posixGbs;
      f.expectedWhy = "at least the POSIX path's rate";
    }
    f.verdict = how + "; " + (registered ? "buffer registered" : "buffer not registered (" + cuFileText("cuFileBufRegister", e) + ")");
    if (posixOk && cuGbs < 0.8 * posixGbs) {
      f.severity = nvidiaFs ? Severity::Warning : Severity::Ok;
      f.verdict += nvidiaFs ? "; slower than POSIX + copy: does this file system support GDS? (gdscheck -p)"
                            : "; slower than POSIX + copy, as compatibility mode can be";
    }
    report->figures.push_back(f);
  } else if (deadline.passed()) {
    report->skipped.push_back({"storage cuFile read", "not finished within its time budget"});
  } else {
    errorFigure(report, "cuFile read -> GPU0", why);
  }
  if (registered) (void)cf.bufDeregister(device.ptr);
  cf.handleDeregister(fh);
  (void)cf.driverClose();
}

}  // namespace braid::doctor
