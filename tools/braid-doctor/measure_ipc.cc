// CUDA IPC between two processes: the doctor shares GPU memory with a second copy of itself
// (--ipc-child) on the same GPU, and on GPU 1 when there is one. Measured: the legacy path
// (cudaIpcGetMemHandle / cudaIpcOpenMemHandle) and the cuMem path (a POSIX file descriptor
// passed with SCM_RIGHTS, imported and mapped), each as open latency and copy bandwidth.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "tools/braid-doctor/measure.h"
#include "tools/braid-doctor/measure_child.h"
#include "tools/braid-doctor/measure_driver.h"
#include "tools/braid-doctor/measure_ipc_protocol.h"
#include "tools/braid-doctor/measure_util.h"

namespace braid::doctor {
namespace {
using namespace measure;

constexpr size_t kLatencyBytes = size_t{2} << 20;  // own 2 MiB allocations, as braid shares them
constexpr int kCopyRepeats = 3;

struct Scenario {
  int parentDevice = 0;
  int childDevice = 0;
  std::string label;  // "GPU0->GPU0"
};

// What one path (legacy or cuMem) gave: the first open, the later ones, the copy.
struct PathResult {
  bool ok = false;
  bool outOfTime = false;  // the budget ended it: a skip, not an error
  std::string error;
  double firstUs = 0;
  std::vector<double> laterUs;
  double copyGbps = 0;
  size_t copyBytes = 0;
  bool verified = true;
};

class Session {
 public:
  Session(const MeasureOptions& opt, const Scenario& s, const Deadline& deadline)
      : opt_(opt), s_(s), deadline_(deadline) {}
  ~Session() { stop(); }

  bool start(std::string* why) {
    if (!dir_.create(why)) return false;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      *why = std::string("socketpair: ") + std::strerror(errno);
      return false;
    }
    socket_ = sv[0];
    double seconds = std::max(1.0, std::min(deadline_.left(), 600.0));
    SpawnRequest req;
    req.argv = {opt_.selfPath, "--ipc-child", "--socket", std::to_string(sv[1]), "--device",
                std::to_string(s_.childDevice), "--seconds", fixed(seconds, 1)};
    req.outputPath = dir_.path() + "/ipc-child.log";
    req.keepFd = sv[1];
    pid_ = spawnChild(req, why);
    close(sv[1]);
    if (pid_ < 0) return false;
    IpcReply ready;
    int fd = -1;
    if (!receiveMessage(socket_, &ready, sizeof ready, &fd, nowSeconds() + std::max(1.0, deadline_.left()), why)) {
      *why = "the IPC child did not start: " + *why + childOutput();
      return false;
    }
    if (fd >= 0) close(fd);
    if (!ready.ok) {
      *why = ready.error;
      return false;
    }
    return true;
  }

  // One request and its reply; false with *why (the child's output appended) on failure.
  bool ask(const IpcRequest& req, int fd, IpcReply* reply, std::string* why) {
    int none = -1;
    if (!sendMessage(socket_, &req, sizeof req, fd, why) ||
        !receiveMessage(socket_, reply, sizeof *reply, &none, nowSeconds() + std::max(0.5, deadline_.left()), why)) {
      *why += childOutput();
      return false;
    }
    if (none >= 0) close(none);
    return true;
  }

  void stop() {
    if (socket_ >= 0) {
      IpcRequest quit;
      std::string ignored;
      (void)sendMessage(socket_, &quit, sizeof quit, -1, &ignored);
    }
    if (pid_ > 0) {
      (void)waitChild(pid_, nowSeconds() + 2);  // kills it if it does not leave at once
      pid_ = -1;
    }
    if (socket_ >= 0) close(socket_);
    socket_ = -1;
  }

  std::string childOutput() const {
    std::string tail = fileTail(dir_.path() + "/ipc-child.log", 400);
    return tail.empty() ? "" : " (child: " + tail + ")";
  }

