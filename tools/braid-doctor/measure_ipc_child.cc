// The second process of the IPC measurement: the doctor's own binary started as
//   braid-doctor --ipc-child --socket FD --device D --seconds S
// It opens what the parent shares (a legacy IPC handle, or a cuMem allocation's file
// descriptor), times the open and a copy out of it, checks the data, closes it, and answers.
// It leaves after "quit", when the parent goes away, or after S seconds at most.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/braid-doctor/measure.h"
#include "tools/braid-doctor/measure_driver.h"
#include "tools/braid-doctor/measure_ipc_protocol.h"
#include "tools/braid-doctor/measure_util.h"

namespace braid::doctor {
namespace {
using namespace measure;

void setError(IpcReply* reply, const std::string& text) {
  reply->ok = 0;
  std::snprintf(reply->error, sizeof reply->error, "%s", text.c_str());
}

class Child {
 public:
  explicit Child(int device) : device_(device) {}

  // Context and stream first, so that the timed opens do not include them.
  bool start(IpcReply* reply) {
    CudaCheck c;
    if (!c(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")") ||
        !c(cudaFree(nullptr), "cudaFree(0) (context creation)") || !c(stream_.create(), "cudaStreamCreate")) {
      setError(reply, "IPC child: " + c.message());
      return false;
    }
    haveDriver_ = loadDriver(&driver_, &driverWhy_);
    reply->ok = 1;
    return true;
  }

  void serve(const IpcRequest& req, int fd, IpcReply* reply) {
    if (req.kind == IpcKind::Legacy) legacy(req, reply);
    else if (req.kind == IpcKind::CuMem) cuMem(req, fd, reply);
    else setError(reply, "IPC child: unknown request");
    if (fd >= 0) close(fd);
  }

 private:
  void legacy(const IpcRequest& req, IpcReply* reply) {
    void* imported = nullptr;
    double t0 = nowSeconds();
    cudaError_t e = cudaIpcOpenMemHandle(&imported, req.handle, cudaIpcMemLazyEnablePeerAccess);
    reply->openUs = (nowSeconds() - t0) * 1e6;
    if (e != cudaSuccess) {
      setError(reply, "cudaIpcOpenMemHandle on GPU" + std::to_string(device_) + ": " + cudaText(e));
      (void)cudaGetLastError();
      return;
    }
    std::string error;
    bool ok = copyOut(imported, req, reply, &error);
    e = cudaIpcCloseMemHandle(imported);
    if (ok && e != cudaSuccess) {
      ok = false;
      error = "cudaIpcCloseMemHandle: " + cudaText(e);
    }
    if (ok) reply->ok = 1;
    else setError(reply, error);
  }

  void cuMem(const IpcRequest& req, int fd, IpcReply* reply) {
    if (!haveDriver_) {
      setError(reply, "IPC child: " + driverWhy_);
      return;
    }
    if (fd < 0) {
      setError(reply, "IPC child: the cuMem request came without a file descriptor");
      return;
    }
    SharedAllocation a;
    std::string call = "cuMemImportFromShareableHandle";
    double t0 = nowSeconds();
    CUmemGenericAllocationHandle handle = 0;
    CUresult r = driver_.memImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r == CUDA_SUCCESS) r = mapImported(driver_, device_, handle, req.bytes, &a, &call);
    reply->openUs = (nowSeconds() - t0) * 1e6;
    std::string error;
    bool ok = r == CUDA_SUCCESS;
    if (!ok) error = call + " on GPU" + std::to_string(device_) + ": " + driverText(driver_, r);
    if (ok) ok = copyOut(reinterpret_cast<void*>(a.ptr), req, reply, &error);
    releaseShareable(driver_, &a);
    if (ok) reply->ok = 1;
    else setError(reply, error);
  }

  // Times copies of the whole import into a local buffer, then checks its first bytes.
  bool copyOut(const void* imported, const IpcRequest& req, IpcReply* reply, std::string* error) {
    CudaCheck c;
    if (req.copyRepeats > 0) {
      if (localBytes_ < req.bytes) {
        if (local_.ptr != nullptr) {
          (void)cudaFree(local_.ptr);
          local_.ptr = nullptr;
        }
        localBytes_ = 0;
        if (!c(local_.allocate(device_, req.bytes), "cudaMalloc(" + sizeText(static_cast<double>(req.bytes)) + ")")) {
          *error = c.message();
          return false;
        }
        localBytes_ = req.bytes;
      }
      Timing t;
      std::string call;
      cudaError_t e = timeOnStream(stream_.stream, req.copyRepeats, [&] {
        return cudaMemcpyAsync(local_.ptr, imported, req.bytes, cudaMemcpyDeviceToDevice, stream_.stream);
      }, &t, &call);
      if (e != cudaSuccess) {
        *error = "copy out of the import: " + call + ": " + cudaText(e);
        return false;
      }
      reply->copyGbps = gbps(static_cast<double>(req.bytes), t.best);
    }
    unsigned char head[16] = {};
    if (!c(cudaMemcpy(head, imported, sizeof head, cudaMemcpyDeviceToHost), "cudaMemcpy(16 bytes out of the import)")) {
      *error = c.message();
      return false;
    }
    reply->verified = 1;
    for (unsigned char b : head)
      if (b != req.pattern) reply->verified = 0;
    return true;
  }

  int device_;
  Stream stream_;
  DeviceBuffer local_;
  uint64_t localBytes_ = 0;
  Driver driver_;
  bool haveDriver_ = false;
  std::string driverWhy_;
};

bool parseArgs(int argc, char** argv, int* socket, int* device, double* seconds) {
  *socket = -1;
  *device = 0;
  *seconds = 30;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string key = argv[i];
    char* end = nullptr;
    double v = std::strtod(argv[i + 1], &end);
    if (end == argv[i + 1]) return false;
    if (key == "--socket") *socket = static_cast<int>(v);
    else if (key == "--device") *device = static_cast<int>(v);
    else if (key == "--seconds") *seconds = v;
    else return false;
  }
  return *socket >= 0 && *seconds > 0 && *seconds <= 600;
}

}  // namespace

int ipcChildMain(int argc, char** argv) {
  int socket = -1, device = 0;
  double seconds = 0;
  if (!parseArgs(argc, argv, &socket, &device, &seconds)) {
    std::fprintf(stderr, "usage: %s --ipc-child --socket FD --device D --seconds S (the doctor starts this)\n",
                 argc > 0 ? argv[0] : "braid-doctor");
    return 2;
  }
  const double deadline = nowSeconds() + seconds;
  Child child(device);
  IpcReply ready;
  bool started = child.start(&ready);
  std::string why;
  if (!sendMessage(socket, &ready, sizeof ready, -1, &why) || !started) {
    if (!started) std::fprintf(stderr, "%s\n", ready.error);
    close(socket);
    return 1;
  }
  int served = 0;
  for (; served < 1000 && nowSeconds() < deadline; ++served) {  // the parent sends a few dozen at most
    IpcRequest req;
    int fd = -1;
    if (!receiveMessage(socket, &req, sizeof req, &fd, deadline, &why)) break;
    if (req.kind == IpcKind::Quit) {
      if (fd >= 0) close(fd);
      close(socket);
      return 0;
    }
    IpcReply reply;
    child.serve(req, fd, &reply);
    if (!sendMessage(socket, &reply, sizeof reply, -1, &why)) break;
  }
  std::fprintf(stderr, "IPC child: leaving without quit (%s)\n", why.empty() ? "deadline" : why.c_str());
  close(socket);
  return 1;
}

}  // namespace braid::doctor
