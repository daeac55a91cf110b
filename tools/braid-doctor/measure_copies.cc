// Copies between host and GPU (pinned and pageable) and within each GPU, against what its PCIe
// link and its memory should give.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>

#include "tools/braid-doctor/measure.h"
#include "tools/braid-doctor/measure_util.h"

namespace braid::doctor {
namespace {
using namespace measure;

constexpr int kRepeats = 3;  // timed runs per size after one warm-up; the figure keeps the best

struct HostBuffers {
  PinnedBuffer pinned;
  std::unique_ptr<char, decltype(&std::free)> pageable{nullptr, &std::free};
};

Figure newFigure(const std::string& path, const std::string& why) {
  Figure f;
  f.section = "copies";
  f.path = path;
  f.unit = "GB/s";
  f.expectedWhy = why;
  f.verdict = "best of 3 runs per size; ";
  return f;
}

void judgePinned(const PcieLink& link, int gpuNode, Figure* f) {
  if (f->expected <= 0) {
    f->verdict += "PCIe link unknown (sysfs), no expectation";
    return;
  }
  double share = f->best / f->expected;
  if (share >= 0.6) {
    f->verdict += "ok: " + fixed(100 * share, 0) + "% of the link's expected rate";
    return;
  }
  f->severity = Severity::Warning;
  f->verdict += fixed(100 * share, 0) + "% of the link's expected rate: ";
  if (link.maxGts > link.currentGts * 1.01 || link.maxWidth > link.currentWidth)
    f->verdict += "the link runs below the device's maximum (downtrained? reseat or check the slot/riser); ";
  int cpuNode = currentCpuNumaNode();
  if (gpuNode >= 0 && cpuNode >= 0 && gpuNode != cpuNode)
    f->verdict += "this process runs on NUMA node " + std::to_string(cpuNode) + ", the GPU sits on node " +
                  std::to_string(gpuNode) + " (numactl --cpunodebind=" + std::to_string(gpuNode) + "); ";
  else
    f->verdict += "check the link's current speed/width and the process's NUMA placement";
  while (f->verdict.size() >= 2 && f->verdict.compare(f->verdict.size() - 2, 2, "; ") == 0) f->verdict.resize(f->verdict.size() - 2);
}

void measureOneGpu(int device, const MeasureOptions& opt, const Deadline& deadline, HostBuffers* host,
                   Report* report) {
  const std::string gpu = "GPU" + std::to_string(device);
  const auto sizes = sweepSizes(opt.quick);
  // D2D always runs up to 256 MB: smaller copies stay below the memory's rate (launch cost).
  const std::vector<size_t> d2dSizes = opt.quick ? std::vector<size_t>{size_t{64} << 10, size_t{256} << 20} : sizes;
  const size_t maxBytes = d2dSizes.back() > sizes.back() ? d2dSizes.back() : sizes.back();
  CudaCheck c;
  cudaDeviceProp prop{};
  std::string busId = busIdOf(device, &c);
  DeviceBuffer a, b;
  Stream stream;
  if (!c(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties") ||
      !c(a.allocate(device, maxBytes), "cudaMalloc(" + sizeText(maxBytes) + ") on " + gpu) ||
      !c(b.allocate(device, maxBytes), "cudaMalloc(" + sizeText(maxBytes) + ") on " + gpu) ||
      !c(stream.create(), "cudaStreamCreate on " + gpu) || !c(cudaMemset(a.ptr, 1, maxBytes), "cudaMemset")) {
    addCudaError(report, "copies", "copies " + gpu, c.call(), c.error());
    return;
  }
  PcieLink link;  // read right after the pinned H2D sweep, while the link is awake at full speed
  struct Kind {
    const char* path;
    bool pinned;
    cudaMemcpyKind dir;
  };
  const Kind kinds[] = {{"H2D pinned", true, cudaMemcpyHostToDevice},
                        {"D2H pinned", true, cudaMemcpyDeviceToHost},
                        {"H2D pageable", false, cudaMemcpyHostToDevice},
                        {"D2H pageable", false, cudaMemcpyDeviceToHost}};
  double pinnedBest[2] = {0, 0};
  for (const Kind& k : kinds) {
    Figure f = newFigure(std::string(k.path) + " " + gpu, "");
    void* hostPtr = k.pinned ? host->pinned.ptr : static_cast<void*>(host->pageable.get());
    auto copy = [&](size_t bytes) {
      return k.dir == cudaMemcpyHostToDevice ? cudaMemcpyAsync(a.ptr, hostPtr, bytes, k.dir, stream.stream)
                                             : cudaMemcpyAsync(hostPtr, a.ptr, bytes, k.dir, stream.stream);
    };
    std::string why;
    cudaError_t error = cudaSuccess;
    bool complete = true;
    if (!sweepBandwidth(sizes, stream.stream, deadline, kRepeats, copy, &f, &complete, &why, &error)) {
      addCudaError(report, "copies", f.path, why, error);
      continue;
    }
    if (k.pinned && k.dir == cudaMemcpyHostToDevice) link = pcieLinkOf(busId);
    if (k.pinned) {
      pinnedBest[k.dir == cudaMemcpyHostToDevice ? 0 : 1] = f.best;
      f.expected = pciePracticalGbps(link.currentGts, link.currentWidth);
      f.expectedWhy = "about, PCIe " + link.text() + " (" + busId + ")";
      if (complete) judgePinned(link, link.numaNode, &f);
    } else if (complete) {
      double pinned = pinnedBest[k.dir == cudaMemcpyHostToDevice ? 0 : 1];
      f.expected = pinned;
      f.expectedWhy = "the pinned copy's rate (pageable goes through a staging buffer)";
      if (pinned > 0 && f.best < 0.5 * pinned)
        f.verdict += fixed(pinned / f.best, 1) + "x slower than pinned: use pinned memory (cudaHostAlloc / "
                     "pin_memory=True) for transfers that matter";
      else
        f.verdict += "ok: at least half the pinned rate";
    }
    report->figures.push_back(f);
  }
  Figure d2d = newFigure("D2D " + gpu, "");
  memoryCopyExpectation(device, prop.name, &d2d.expected, &d2d.expectedWhy);
  std::string why;
  cudaError_t error = cudaSuccess;
  bool complete = true;
  auto copy = [&](size_t bytes) { return cudaMemcpyAsync(b.ptr, a.ptr, bytes, cudaMemcpyDeviceToDevice, stream.stream); };
  if (!sweepBandwidth(d2dSizes, stream.stream, deadline, kRepeats, copy, &d2d, &complete, &why, &error)) {
    addCudaError(report, "copies", d2d.path, why, error);
    return;
  }
  d2d.expectedWhy += "; counted as bytes copied per second";
  if (complete && d2d.expected > 0 && d2d.best < 0.7 * d2d.expected) {
    d2d.severity = Severity::Warning;
    d2d.verdict += fixed(100 * d2d.best / d2d.expected, 0) +
                   "% of the memory's copy rate: another process on this GPU (nvidia-smi), or clocks held low "
                   "(nvidia-smi -q -d PERFORMANCE,CLOCK)?";
  } else if (complete && d2d.expected > 0) {
    d2d.verdict += "ok: " + fixed(100 * d2d.best / d2d.expected, 0) + "% of the memory's copy rate";
  }
  report->figures.push_back(d2d);
}

}  // namespace

void measureCopies(const MeasureOptions& opt, Report* report) {
  if (skippedByOption(opt, "copies", report)) return;
  int count = deviceCountOrSkip("copies", report);
  if (count == 0) return;
  Deadline deadline(opt.budgetSeconds);
  const size_t maxBytes = sweepSizes(opt.quick).back();
  HostBuffers host;
  host.pageable.reset(static_cast<char*>(std::malloc(maxBytes)));
  cudaError_t e = host.pinned.allocate(maxBytes);
  if (e != cudaSuccess || !host.pageable) {
    if (e != cudaSuccess) addCudaError(report, "copies", "host buffers", "cudaHostAlloc(" + sizeText(maxBytes) + ")", e);
    else report->skipped.push_back({"copies", "malloc(" + sizeText(maxBytes) + ") failed"});
    return;
  }
  std::memset(host.pageable.get(), 1, maxBytes);  // touch every page before timing
  std::memset(host.pinned.ptr, 1, maxBytes);
  for (int device = 0; device < count; ++device) {
    if (deadline.passed()) {
      report->skipped.push_back({"copies GPU" + std::to_string(device), "out of time budget"});
      continue;
    }
    measureOneGpu(device, opt, deadline, &host, report);
  }
}

}  // namespace braid::doctor
