// What the measurements share: the clock and budgets, the size sweep, CUDA error figures, RAII
// holders for CUDA objects, event timing, and the PCIe/NUMA facts sysfs gives about a GPU.
// Internal to tools/braid-doctor's measure_*.cc.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tools/braid-doctor/measure.h"

namespace braid::doctor::measure {

double nowSeconds();  // monotonic

// A point in time a part must finish by.
class Deadline {
 public:
  explicit Deadline(double seconds) : end_(nowSeconds() + seconds) {}
  bool passed() const { return nowSeconds() >= end_; }
  double left() const { return end_ - nowSeconds(); }

 private:
  double end_;
};

// quick: 64 KB and 64 MB; full: 4 KB..256 MB by factors of 4.
std::vector<size_t> sweepSizes(bool quick);
std::string sizeText(double bytes);  // "64 KB", "256 MB"
std::string fixed(double value, int digits);  // "%.*f"

// True when `part` (or "all") is in opt.skip; adds the Skip then.
bool skippedByOption(const MeasureOptions& opt, const std::string& part, Report* report);
// The CUDA device count; 0 after adding Skip(part, "no CUDA device: <error>") when there is none.
int deviceCountOrSkip(const std::string& part, Report* report);

// A figure that says a CUDA call failed: severity Error, the call and CUDA's error text.
void addCudaError(Report* report, const std::string& section, const std::string& path, const std::string& call,
                  cudaError_t error);
std::string cudaText(cudaError_t error);  // "cudaErrorInvalidValue: invalid argument"

// Remembers the first failing CUDA call of a sequence: `if (!c(cudaMalloc(...), "cudaMalloc")) ...`.
class CudaCheck {
 public:
  bool operator()(cudaError_t error, const std::string& call);
  bool failed() const { return error_ != cudaSuccess; }
  cudaError_t error() const { return error_; }
  const std::string& call() const { return call_; }
  std::string message() const { return call_ + ": " + cudaText(error_); }

 private:
  cudaError_t error_ = cudaSuccess;
  std::string call_;
};

// Owners that free on every path. Their frees cannot report anything useful at teardown, so
// their results are dropped (and the sticky error, if any, cleared by the next check).
struct DeviceBuffer {
  void* ptr = nullptr;
  int device = -1;
  cudaError_t allocate(int dev, size_t bytes);
  ~DeviceBuffer();
};
struct PinnedBuffer {
  void* ptr = nullptr;
  cudaError_t allocate(size_t bytes);
  ~PinnedBuffer();
};
struct Stream {
  cudaStream_t stream = nullptr;
  cudaError_t create();  // non-blocking, on the current device
  ~Stream();
};

// Times op() on `stream` with a pair of events: one warm-up run, then `repeats` timed runs.
struct Timing {
  double best = 0;    // seconds, the fastest run
  double median = 0;  // seconds
};
cudaError_t timeOnStream(cudaStream_t stream, int repeats, const std::function<cudaError_t()>& op, Timing* out,
                         std::string* failedCall);

// Times op(bytes) for each size on `stream` (the best of `repeats` after a warm-up) and adds the
// points, in GB/s, and their peak to *f. False with the failing call in *why when CUDA fails.
// At the deadline it stops: *complete false, and f->verdict says where it stopped (a partial
// sweep is not judged against the link: its small sizes never reach the peak).
bool sweepBandwidth(const std::vector<size_t>& sizes, cudaStream_t stream, const Deadline& deadline, int repeats,
                    const std::function<cudaError_t(size_t)>& op, Figure* f, bool* complete, std::string* why,
                    cudaError_t* error);

// GB/s of `bytes` in `seconds` (1 GB = 1e9 bytes).
inline double gbps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

// "0000:17:00.0", as sysfs spells it (lower case, 4-digit domain).
std::string busIdOf(int device, CudaCheck* check);
std::string readSysfs(const std::string& path);  // trimmed first line; "" when unreadable

// A GPU's PCIe link from sysfs (current_*: what it runs at now; max_*: what the device can).
struct PcieLink {
  double currentGts = 0, maxGts = 0;  // per lane, GT/s
  int currentWidth = 0, maxWidth = 0;
  int numaNode = -1;
  bool known() const { return currentGts > 0 && currentWidth > 0; }
  std::string text() const;  // "Gen5 x16" (current), with "(max Gen5 x16)" when lower
};
PcieLink pcieLinkOf(const std::string& busId);
int pcieGeneration(double gts);  // 2.5 -> 1, 5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5, 64 -> 6; 0 unknown
// What a pinned copy reaches on such a link, GB/s, about: Gen4 x16 26, Gen5 x16 55; 0 unknown.
double pciePracticalGbps(double gts, int width);
// What a device-to-device copy on one GPU should reach, in bytes copied per second (each byte
// is read once and written once); 0 with the reason when unknown.
void memoryCopyExpectation(int device, const std::string& name, double* expected, std::string* why);
// The NUMA node of the CPU this thread runs on; -1 when unknown.
int currentCpuNumaNode();

}  // namespace braid::doctor::measure