 private:
  const MeasureOptions& opt_;
  Scenario s_;
  const Deadline& deadline_;
  TempDir dir_;
  int socket_ = -1;
  pid_t pid_ = -1;
};

// Rounds: the first shares a copy-sized buffer and times a copy out of it; the rest share
// fresh 2 MiB buffers and time only the open.
std::vector<size_t> roundSizes(bool quick) {
  std::vector<size_t> sizes{quick ? size_t{64} << 20 : size_t{256} << 20};
  for (int i = 0; i < (quick ? 3 : 8); ++i) sizes.push_back(kLatencyBytes);
  return sizes;
}

// Done when at least the first (copy) round ran; otherwise the budget ran out first.
void finish(PathResult* r, const Deadline& deadline) {
  r->ok = r->copyBytes > 0;
  if (!r->ok) {
    r->outOfTime = deadline.passed();
    r->error = "out of time budget before the first round";
  }
}

void record(PathResult* r, size_t round, size_t bytes, const IpcReply& reply) {
  if (round == 0) {
    r->firstUs = reply.openUs;
    r->copyGbps = reply.copyGbps;
    r->copyBytes = bytes;
  } else {
    r->laterUs.push_back(reply.openUs);
  }
  if (!reply.verified) r->verified = false;
}

PathResult runLegacy(Session& session, int device, const Deadline& deadline, bool quick) {
  PathResult r;
  auto sizes = roundSizes(quick);
  for (size_t round = 0; round < sizes.size() && !deadline.passed(); ++round) {
    DeviceBuffer buffer;
    CudaCheck c;
    IpcRequest req;
    req.kind = IpcKind::Legacy;
    req.bytes = sizes[round];
    req.pattern = static_cast<uint8_t>(0x40 + round);
    req.copyRepeats = round == 0 ? kCopyRepeats : 0;
    if (!c(buffer.allocate(device, sizes[round]), "cudaMalloc(" + sizeText(static_cast<double>(sizes[round])) + ")") ||
        !c(cudaMemset(buffer.ptr, req.pattern, sizes[round]), "cudaMemset") ||
        !c(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ||
        !c(cudaIpcGetMemHandle(&req.handle, buffer.ptr), "cudaIpcGetMemHandle")) {
      r.error = c.message();
      return r;
    }
    IpcReply reply;
    std::string why;
    if (!session.ask(req, -1, &reply, &why)) {
      r.error = why;
      r.outOfTime = deadline.passed();
      return r;
    }
    if (!reply.ok) {
      r.error = reply.error;
      return r;
    }
    record(&r, round, sizes[round], reply);
    // The child closed its import before answering: only now is the buffer freed.
  }
  finish(&r, deadline);
  return r;
}

PathResult runCuMem(Session& session, const Driver& driver, int device, const Deadline& deadline, bool quick) {
  PathResult r;
  auto sizes = roundSizes(quick);
  for (size_t round = 0; round < sizes.size() && !deadline.passed(); ++round) {
    SharedAllocation a;
    std::string call;
    IpcRequest req;
    req.kind = IpcKind::CuMem;
    req.pattern = static_cast<uint8_t>(0x60 + round);
    req.copyRepeats = round == 0 ? kCopyRepeats : 0;
    CUresult cr = createShareable(driver, device, sizes[round], &a, &call);
    int fd = -1;
    if (cr == CUDA_SUCCESS) {
      call = "cuMemExportToShareableHandle(POSIX fd)";
      cr = driver.memExportToShareableHandle(&fd, a.handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    }
    if (cr != CUDA_SUCCESS) {
      r.error = call + " on GPU" + std::to_string(device) + ": " + driverText(driver, cr);
      releaseShareable(driver, &a);
      return r;
    }
    req.bytes = a.size;
    CudaCheck c;
    IpcReply reply;
    std::string why;
    bool asked = c(cudaMemset(reinterpret_cast<void*>(a.ptr), req.pattern, a.size), "cudaMemset") &&
                 c(cudaDeviceSynchronize(), "cudaDeviceSynchronize") && session.ask(req, fd, &reply, &why);
    close(fd);  // the child holds its own copy of the descriptor now
    releaseShareable(driver, &a);
    if (c.failed() || !asked || !reply.ok) {
      r.error = c.failed() ? c.message() : !asked ? why : std::string(reply.error);
      r.outOfTime = !c.failed() && !asked && deadline.passed();
      return r;
    }
    record(&r, round, req.bytes, reply);
  }
  finish(&r, deadline);
  return r;
}

void addFigures(const std::string& kind, const Scenario& s, const PathResult& r, Report* report) {
  const std::string openName = kind == "legacy" ? "open" : "import+map";
  if (!r.ok && r.outOfTime) {
    report->skipped.push_back({"IPC " + kind + " " + s.label, "not finished within its time budget: " + r.error});
    return;
  }
  if (!r.ok) {
    Figure f;
    f.section = "ipc";
    f.path = "IPC " + kind + " " + s.label;
    f.unit = "us";
    f.severity = Severity::Error;
    f.verdict = r.error;
    report->figures.push_back(f);
    return;
  }
  Figure open;
  open.section = "ipc";
  open.path = "IPC " + kind + " " + openName + " " + s.label;
  open.unit = "us";
  std::vector<double> later = r.laterUs;
  std::sort(later.begin(), later.end());
  open.best = later.empty() ? r.firstUs : later[later.size() / 2];
  open.expectedWhy = "no fixed expectation: paid once per shared buffer (importers cache it)";
  open.verdict = "median of " + std::to_string(later.size()) + " fresh 2 MiB buffers; first open " +
                 fixed(r.firstUs, 0) + " us" + (later.empty() ? "" : ", slowest " + fixed(later.back(), 0) + " us");
  if (open.best > 20000) {
    open.severity = Severity::Warning;
    open.verdict += ": slow (over 20 ms): MPS, a busy driver, or many mappings in the importer?";
  }
  report->figures.push_back(open);

  Figure copy;
  copy.section = "ipc";
  copy.path = "IPC " + kind + " copy " + s.label;
  copy.unit = "GB/s";
  copy.points.push_back({static_cast<double>(r.copyBytes), r.copyGbps});
  copy.best = r.copyGbps;
  if (s.parentDevice == s.childDevice) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, s.childDevice) == cudaSuccess)
      memoryCopyExpectation(s.childDevice, prop.name, &copy.expected, &copy.expectedWhy);
    copy.expectedWhy = "a copy within one GPU: " + copy.expectedWhy;
  } else {
    copy.expectedWhy = "across GPUs: see the p2p section's path";
  }
  copy.verdict = "best of " + std::to_string(kCopyRepeats) + " copies of " +
                 sizeText(static_cast<double>(r.copyBytes)) + " out of the import";
  if (!r.verified) {
    copy.severity = Severity::Error;
    copy.verdict += "; WRONG DATA: the importer did not see the exporter's bytes";
  } else if (copy.expected > 0 && copy.best < 0.7 * copy.expected) {
    copy.severity = Severity::Warning;
    copy.verdict += "; " + fixed(100 * copy.best / copy.expected, 0) +
                    "% of a local copy: the import is slower than local memory (should be the same memory)";
  } else {
    copy.verdict += "; data checked";
  }
  report->figures.push_back(copy);
}

