// Micro-benchmark of the GPU executor on one GPU, ranks as threads of one process (RankGroup,
// no communicator): all-reduce, all-gather, reduce-scatter and sendrecv on 2, 4 and 8 ranks,
// 64 MiB to 1 GiB, next to a device-to-device cudaMemcpy measured in the same run, plus an
// 8-byte all-reduce latency on 2 ranks in every protocol.
//
// "bytes" is nccl-tests' size: all-reduce count*4, all-gather the output (n*count*4),
// reduce-scatter the input (n*count*4), sendrecv what each rank sends; so every row of a size
// has the same largest per-rank buffer. Float32, sum, out of place, the ring algorithm;
// sendrecv is the API's P2P schedule (algo::buildP2p, as src/api/device_tasks.cc planP2p
// builds it): each rank sends to (r+1)%n and receives from (r-1+n)%n in one launch.
// "HBM GB/s" counts every byte the data path reads and writes per operation, on all ranks,
// FIFO traffic included (a FIFO byte counts once when written and once when read), taken
// from the ranks' plans ("HBM_bytes", last column); "of_memcpy" is that rate over the
// cudaMemcpy rate (read + write) of the same size. Targets: at least 0.7 of memcpy from
// 64 MiB up, and the 8-byte 2-rank all-reduce in at most 12 us; one "SUMMARY " line each.
//
//   gpu_bench_executor [--quick] [--coll LIST] [--ranks LIST] [--channels N] [--slot BYTES]
//                      [--slots N] [--slices N] [--proto LIST] [--no-work-cache]
//     --no-work-cache  upload large launches' work every launch (kernels::WorkCache off)
//     --quick          64 MiB and 256 MiB only (default: 64 MiB, 256 MiB, 1 GiB), fewer iterations
//     --coll LIST      allreduce,allgather,reducescatter,sendrecv (default: all four)
//     --ranks LIST     rank counts, e.g. 2,8 (default 2,4,8; 1 gives the executor's 1-rank copy)
//     --channels N     lanes per rank (default 128/ranks; the SM count for 1 rank); sendrecv
//                      uses the API's schedule, one lane per direction, whatever N is
//     --slot BYTES     FIFO slot size (default 512K; K, M suffixes; a multiple of 16)
//     --slots N        FIFO slots per connection (default 8)
//     --slices N       FIFO slices a large step is cut into (default 2, as the API)
//     --proto LIST     protocols of the bandwidth rows: LL,LL128,Simple (default Simple; LL and
//                      LL128 use the API's FIFO shapes, kernels::defaultFifo). The 8-byte
//                      latency rows always run all three, with the ring and direct algorithms.
// Under tests/gpu/run.sh (SECTION_LIMIT set), rows that would start within 15 s of the limit
// are skipped and reported as such, so that the SUMMARY lines still come out.
#include <algorithm>
#include <barrier>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rank_group.h"

