#include "tools/braid-doctor/measure_util.h"

#include <dirent.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace braid::doctor::measure {

double nowSeconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

std::vector<size_t> sweepSizes(bool quick) {
  if (quick) return {size_t{64} << 10, size_t{64} << 20};
  std::vector<size_t> sizes;
  for (size_t bytes = size_t{4} << 10; bytes <= (size_t{256} << 20); bytes *= 4) sizes.push_back(bytes);
  return sizes;
}

std::string sizeText(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, bytes == static_cast<long long>(bytes) ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return text;
}

std::string fixed(double value, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

bool skippedByOption(const MeasureOptions& opt, const std::string& part, Report* report) {
  for (const auto& s : opt.skip) {
    if (s == part || s == "all") {
      report->skipped.push_back({part, "skipped by --skip " + s});
      return true;
    }
  }
  return false;
}

int deviceCountOrSkip(const std::string& part, Report* report) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();  // a missing driver leaves no sticky error, but be sure
    report->skipped.push_back(
        {part, "no CUDA device: " + std::string(error != cudaSuccess ? cudaGetErrorString(error) : "0 devices")});
    return 0;
  }
  return count;
}

std::string cudaText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

void addCudaError(Report* report, const std::string& section, const std::string& path, const std::string& call,
                  cudaError_t error) {
  Figure f;
  f.section = section;
  f.path = path;
  f.unit = "GB/s";
  f.severity = Severity::Error;
  f.verdict = call + " failed: " + cudaText(error);
  report->figures.push_back(f);
  (void)cudaGetLastError();  // clear a non-sticky error so the next part starts clean
}

bool CudaCheck::operator()(cudaError_t error, const std::string& call) {
  if (error_ != cudaSuccess) return false;  // keep the first failure
  if (error == cudaSuccess) return true;
  error_ = error;
  call_ = call;
  return false;
}

cudaError_t DeviceBuffer::allocate(int dev, size_t bytes) {
  device = dev;
  cudaError_t e = cudaSetDevice(dev);
  return e != cudaSuccess ? e : cudaMalloc(&ptr, bytes);
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr == nullptr) return;
  int current = 0;
  bool restore = cudaGetDevice(&current) == cudaSuccess && current != device;
  (void)cudaSetDevice(device);
  (void)cudaFree(ptr);
  if (restore) (void)cudaSetDevice(current);
}

cudaError_t PinnedBuffer::allocate(size_t bytes) { return cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable); }
PinnedBuffer::~PinnedBuffer() {
  if (ptr != nullptr) (void)cudaFreeHost(ptr);
}

cudaError_t Stream::create() { return cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); }
Stream::~Stream() {
  if (stream != nullptr) (void)cudaStreamDestroy(stream);
}

cudaError_t timeOnStream(cudaStream_t stream, int repeats, const std::function<cudaError_t()>& op, Timing* out,
                         std::string* failedCall) {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t e = cudaEventCreate(&start);
  if (e != cudaSuccess) {
    *failedCall = "cudaEventCreate";
    return e;
  }
  e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    *failedCall = "cudaEventCreate";
    (void)cudaEventDestroy(start);
    return e;
  }
  std::vector<double> seconds;
  for (int run = 0; run <= repeats && e == cudaSuccess; ++run) {  // run 0 warms up
    if ((e = cudaEventRecord(start, stream)) != cudaSuccess) { *failedCall = "cudaEventRecord"; break; }
    if ((e = op()) != cudaSuccess) { *failedCall = "the measured operation"; break; }
    if ((e = cudaEventRecord(stop, stream)) != cudaSuccess) { *failedCall = "cudaEventRecord"; break; }
    if ((e = cudaEventSynchronize(stop)) != cudaSuccess) { *failedCall = "cudaEventSynchronize"; break; }
    float ms = 0;
    if ((e = cudaEventElapsedTime(&ms, start, stop)) != cudaSuccess) { *failedCall = "cudaEventElapsedTime"; break; }
    if (run > 0) seconds.push_back(ms / 1e3);
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  if (e != cudaSuccess || seconds.empty()) return e;
  std::sort(seconds.begin(), seconds.end());
  out->best = seconds.front();
  out->median = seconds[seconds.size() / 2];
  return cudaSuccess;
}

bool sweepBandwidth(const std::vector<size_t>& sizes, cudaStream_t stream, const Deadline& deadline, int repeats,
                    const std::function<cudaError_t(size_t)>& op, Figure* f, bool* complete, std::string* why,
                    cudaError_t* error) {
  *complete = true;
  for (size_t bytes : sizes) {
    if (deadline.passed()) {
      *complete = false;
      f->verdict += "stopped before " + sizeText(static_cast<double>(bytes)) + " (out of time budget), not judged";
      return true;
    }
    Timing t;
    std::string call;
    *error = timeOnStream(stream, repeats, [&] { return op(bytes); }, &t, &call);
    if (*error != cudaSuccess) {
      *why = call + " (" + sizeText(static_cast<double>(bytes)) + ")";
      return false;
    }
    double rate = gbps(static_cast<double>(bytes), t.best);
    f->points.push_back({static_cast<double>(bytes), rate});
    if (rate > f->best) f->best = rate;
  }
  return true;
}

