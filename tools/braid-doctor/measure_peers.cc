// Every ordered GPU pair: can it reach its peer directly, and at what rate (a peer copy, and a
// kernel reading from / writing to the peer's memory with 16-byte accesses), against the path's
// NVLinks (counted by NVML) or PCIe links.
#include <climits>
#include <cstdlib>
#include <limits>
#include <memory>

#include "tools/braid-doctor/measure.h"
#include "tools/braid-doctor/measure_kernels.h"
#include "tools/braid-doctor/measure_util.h"
#include "topo/detect.h"
#include "topo/types.h"

namespace braid::doctor {
namespace {
using namespace measure;

constexpr int kRepeats = 3;  // timed runs per size after a warm-up; figures keep the best

struct Gpu {
  int device = 0;
  std::string busId;
  std::string name;
  int sms = 0;
  int ccMajor = 0;
  PcieLink link;
  std::vector<topo::NvmlLink> nvlinks;
  DeviceBuffer buffer;  // what peers read and write
  DeviceBuffer sink;
  Stream stream;
};

std::string pciClassOf(const std::string& busId, const void*) {
  return readSysfs("/sys/bus/pci/devices/" + busId + "/class");
}

// The PCI bridges above a device ("0000:17:01.0", ...) from its sysfs path, root first.
std::vector<std::string> bridgesAbove(const std::string& busId) {
  char resolved[PATH_MAX];
  std::vector<std::string> chain;
  if (realpath(("/sys/bus/pci/devices/" + busId).c_str(), resolved) == nullptr) return chain;
  std::string path = resolved;
  size_t pos = 0;
  while ((pos = path.find('/', pos)) != std::string::npos) {
    size_t next = path.find('/', pos + 1);
    std::string part = path.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    if (topo::normalizeBusId(part) && part != busId) chain.push_back(part);
    pos = next;
  }
  return chain;
}

// Two GPUs below one PCIe switch share more than their root port.
bool sameSwitch(const std::string& a, const std::string& b) {
  auto ca = bridgesAbove(a), cb = bridgesAbove(b);
  size_t common = 0;
  while (common < ca.size() && common < cb.size() && ca[common] == cb[common]) ++common;
  return common >= 2;
}

struct PathExpectation {
  double gbps = 0;
  std::string why;
  bool nvlink = false;
  bool sameSwitch = false;
};

double nvlinkRate(int ccMajor) { return ccMajor >= 10 ? 50 : 25; }  // GB/s per link and direction

PathExpectation expectPath(const Gpu& a, const Gpu& b, bool nvmlLoaded, const std::string& nvmlWhy) {
  PathExpectation p;
  int direct = 0, switchA = 0, switchB = 0;
  for (const auto& l : a.nvlinks) {
    if (l.target == b.busId) direct += l.count;
    if (l.tclass == "0x068000") switchA += l.count;
  }
  for (const auto& l : b.nvlinks)
    if (l.tclass == "0x068000") switchB += l.count;
  int links = direct > 0 ? direct : std::min(switchA, switchB);
  if (links > 0) {
    double raw = links * nvlinkRate(a.ccMajor);
    p.nvlink = true;
    p.gbps = 0.85 * raw;
    p.why = "about 85% of NVLink " + std::to_string(links) + " x " + fixed(nvlinkRate(a.ccMajor), 0) +
            " GB/s = " + fixed(raw, 0) + " GB/s per direction" + (direct > 0 ? "" : " (through NVSwitch)");
    return p;
  }
  bool hopper = a.name.find("H100") != std::string::npos || a.name.find("H200") != std::string::npos;
  if (!nvmlLoaded && hopper) {
    p.nvlink = true;
    p.gbps = 0.85 * 18 * 25;
    p.why = "assumed NVLink 18 x 25 GB/s (H100/H200 SXM; NVML not loaded: " + nvmlWhy + "), about 85%";
    return p;
  }
  p.sameSwitch = sameSwitch(a.busId, b.busId);
  double ra = pciePracticalGbps(a.link.currentGts, a.link.currentWidth);
  double rb = pciePracticalGbps(b.link.currentGts, b.link.currentWidth);
  p.gbps = std::min(ra, rb);
  p.why = "about, PCIe " + a.link.text() + " / " + b.link.text() + (p.sameSwitch ? " (one switch)" : "");
  if (p.gbps <= 0) p.why = "PCIe link unknown (sysfs)";
  return p;
}

Figure newFigure(const std::string& path, const PathExpectation& e) {
  Figure f;
  f.section = "p2p";
  f.path = path;
  f.unit = "GB/s";
  f.expected = e.gbps;
  f.expectedWhy = e.why;
  f.verdict = "best of 3 runs per size; ";
  return f;
}

void judge(const PathExpectation& e, Figure* f) {
  if (f->expected <= 0) {
    f->verdict += "no expectation for this path";
    return;
  }
  double share = f->best / f->expected;
  if (share >= 0.6) {
    f->verdict += "ok: " + fixed(100 * share, 0) + "% of the path's expected rate";
    return;
  }
  f->severity = Severity::Warning;
  f->verdict += fixed(100 * share, 0) + "% of the path's expected rate: " +
                (e.nvlink ? std::string("NVLinks down or erroring? (nvidia-smi nvlink -s, nvidia-smi nvlink -e)")
                          : std::string("P2P routed through the CPU (ACS/IOMMU), or a slow link?"));
}

// One ordered pair; returns the copy's best GB/s (0 when it failed) for the matrix.
double measurePair(Gpu& a, Gpu& b, const std::vector<size_t>& sizes, const PathExpectation& e,
                   const Deadline& deadline, Report* report) {
  const std::string ab = "GPU" + std::to_string(a.device) + "->GPU" + std::to_string(b.device);
  const std::string ba = "GPU" + std::to_string(a.device) + "<-GPU" + std::to_string(b.device);
  int can = 0;
  // Everything below runs on a's stream, with events made on a: a is the current device.
  cudaError_t error = cudaSetDevice(a.device);
  if (error != cudaSuccess) {
    addCudaError(report, "p2p", "P2P " + ab, "cudaSetDevice", error);
    return 0;
  }
  if ((error = cudaDeviceCanAccessPeer(&can, a.device, b.device)) != cudaSuccess) {
    addCudaError(report, "p2p", "P2P " + ab, "cudaDeviceCanAccessPeer", error);
    return 0;
  }
  bool enabled = false;
  if (can) {
    error = cudaDeviceEnablePeerAccess(b.device, 0);
    if (error == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
    } else if (error != cudaSuccess) {
      addCudaError(report, "p2p", "P2P " + ab, "cudaDeviceEnablePeerAccess", error);
      return 0;
    } else {
      enabled = true;
    }
  }
  Figure copy = newFigure("P2P copy " + ab, e);
  std::string why;
  auto peerCopy = [&](size_t bytes) {
    return cudaMemcpyPeerAsync(b.buffer.ptr, b.device, a.buffer.ptr, a.device, bytes, a.stream.stream);
  };
  double copyBest = 0;
  bool complete = true;
  if (!sweepBandwidth(sizes, a.stream.stream, deadline, kRepeats, peerCopy, &copy, &complete, &why, &error)) {
    addCudaError(report, "p2p", copy.path, why, error);
  } else if (!can) {
    copy.verdict += "no peer access: the copy is staged through host memory. ";
    if (e.nvlink || e.sameSwitch) {
      copy.severity = Severity::Warning;
      copy.verdict += std::string("the path (") + (e.nvlink ? "NVLink" : "one PCIe switch") +
                      ") allows P2P: P2P off: IOMMU/ACS or a driver setting";
      if (std::getenv("NCCL_P2P_DISABLE")) copy.verdict += "; NCCL_P2P_DISABLE is set here too";
    } else {
      copy.verdict += "normal across CPU root complexes without NVLink";
    }
    copy.expected = 0;
    copy.expectedWhy = "staged copy: no link expectation";
    copyBest = copy.best;
    report->figures.push_back(copy);
  } else {
    if (complete) judge(e, &copy);
    copyBest = copy.best;
    report->figures.push_back(copy);
  }
  if (!can) {
    report->skipped.push_back({"P2P kernel read/write " + ab, "no peer access between them"});
  } else if (!peerKernelsBuilt()) {
    report->skipped.push_back({"P2P kernel read/write " + ab, "kernels not built (BRAID_ENABLE_CUDA=OFF)"});
  } else {
    Figure read = newFigure("P2P kernel read " + ba, e);
    auto peerRead = [&](size_t bytes) {
      return launchPeerRead(b.buffer.ptr, bytes, a.sink.ptr, a.sms, a.stream.stream);
    };
    if (sweepBandwidth(sizes, a.stream.stream, deadline, kRepeats, peerRead, &read, &complete, &why, &error)) {
      read.verdict = "kernel on GPU" + std::to_string(a.device) + ", int4 loads, " + read.verdict;
      if (complete) judge(e, &read);
      report->figures.push_back(read);
    } else {
      addCudaError(report, "p2p", read.path, why, error);
    }
    Figure write = newFigure("P2P kernel write " + ab, e);
    auto peerWrite = [&](size_t bytes) { return launchPeerWrite(b.buffer.ptr, bytes, a.sms, a.stream.stream); };
    if (sweepBandwidth(sizes, a.stream.stream, deadline, kRepeats, peerWrite, &write, &complete, &why, &error)) {
      write.verdict = "kernel on GPU" + std::to_string(a.device) + ", int4 stores, " + write.verdict;
      if (complete) judge(e, &write);
      report->figures.push_back(write);
    } else {
      addCudaError(report, "p2p", write.path, why, error);
    }
  }
  if (enabled && cudaSetDevice(a.device) == cudaSuccess) (void)cudaDeviceDisablePeerAccess(b.device);
  (void)cudaGetLastError();
  return copyBest;
}

}  // namespace

void measurePeers(const MeasureOptions& opt, Report* report) {
  if (skippedByOption(opt, "peers", report) || skippedByOption(opt, "p2p", report)) return;
  int count = deviceCountOrSkip("p2p", report);
  if (count == 0) return;
  if (count < 2) {
    report->skipped.push_back({"p2p", "one GPU: no pair"});
    return;
  }
  Deadline deadline(opt.budgetSeconds);
  const auto sizes = sweepSizes(opt.quick);
  topo::Nvml nvml;
  std::vector<std::unique_ptr<Gpu>> gpus;
  for (int d = 0; d < count; ++d) {
    auto g = std::make_unique<Gpu>();
    g->device = d;
    CudaCheck c;
    cudaDeviceProp prop{};
    g->busId = busIdOf(d, &c);
    if (c(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties(" + std::to_string(d) + ")")) {
      g->name = prop.name;
      g->sms = prop.multiProcessorCount;
      g->ccMajor = prop.major;
    }
    if (!c(g->buffer.allocate(d, sizes.back()), "cudaMalloc(" + sizeText(sizes.back()) + ")") ||
        !c(g->sink.allocate(d, 16), "cudaMalloc(16)") || !c(g->stream.create(), "cudaStreamCreate") ||
        !c(cudaMemset(g->buffer.ptr, 0, sizes.back()), "cudaMemset")) {
      addCudaError(report, "p2p", "P2P buffers on GPU" + std::to_string(d), c.call(), c.error());
      return;
    }
    g->link = pcieLinkOf(g->busId);
    if (nvml.loaded()) g->nvlinks = nvml.nvlinks(g->busId, &pciClassOf, nullptr);
    gpus.push_back(std::move(g));
  }
  // The copy matrix, row = source, column = destination (GB/s, best size).
  std::string matrix = "      ";
  for (int b = 0; b < count; ++b) matrix += "   GPU" + std::to_string(b) + (b < 10 ? " " : "");
  matrix += "\n";
  bool stopped = false;
  for (int a = 0; a < count; ++a) {
    matrix += "GPU" + std::to_string(a) + (a < 10 ? "  " : " ");
    for (int b = 0; b < count; ++b) {
      std::string cell = "-";
      if (a != b && !stopped && deadline.passed()) {
        report->skipped.push_back({"p2p", "pairs from GPU" + std::to_string(a) + "->GPU" + std::to_string(b) +
                                              " on: out of time budget (" + fixed(opt.budgetSeconds, 0) + " s)"});
        stopped = true;
      }
      if (a != b && !stopped) {
        PathExpectation e = expectPath(*gpus[a], *gpus[b], nvml.loaded(), nvml.why());
        double best = measurePair(*gpus[a], *gpus[b], sizes, e, deadline, report);
        cell = best > 0 ? fixed(best, 0) : "err";
      }
      matrix += std::string(8 - std::min<size_t>(cell.size(), 7), ' ') + cell;
    }
    matrix += "\n";
  }
  report->blocks.push_back({"P2P copy GB/s (row: source GPU, column: destination)", matrix});
}

}  // namespace braid::doctor