namespace braid::gputest {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = size_t(1) << 20;
constexpr double kTargetOfMemcpy = 0.7;
constexpr double kTargetLatencyUs = 12;
constexpr double kRunTimeoutS = 20;  // one timed run (warm-up, or all iterations); then abort

// Bytes that one rank's plan reads and writes in HBM.
uint64_t planTraffic(const algo::RankPlan& plan, size_t elemSize) {
  uint64_t bytes = 0;
  for (const algo::Lane& lane : plan.lanes)
    for (const algo::Step& s : lane.steps) {
      const bool recv = s.recvPeer != algo::kNoPeer;
      const bool src = s.src != algo::kNoBuf && (!recv || (s.flags & algo::kReduce));
      const bool selfCopy = !recv && s.sendPeer == algo::kNoPeer && s.src == s.dst && s.srcOff == s.dstOff;
      if (selfCopy) continue;
      uint64_t accesses = recv + src + (s.dst != algo::kNoBuf) + (s.sendPeer != algo::kNoPeer);
      bytes += accesses * s.count * elemSize;
    }
  return bytes;
}

// The API's P2P schedule for one ncclSend to (r+1)%n and one ncclRecv from (r-1+n)%n in one
// group (planP2p in src/api/device_tasks.cc): buildP2p's lanes and steps unchanged, with
// buildP2p's buffer indices (2i for op i's send buffer, 2i+1 for its recv buffer) renamed to
// the {input, output} pair that RankGroup gives an op, and the lanes on channels 0.. instead
// of the API's kP2pChannelBase + 0..: here nothing else shares the launch, and a channel only
// names a connection of the same FIFO shape. Each op is cut into a part per channel (the
// API cuts by size, up to its P2P channel limit).
algo::RankPlan ringSendRecvPlan(const algo::CollArgs& a) {
  const int n = a.nRanks, r = a.rank;
  const auto parts = static_cast<uint32_t>(std::min(a.nChannels, 32));  // the API's P2P channel limit
  const std::vector<algo::P2pOp> ops = {{true, (r + 1) % n, a.count, parts}, {false, (r - 1 + n) % n, a.count, parts}};
  algo::RankPlan plan = algo::buildP2p(r, n, ops);
  auto rename = [](uint16_t& buf) {
    if (buf != algo::kNoBuf) buf = buf % 2 == 0 ? algo::kInput : algo::kOutput;
  };
  for (algo::Lane& lane : plan.lanes)
    for (algo::Step& s : lane.steps) {
      rename(s.src);
      rename(s.dst);
    }
  return plan;
}
bool anyRanks(algo::Coll, int nRanks) { return nRanks >= 1; }
const algo::Algorithm kRingSendRecv{"sendrecv-ring", anyRanks, ringSendRecvPlan};

struct Bench {
  const char* name;
  algo::Coll coll;
};
constexpr Bench kBenches[] = {
    {"allreduce", algo::Coll::AllReduce},
    {"allgather", algo::Coll::AllGather},
    {"reducescatter", algo::Coll::ReduceScatter},
    {"sendrecv", algo::Coll::SendRecv},
};

// NCCL's count for a row of `size` bytes (the largest per-rank buffer), and nccl-tests' bytes.
uint64_t countFor(algo::Coll c, int n, size_t size) {
  const bool blocked = c == algo::Coll::AllGather || c == algo::Coll::ReduceScatter;
  return size / sizeof(float) / (blocked ? uint64_t(n) : 1);
}
size_t ncclBytes(algo::Coll c, int n, uint64_t count) {
  const bool blocked = c == algo::Coll::AllGather || c == algo::Coll::ReduceScatter;
  return size_t(count) * sizeof(float) * (blocked ? size_t(n) : 1);
}

// Device allocations freed however the caller returns.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    for (void* p : ptrs_) (void)cudaFree(p);
  }
  // nullptr on failure (reported; the error is cleared so later launches don't see it).
  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (!GPU_OK(cudaMalloc(&p, std::max<size_t>(bytes, 16)))) {
      (void)cudaGetLastError();
      return nullptr;
    }
    ptrs_.push_back(p);
    return p;
  }

 private:
  std::vector<void*> ptrs_;
};

class Events {
 public:
  explicit Events(size_t n) : ev_(n, nullptr) {}
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  ~Events() {
    for (cudaEvent_t e : ev_)
      if (e != nullptr) (void)cudaEventDestroy(e);
  }
  bool create() {
    for (cudaEvent_t& e : ev_)
      if (!GPU_OK(cudaEventCreate(&e))) return false;
    return true;
  }
  cudaEvent_t operator[](size_t i) const { return ev_[i]; }

 private:
  std::vector<cudaEvent_t> ev_;
};

// Device-to-device cudaMemcpy rate, read + write, in GB/s; 0 when CUDA fails.
double memcpyRate(size_t bytes, int iters) {
  DeviceMemory mem;
  void* a = mem.alloc(bytes);
  void* b = mem.alloc(bytes);
  if (a == nullptr || b == nullptr) return 0;
  if (!GPU_OK(cudaMemset(a, 1, bytes)) || !GPU_OK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)) ||
      !GPU_OK(cudaDeviceSynchronize()))
    return 0;
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i)
    if (!GPU_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, nullptr))) return 0;
  if (!GPU_OK(cudaDeviceSynchronize())) return 0;
  double secs = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  return 2.0 * bytes / secs / 1e9;
}