std::string busIdOf(int device, CudaCheck* check) {
  char id[32] = "";
  if (!(*check)(cudaDeviceGetPCIBusId(id, sizeof id, device), "cudaDeviceGetPCIBusId(" + std::to_string(device) + ")"))
    return "";
  std::string s = id;
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // CUDA writes an 8-digit domain ("00000000:17:00.0"); sysfs uses 4.
  if (s.size() > 12 && s.find(':') == 8) s = s.substr(4);
  return s;
}

std::string readSysfs(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

namespace {
double parseGts(const std::string& speed) {  // "16.0 GT/s PCIe" -> 16; "Unknown" -> 0
  return speed.empty() ? 0 : std::strtod(speed.c_str(), nullptr);
}
int parseInt(const std::string& text, int otherwise) {
  if (text.empty()) return otherwise;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  return end == text.c_str() ? otherwise : static_cast<int>(v);
}
}  // namespace

PcieLink pcieLinkOf(const std::string& busId) {
  PcieLink link;
  if (busId.empty()) return link;
  const std::string dir = "/sys/bus/pci/devices/" + busId + "/";
  link.currentGts = parseGts(readSysfs(dir + "current_link_speed"));
  link.maxGts = parseGts(readSysfs(dir + "max_link_speed"));
  link.currentWidth = parseInt(readSysfs(dir + "current_link_width"), 0);
  link.maxWidth = parseInt(readSysfs(dir + "max_link_width"), 0);
  link.numaNode = parseInt(readSysfs(dir + "numa_node"), -1);
  return link;
}

int pcieGeneration(double gts) {
  const double rates[] = {2.5, 5, 8, 16, 32, 64};
  for (int g = 0; g < 6; ++g)
    if (gts > rates[g] * 0.9 && gts < rates[g] * 1.1) return g + 1;
  return 0;
}

std::string PcieLink::text() const {
  auto one = [](double gts, int width) {
    int gen = pcieGeneration(gts);
    return (gen > 0 ? "Gen" + std::to_string(gen) : fixed(gts, 1) + " GT/s") + " x" + std::to_string(width);
  };
  if (!known()) return "unknown";
  std::string s = one(currentGts, currentWidth);
  if (maxGts > 0 && maxWidth > 0 && (maxGts > currentGts * 1.01 || maxWidth > currentWidth))
    s += " (device max " + one(maxGts, maxWidth) + ")";
  return s;
}

double pciePracticalGbps(double gts, int width) {
  // Pinned copies reach about 83-87% of the raw rate after 128b/130b coding and packet headers
  // (measured: Gen4 x16 about 26 GB/s, Gen5 x16 about 55 GB/s).
  int gen = pcieGeneration(gts);
  if (gen == 0 || width <= 0) return 0;
  const double perLaneX16[] = {0, 3.2, 6.4, 12.5, 26, 55, 110};  // GB/s at x16
  return perLaneX16[gen] * width / 16.0;
}

int currentCpuNumaNode() {
  int cpu = sched_getcpu();
  if (cpu < 0) return -1;
  DIR* dir = opendir(("/sys/devices/system/cpu/cpu" + std::to_string(cpu)).c_str());
  if (dir == nullptr) return -1;
  int node = -1;
  while (dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, "node", 4) == 0 && std::isdigit(static_cast<unsigned char>(e->d_name[4]))) {
      node = std::atoi(e->d_name + 4);
      break;
    }
  }
  closedir(dir);
  return node;
}

// What one GPU's memory gives to a device-to-device copy, in bytes copied per second (each
// byte is read once and written once, so the memory moves twice as much).
void memoryCopyExpectation(int device, const std::string& name, double* expected, std::string* why) {
  if (name.find("H200") != std::string::npos) {
    *expected = 2100;
    *why = "H200 HBM3e: about 4.2 TB/s read+write measured, i.e. 2.1 TB/s copied";
    return;
  }
  int clockKhz = 0, widthBits = 0;
  if (cudaDeviceGetAttribute(&clockKhz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&widthBits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess || clockKhz <= 0 ||
      widthBits <= 0) {
    (void)cudaGetLastError();
    *why = "memory clock or bus width unknown";
    return;
  }
  double peak = 2.0 * clockKhz * 1e3 * widthBits / 8 / 1e9;  // GB/s, read+write, double data rate
  *expected = 0.86 * peak / 2;  // an H200 reaches 86% of its peak in a copy
  *why = "about 86% of half the memory peak (2 x " + fixed(clockKhz / 1e3, 0) + " MHz x " +
                   std::to_string(widthBits) + " bit = " + fixed(peak, 0) + " GB/s read+write)";
}

}  // namespace braid::doctor::measure