void runScenario(const MeasureOptions& opt, const Scenario& s, const Deadline& deadline, const Driver* driver,
                 Report* report) {
  cudaError_t e = cudaSetDevice(s.parentDevice);
  if (e != cudaSuccess) {
    addCudaError(report, "ipc", "IPC " + s.label, "cudaSetDevice", e);
    return;
  }
  Session session(opt, s, deadline);
  std::string why;
  if (!session.start(&why)) {
    if (deadline.passed()) {
      report->skipped.push_back({"IPC " + s.label, "not started within its time budget: " + why});
      return;
    }
    Figure f;
    f.section = "ipc";
    f.path = "IPC " + s.label;
    f.unit = "us";
    f.severity = Severity::Error;
    f.verdict = why;
    report->figures.push_back(f);
    return;
  }
  addFigures("legacy", s, runLegacy(session, s.parentDevice, deadline, opt.quick), report);
  if (driver != nullptr) addFigures("cuMem", s, runCuMem(session, *driver, s.parentDevice, deadline, opt.quick), report);
  session.stop();
}

}  // namespace

void measureIpc(const MeasureOptions& opt, Report* report) {
  if (skippedByOption(opt, "ipc", report)) return;
  int count = deviceCountOrSkip("ipc", report);
  if (count == 0) return;
  if (opt.selfPath.empty() || access(opt.selfPath.c_str(), X_OK) != 0) {
    report->skipped.push_back({"ipc", "the doctor's own binary (" + opt.selfPath + ") cannot be started again"});
    return;
  }
  Deadline deadline(opt.budgetSeconds);
  Driver driver;
  std::string driverWhy;
  bool haveDriver = loadDriver(&driver, &driverWhy);
  if (!haveDriver) report->skipped.push_back({"IPC cuMem", driverWhy});
  std::vector<Scenario> scenarios{{0, 0, "GPU0->GPU0 (two processes)"}};
  if (count >= 2) {
    int can = 0;
    cudaError_t e = cudaDeviceCanAccessPeer(&can, 1, 0);
    if (e == cudaSuccess && can) scenarios.push_back({0, 1, "GPU0->GPU1 (two processes)"});
    else report->skipped.push_back({"IPC GPU0->GPU1", e != cudaSuccess ? "cudaDeviceCanAccessPeer: " + cudaText(e)
                                                                       : "GPU1 has no peer access to GPU0"});
  }
  for (const auto& s : scenarios) {
    if (deadline.passed()) {
      report->skipped.push_back({"IPC " + s.label, "out of time budget"});
      continue;
    }
    runScenario(opt, s, deadline, haveDriver ? &driver : nullptr, report);
  }
}

}  // namespace braid::doctor