struct RowResult {
  enum Status { Ok, NoMemory, Failed } status = Failed;  // Failed: the group is unusable now
  double us = 0;
  double hostUs = 0;  // the slowest rank's host time per enqueue (enqueuing only, no wait)
  double hbmGBs = 0;
  uint64_t hbmBytes = 0;  // per operation, all ranks
  std::string why;
};

// Times `iters` back-to-back operations (after one warm-up) of `count` floats on the group,
// `channels` lanes per rank, fresh out-of-place buffers that are freed on return.
RowResult runRow(RankGroup& g, algo::Coll coll, uint64_t count, int channels, int iters,
                 algo::Protocol proto = algo::Protocol::Simple, const algo::Algorithm* algorithm = nullptr) {
  RowResult res;
  const int n = g.nRanks();
  const size_t inBytes = algo::inputCount(coll, count, n, 0, 0) * sizeof(float);
  const size_t outBytes = algo::outputCount(coll, count, n, 0, 0) * sizeof(float);
  DeviceMemory mem;
  std::vector<CollCall> calls(n);
  for (int r = 0; r < n; ++r) {
    void* in = mem.alloc(inBytes);
    void* out = mem.alloc(outBytes);
    if (in == nullptr || out == nullptr) {
      res.status = RowResult::NoMemory;
      res.why = "cudaMalloc failed";
      return res;
    }
    if (!GPU_OK(cudaMemset(in, 0, inBytes))) {
      res.why = "cudaMemset failed";
      return res;
    }
    CollCall& c = calls[r];
    c.algorithm = coll == algo::Coll::SendRecv ? &kRingSendRecv : algorithm != nullptr ? algorithm : algo::findAlgorithm("ring");
    c.args.coll = coll;
    c.args.count = count;
    c.args.nChannels = channels;
    c.args.alignElems = 4;
    c.args.nRanks = n;
    c.args.rank = r;
    c.args.maxStepElems = g.maxStepElems(ncclFloat32, proto);
    c.type = ncclFloat32;
    c.input = in;
    c.output = out;
    res.hbmBytes += planTraffic(c.algorithm->build(c.args), sizeof(float));
  }
  if (!g.settle()) {
    res.why = "CUDA error before the run";
    return res;
  }
  g.clearErrors();
  // Each rank enqueues from its own thread, as ranks of separate processes would, released
  // together by a barrier. GPU time from events on the ranks' streams: the earliest start to
  // the latest end.
  Events begin(n), end(n);
  if (!begin.create() || !end.create()) {
    res.why = "cudaEventCreate failed";
    return res;
  }
  std::vector<double> hostUs(n, 0);
  auto run = [&](int times) -> bool {
    std::vector<int> ok(n, 1);
    std::barrier sync(n);
    g.onEachRank([&](int r) {
      sync.arrive_and_wait();
      ok[r] = GPU_OK(cudaEventRecord(begin[r], g.stream(r)));
      const auto t0 = Clock::now();
      for (int i = 0; i < times && ok[r]; ++i) ok[r] = g.enqueue(r, {calls[r]}, proto) == ncclSuccess;
      hostUs[r] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / times;
      ok[r] = ok[r] && GPU_OK(cudaEventRecord(end[r], g.stream(r)));
    });
    if (std::find(ok.begin(), ok.end(), 0) != ok.end()) {
      res.why = "enqueue failed";
      *g.abortFlag() = 1;  // the ranks that did enqueue would wait for the others forever
      (void)g.synchronize();
      return false;
    }
    if (!g.waitOrAbort(kRunTimeoutS)) {
      res.why = "hang or CUDA error (aborted)";
      return false;
    }
    for (int r = 0; r < n; ++r)
      if (g.deviceError(r) != 0) {
        res.why = "device error " + std::to_string(g.deviceError(r)) + " on rank " + std::to_string(r);
        return false;
      }
    return true;
  };
  if (!run(1) || !run(iters)) return res;
  float first = 0, last = 0;
  for (int r = 0; r < n; ++r) {
    float startMs = 0, endMs = 0;
    if (!GPU_OK(cudaEventElapsedTime(&startMs, begin[0], begin[r])) ||
        !GPU_OK(cudaEventElapsedTime(&endMs, begin[0], end[r]))) {
      res.why = "cudaEventElapsedTime failed";
      return res;
    }
    first = std::min(first, startMs);
    last = std::max(last, endMs);
  }
  const double secs = (last - first) / 1e3 / iters;
  if (!(secs > 0)) {
    res.why = "no time measured";
    return res;
  }
  res.status = RowResult::Ok;
  res.us = secs * 1e6;
  res.hostUs = *std::max_element(hostUs.begin(), hostUs.end());
  res.hbmGBs = double(res.hbmBytes) / secs / 1e9;
  return res;
}

struct Options {
  bool quick = false;
  std::vector<const Bench*> benches;
  std::vector<int> ranks = {2, 4, 8};
  int channels = 0;  // 0: 128/ranks, the SM count for one rank
  uint32_t slotBytes = 512 * 1024;
  uint32_t nSlots = 8;
  int slicesPerStep = 2;
  bool workCache = true;  // keep uploaded work between launches, as the API does
  std::vector<algo::Protocol> protos = {algo::Protocol::Simple};  // of the bandwidth rows
};

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// A positive integer with an optional K/M/G (binary) suffix; false when malformed or > max.
bool parseNumber(const std::string& s, uint64_t max, uint64_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  std::string suffix(end);
  uint64_t scale = 1;
  if (suffix == "K" || suffix == "k") scale = 1 << 10;
  else if (suffix == "M" || suffix == "m") scale = 1 << 20;
  else if (suffix == "G" || suffix == "g") scale = 1 << 30;
  else if (!suffix.empty()) return false;
  if (v == 0 || v > max / scale) return false;
  *out = v * scale;
  return true;
}

const Bench* findBench(const std::string& name) {
  static const std::map<std::string, std::string> aliases = {
      {"ar", "allreduce"}, {"ag", "allgather"}, {"rs", "reducescatter"}, {"sr", "sendrecv"}};
  auto it = aliases.find(name);
  const std::string full = it != aliases.end() ? it->second : name;
  for (const Bench& b : kBenches)
    if (full == b.name) return &b;
  return nullptr;
}

void usage() {
  std::fprintf(stderr,
               "usage: gpu_bench_executor [--quick] [--coll allreduce,allgather,reducescatter,sendrecv]\n"
               "                          [--ranks 2,4,8] [--channels N] [--slot BYTES] [--slots N] [--slices N]\n"
               "                          [--proto LL,LL128,Simple] [--no-work-cache]\n");
}

// Parses argv; false (after a message) on bad input.
bool parseOptions(int argc, char** argv, Options* o) {
  bool collsGiven = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    const bool takesValue = arg.rfind("--coll", 0) == 0 || arg.rfind("--ranks", 0) == 0 ||
                            arg.rfind("--channels", 0) == 0 || arg.rfind("--slot", 0) == 0 ||
                            arg.rfind("--slices", 0) == 0 || arg.rfind("--proto", 0) == 0;
    if (takesValue) {
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        return false;
      }
    }
    uint64_t v = 0;
    if (arg == "--quick") {
      o->quick = true;
    } else if (arg == "--no-work-cache") {
      o->workCache = false;
    } else if (arg == "--coll") {
      collsGiven = true;
      for (const std::string& name : splitList(value)) {
        if (name == "all") {
          for (const Bench& b : kBenches) o->benches.push_back(&b);
          continue;
        }
        const Bench* b = findBench(name);
        if (b == nullptr) {
          std::fprintf(stderr, "--coll: unknown collective '%s'\n", name.c_str());
          return false;
        }
        o->benches.push_back(b);
      }
    } else if (arg == "--ranks") {
      o->ranks.clear();
      for (const std::string& item : splitList(value)) {
        if (!parseNumber(item, 64, &v)) {
          std::fprintf(stderr, "--ranks: '%s' is not a rank count in 1..64\n", item.c_str());
          return false;
        }
        o->ranks.push_back(int(v));
      }
    } else if (arg == "--channels") {
      if (!parseNumber(value, 1024, &v)) {
        std::fprintf(stderr, "--channels: '%s' is not in 1..1024\n", value.c_str());
        return false;
      }
      o->channels = int(v);
    } else if (arg == "--slot") {
      if (!parseNumber(value, uint64_t(1) << 30, &v) || v % 16 != 0) {
        std::fprintf(stderr, "--slot: '%s' is not a multiple of 16 bytes up to 1G\n", value.c_str());
        return false;
      }
      o->slotBytes = uint32_t(v);
    } else if (arg == "--slots") {
      if (!parseNumber(value, 4096, &v)) {
        std::fprintf(stderr, "--slots: '%s' is not in 1..4096\n", value.c_str());
        return false;
      }
      o->nSlots = uint32_t(v);
    } else if (arg == "--proto") {
      o->protos.clear();
      for (const std::string& name : splitList(value)) {
        std::string low = name;
        for (char& ch : low) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        if (low == "ll") o->protos.push_back(algo::Protocol::LL);
        else if (low == "ll128") o->protos.push_back(algo::Protocol::LL128);
        else if (low == "simple") o->protos.push_back(algo::Protocol::Simple);
        else {
          std::fprintf(stderr, "--proto: unknown protocol '%s' (LL, LL128, Simple)\n", name.c_str());
          return false;
        }
      }
    } else if (arg == "--slices") {
      if (!parseNumber(value, 64, &v)) {
        std::fprintf(stderr, "--slices: '%s' is not in 1..64\n", value.c_str());
        return false;
      }
      o->slicesPerStep = int(v);
    } else {
      std::fprintf(stderr, "unknown argument '%s'\n", argv[i]);
      return false;
    }
  }
  if (!collsGiven)
    for (const Bench& b : kBenches) o->benches.push_back(&b);
  auto dedup = [](auto& v) {
    for (size_t i = 0; i < v.size(); ++i) v.erase(std::remove(v.begin() + i + 1, v.end(), v[i]), v.end());
  };
  dedup(o->benches);
  dedup(o->ranks);
  dedup(o->protos);
  if (o->benches.empty() || o->ranks.empty() || o->protos.empty()) {
    std::fprintf(stderr, "--coll, --ranks and --proto need at least one entry\n");
    return false;
  }
  return true;
}

std::unique_ptr<RankGroup> makeGroup(const Options& o, int n, int channels, std::vector<algo::Protocol> protos) {
  GroupOptions g;
  g.protocols = std::move(protos);
  g.nRanks = n;
  g.nChannels = channels;
  g.slotBytes = o.slotBytes;
  if (!o.workCache) g.workCacheEntries = 0;
  g.nSlots = o.nSlots;
  g.slicesPerStep = o.slicesPerStep;
  return RankGroup::create(g);
}

// Macros rather than variables, so that the compiler checks the arguments.
std::string hostColumn(const RowResult& row) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", row.hostUs);
  return text;
}

#define BENCH_ROW "%-13s %5d %12zu %12.1f %10.1f %9.2f %14llu %8s\n"
#define BENCH_HEAD "%-13s %5s %12s %12s %10s %9s %14s %8s\n"

}  // namespace
}  // namespace braid::gputest

int main(int argc, char** argv) {
  using namespace braid::gputest;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines survive a kill by run.sh's timeout
  Options opt;
  if (!parseOptions(argc, argv, &opt)) {
    usage();
    return 2;
  }
  if (skipWithoutGpu()) return kSkipExit;
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  double deadline = std::numeric_limits<double>::infinity();
  if (const char* limit = std::getenv("SECTION_LIMIT"); limit != nullptr && std::atof(limit) > 0)
    deadline = std::atof(limit) - 15;

  int sms = 0;
  cudaDeviceProp prop{};
  if (!GPU_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0)) ||
      !GPU_OK(cudaGetDeviceProperties(&prop, 0)))
    return 1;
  const int baseIters = opt.quick ? 3 : 5;
  std::vector<size_t> sizes = {64 * kMiB, 256 * kMiB, 1024 * kMiB};
  if (opt.quick) sizes = {64 * kMiB, 256 * kMiB};
  // More iterations for smaller sizes (4x at 64 MiB), so that each row runs about as long.
  auto itersFor = [&](size_t size) { return baseIters * int(std::max<size_t>(1, 256 * kMiB / size)); };
  auto channelsFor = [&](int n) { return opt.channels > 0 ? opt.channels : n == 1 ? sms : std::max(1, 128 / n); };

  std::printf("# %s, %d SMs; FIFO %u slots x %u bytes; lanes per rank %s; float32 sum, ring, out of place\n",
              prop.name, sms, opt.nSlots, opt.slotBytes,
              opt.channels > 0 ? std::to_string(opt.channels).c_str() : "128/ranks (SMs for 1 rank)");
  std::printf("# bytes: allreduce count*4, allgather output n*count*4, reducescatter input n*count*4, "
              "sendrecv sent per rank (to r+1, one lane per direction, the API's buildP2p)\n");
  std::printf("# HBM_bytes: per operation, all ranks, read + written by the plans (buffers and FIFO slots); "
              "HBM_GB/s = HBM_bytes / time; of_memcpy: over the cudaMemcpy D2D rate (read + write)\n");

  // The reference first: cudaMemcpy device to device, per size.
  std::map<size_t, double> copyRate;
  std::printf(BENCH_HEAD, "what", "ranks", "bytes", "time_us", "HBM_GB/s", "of_memcpy", "HBM_bytes", "host_us");
  for (size_t size : sizes) {
    const double copy = memcpyRate(size, itersFor(size));
    copyRate[size] = copy;
    if (copy > 0)
      std::printf(BENCH_ROW, "memcpy", 1, size, 2.0 * size / copy / 1e3, copy, 1.0, (unsigned long long)(2 * size), "-");
    else
      std::printf("%-13s %5d %12zu FAILED (cudaMemcpy)\n", "memcpy", 1, size);
  }

  // Latency: 8-byte all-reduce across 2 ranks, 1 lane each, back-to-back calls, in every
  // protocol, with the ring (two hops in a row) and the one-hop direct algorithm (the API's
  // choice for 2-rank all-reduces up to 64 KiB). It is an all-reduce on 2 ranks: measured
  // when both are selected. The target applies to the best row.
  const bool wantLatency = std::find(opt.ranks.begin(), opt.ranks.end(), 2) != opt.ranks.end() &&
                           std::find(opt.benches.begin(), opt.benches.end(), &kBenches[0]) != opt.benches.end();
  if (wantLatency) {
    using braid::algo::Protocol;
    auto g = makeGroup(opt, 2, 1, {Protocol::LL, Protocol::LL128, Protocol::Simple});
    double best = std::numeric_limits<double>::infinity();
    std::string bestName = "none", failures;
    for (Protocol p : {Protocol::LL, Protocol::LL128, Protocol::Simple})
      for (const char* algoName : {"ring", "direct"}) {
        RowResult lat;
        const std::string what = std::string("lat-") + braid::algo::protocolName(p) + "-" + algoName;
        if (g == nullptr) lat.why = "group creation failed";
        else lat = runRow(*g, braid::algo::Coll::AllReduce, 2, 1, opt.quick ? 200 : 1000, p, braid::algo::findAlgorithm(algoName));
        if (lat.status == RowResult::Ok) {
          std::printf("%-13s %5d %12d %12.2f %10s %9s %14llu %8s\n", what.c_str(), 2, 8, lat.us, "-", "-",
                      (unsigned long long)lat.hbmBytes, hostColumn(lat).c_str());
          std::printf("SUMMARY latency %s %s allreduce n=2 8B: %.2f us\n", braid::algo::protocolName(p), algoName, lat.us);
          if (lat.us < best) best = lat.us, bestName = what;
        } else {
          std::printf("%-13s %5d %12d FAILED (%s)\n", what.c_str(), 2, 8, lat.why.c_str());
          failures += " " + what + ": " + lat.why + ";";
          if (lat.status == RowResult::Failed && g != nullptr) g = makeGroup(opt, 2, 1, {Protocol::LL, Protocol::LL128, Protocol::Simple});
        }
      }
    std::printf("SUMMARY latency allreduce n=2 8B: best %.2f us (%s), target %.0f us %s%s\n", best, bestName.c_str(),
                kTargetLatencyUs, best <= kTargetLatencyUs && failures.empty() ? "MET" : "NOT MET",
                failures.empty() ? "" : (" (failed:" + failures + ")").c_str());
  }

  for (int n : opt.ranks) {
    const int channels = channelsFor(n);
    std::unique_ptr<RankGroup> g;  // one group per rank count, rebuilt after a failed row
    bool groupFailed = false;
    if (n * channels > sms)
      std::printf("# warning: %d ranks x %d lanes = %d blocks > %d SMs: if they cannot all be resident, "
                  "rows hang and are aborted after %.0f s\n", n, channels, n * channels, sms, kRunTimeoutS);
    for (const Bench* b : opt.benches)
    for (braid::algo::Protocol proto : opt.protos) {
      // Rows are named by the collective, plus the protocol when it is not Simple.
      const std::string nameText = proto == braid::algo::Protocol::Simple
                                       ? std::string(b->name)
                                       : std::string(b->name) + "/" + braid::algo::protocolName(proto);
      const char* name = nameText.c_str();
      double worst = std::numeric_limits<double>::infinity();
      int good = 0, bad = 0;
      bool rowFailed = false;  // a hang or a CUDA error: larger sizes of this row would fail the same way
      for (size_t size : sizes) {
        const uint64_t count = countFor(b->coll, n, size);
        const size_t bytes = ncclBytes(b->coll, n, count);
        if (elapsed() > deadline || rowFailed) {
          std::printf("%-13s %5d %12zu SKIPPED (%s)\n", name, n, bytes,
                      rowFailed ? "a smaller size failed" : "SECTION_LIMIT");
          ++bad;
          continue;
        }
        if (g == nullptr && !groupFailed) {
          g = makeGroup(opt, n, channels, opt.protos);
          groupFailed = g == nullptr;
          if (g != nullptr)
            std::printf("# %d ranks: %d lanes per rank, FIFOs %.0f MiB per rank\n", n, channels,
                        double(g->fifoBytesPerRank()) / kMiB);
        }
        if (g == nullptr) {
          std::printf("%-13s %5d %12zu FAILED (group creation)\n", name, n, bytes);
          ++bad;
          continue;
        }
        RowResult row = runRow(*g, b->coll, count, channels, itersFor(size), proto);
        if (row.status != RowResult::Ok) {
          std::printf("%-13s %5d %12zu FAILED (%s)\n", name, n, bytes, row.why.c_str());
          ++bad;
          if (row.status == RowResult::Failed) {
            g.reset();  // connections out of step, or the abort flag raised
            rowFailed = true;
          }
          continue;
        }
        const double copy = copyRate[size];
        if (copy > 0) {
          std::printf(BENCH_ROW, name, n, bytes, row.us, row.hbmGBs, row.hbmGBs / copy,
                      (unsigned long long)row.hbmBytes, hostColumn(row).c_str());
          if (size >= 64 * kMiB) worst = std::min(worst, row.hbmGBs / copy);
          ++good;
        } else {
          std::printf("%-13s %5d %12zu %12.1f %10.1f %9s %14llu %8s\n", name, n, bytes, row.us, row.hbmGBs, "-",
                      (unsigned long long)row.hbmBytes, hostColumn(row).c_str());
          ++bad;
        }
      }
      char line[200];
      if (good == 0)
        std::snprintf(line, sizeof line, "SUMMARY %s n=%d: no result (%d rows failed or skipped)\n", name, n, bad);
      else
        std::snprintf(line, sizeof line, "SUMMARY %s n=%d: worst %.2f of memcpy from 64 MiB, target %.1f %s%s\n",
                      name, n, worst, kTargetOfMemcpy, worst >= kTargetOfMemcpy && bad == 0 ? "MET" : "NOT MET",
                      bad > 0 ? (" (" + std::to_string(bad) + " rows failed or skipped)").c_str() : "");
      std::fputs(line, stdout);
    }
    g.reset();
  }
  std::printf("# %.1f s\n", elapsed());
  return 0;
}
