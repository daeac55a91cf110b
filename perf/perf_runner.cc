#include "perf/perf_runner.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "perf/perf_collective.h"
#include "perf/perf_errors.h"
#include "perf/perf_json.h"
#include "perf/perf_json_read.h"
#include "perf/perf_memory.h"
#include "perf/perf_plot.h"
#include "perf/perf_rank_layout.h"
#include "perf/perf_shape.h"
#include "perf/perf_table.h"
#include "tests/common/reference.h"

namespace braid::perf {
namespace {

using check::Collective;
using check::ReduceOp;
using Clock = std::chrono::steady_clock;

constexpr size_t kRankRecordBytes = 256;  // one rank's "Using devices" line, gathered to rank 0
constexpr int kMismatchReportsPerRank = 5;

double secondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// -T for one rank: when the rank is not done in time, the process gives up (its other ranks,
// if they are threads, are stuck with it). Stopped when the rank ends, so that a finished rank
// (a thread of a longer-lived process) leaves nothing behind.
class Watchdog {
 public:
  Watchdog(int seconds, int rank) {
    if (seconds <= 0) return;
    thread_ = std::thread([this, seconds, rank] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return stopped_; })) return;
      std::fprintf(stderr, "braid-perf rank %d: timeout of %d s passed (-T); giving up\n", rank, seconds);
      std::fflush(stderr);
      std::fflush(stdout);
      _exit(kExitFailure);
    });
  }
  ~Watchdog() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopped_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopped_ = false;
  std::thread thread_;
};

// The file of the library that provides ncclGetVersion, as loaded ("libbraid.so",
// "libnccl.so.2.28.9" after resolving the libnccl.so.2 link); empty when unknown.
std::string ncclLibraryFile() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ncclGetVersion), &info) == 0 || info.dli_fname == nullptr) return "";
  char resolved[PATH_MAX];
  const char* path = realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

class BenchmarkRank {
 public:
  BenchmarkRank(const PerfOptions& options, const RankSetup& setup) : o_(options), s_(setup) {}

  ~BenchmarkRank() {
    // Every exit path ends here: after an error, abort instead of a destroy that might wait
    // for peers that will never come.
    if (comm_ != nullptr) (void)(finished_ ? ncclCommDestroy(comm_) : ncclCommAbort(comm_));
    buffers_.reset();
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  int run() {
    watchdog_ = std::make_unique<Watchdog>(o_.timeoutSeconds, s_.rank);  // also covers the destructor's destroy
    resolveMemory();
    if (check::hasRoot(o_.coll) && o_.root >= s_.nRanks)
      throw PerfError("root " + std::to_string(o_.root) + " is out of range for " + std::to_string(s_.nRanks) +
                          " ranks",
                      kExitUsage);
    PERF_NCCL(ncclCommInitRank(&comm_, s_.nRanks, s_.id, s_.rank));
    allocate();
    report_.startTime = nowString();
    gatherRankInfo();
    printHeader();
    for (ncclDataType_t type : o_.types) {
      if (check::isReduction(o_.coll)) {
        for (ReduceOp op : o_.ops) runSeriesOrSkip(type, op);
      } else {
        runSeriesOrSkip(type, ReduceOp::None);
      }
    }
    finishReport();
    finished_ = true;
    if (seriesNotRun_ > 0) return kExitFailure;
    return report_.failedResults > 0 ? kExitWrongResults : 0;
  }

 private:
  bool printing() const { return s_.rank == 0; }

  void print(const std::string& line) const {
    if (printing()) std::printf("%s\n", line.c_str());
  }

  // ---- setup ----------------------------------------------------------------------------------

  void resolveMemory() {
    memory_ = o_.memory;
    int devices = 0;
    if (memory_ != MemoryKind::Host && cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    if (memory_ == MemoryKind::Auto) memory_ = devices > 0 ? MemoryKind::Device : MemoryKind::Host;
    if (memory_ == MemoryKind::Device && devices == 0)
      throw PerfError("--memory device, but no GPU is visible", kExitUsage);
    if (o_.graphLaunches > 0 && memory_ != MemoryKind::Device)
      throw PerfError("-G (CUDA graphs) needs device memory", kExitUsage);
    if (o_.graphLaunches > 0 && o_.streamNull)
      throw PerfError("-G cannot capture the default stream; drop -y 1", kExitUsage);
    info_.rank = s_.rank;
    info_.pid = static_cast<int>(getpid());
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
    info_.host = host;
    if (memory_ == MemoryKind::Host) {
      info_.device = -1;
      info_.busId = "host";
      info_.deviceName = "host memory";
      return;
    }
    device_ = s_.localRank % devices;
    PERF_CUDA(cudaSetDevice(device_));
    if (!o_.streamNull) PERF_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    cudaDeviceProp prop{};
    PERF_CUDA(cudaGetDeviceProperties(&prop, device_));
    char bus[32];
    std::snprintf(bus, sizeof bus, "%04x:%02x:%02x", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
    info_.device = device_;
    info_.busId = bus;
    info_.deviceName = prop.name;
  }

  void allocate() {
    size_t sendBytes = 0, recvBytes = 0;
    for (ncclDataType_t type : o_.types) {
      CallShape shape = callShape(o_.coll, type, o_.maxBytes, s_.nRanks);
      sendBytes = std::max(sendBytes, shape.sendElems * check::typeSize(type));
      recvBytes = std::max(recvBytes, shape.recvElems * check::typeSize(type));
    }
    size_t scratchBytes = kRankRecordBytes * (s_.nRanks + 1) + 64;
    buffers_ = std::make_unique<RankBuffers>(memory_, sendBytes, recvBytes, scratchBytes, stream_);
    if (o_.checkIters > 0) {
      inputStage_.resize(std::max<size_t>(sendBytes, 1));
      outputStage_.resize(std::max<size_t>(std::max(sendBytes, recvBytes), 1));
    }
  }

  // Every rank's "Using devices" line, through the library's own all-gather. If that fails,
  // rank 0 shows only its own line: the benchmark itself will say more.
  void gatherRankInfo() {
    std::string mine = std::to_string(info_.rank) + "|" + std::to_string(info_.pid) + "|" + info_.host + "|" +
                       std::to_string(info_.device) + "|" + info_.busId + "|" + info_.deviceName;
    std::vector<char> record(kRankRecordBytes, '\0');
    std::memcpy(record.data(), mine.data(), std::min(mine.size(), kRankRecordBytes - 1));
    char* sendRecord = buffers_->scratch();
    char* all = sendRecord + kRankRecordBytes;
    buffers_->upload(sendRecord, record.data(), kRankRecordBytes);
    std::vector<char> gathered(kRankRecordBytes * s_.nRanks, '\0');
    bool ok = ncclAllGather(sendRecord, all, kRankRecordBytes, ncclUint8, comm_, stream_) == ncclSuccess;
    ok = ok && (memory_ == MemoryKind::Host || cudaStreamSynchronize(stream_) == cudaSuccess);
    if (ok) buffers_->download(gathered.data(), all, gathered.size());
    for (int r = 0; r < s_.nRanks; ++r) {
      const char* text = gathered.data() + r * kRankRecordBytes;
      RankInfo info;
      if (!ok || r == s_.rank || !parseRecord(std::string(text, strnlen(text, kRankRecordBytes)), &info)) {
        if (r == s_.rank) report_.ranks.push_back(info_);
        continue;
      }
      report_.ranks.push_back(info);
    }
  }

  static bool parseRecord(const std::string& text, RankInfo* info) {
    std::vector<std::string> fields;
    size_t begin = 0;
    for (int i = 0; i < 5; ++i) {
      size_t bar = text.find('|', begin);
      if (bar == std::string::npos) return false;
      fields.push_back(text.substr(begin, bar - begin));
      begin = bar + 1;
    }
    fields.push_back(text.substr(begin));
    try {
      info->rank = std::stoi(fields[0]);
      info->pid = std::stoi(fields[1]);
      info->device = std::stoi(fields[3]);
    } catch (const std::exception&) {
      return false;
    }
    info->host = fields[2];
    info->busId = fields[4];
    info->deviceName = fields[5];
    return true;
  }

  void printHeader() {
    int version = 0;
    if (ncclGetVersion(&version) != ncclSuccess) version = 0;
    report_.ncclVersion = version;
    report_.nRanks = s_.nRanks;
    report_.ranksAs = s_.threads ? "threads" : "processes";
    report_.library = libraryLabel(ncclLibraryFile(), version);
    report_.memory = memoryKindName(memory_);
    report_.options = o_;
    report_.args = s_.commandLine;
    print("# braid-perf: " + std::string(check::collectiveName(o_.coll)) + ", " + std::to_string(s_.nRanks) +
          " ranks, " + report_.memory + " memory, library " + report_.library + " (" +
          (ncclLibraryFile().empty() ? "file unknown" : ncclLibraryFile()) + "), NCCL API version " + std::to_string(version));
    print(ranksLine(report_.ranks, s_.threads));
    if (!s_.threads && printing()) {
      auto env = [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
      if (auto warning = sharedGpuWithoutMpsWarning(report_.ranks, info_.host, mpsControlPipePresent(env)))
        print(*warning);
    }
    if (!o_.jsonPath.empty()) print("# Writing JSON output to " + o_.jsonPath);
    if (!o_.plotPath.empty()) print("# Writing the plot to " + o_.plotPath);
    print(parametersLine(o_, s_.threads ? s_.nRanks : 1));
    if (o_.blocking) print("# Blocking Enabled: wait for completion after each collective");
    print("#");
    print("# Using devices");
    for (const auto& info : report_.ranks) print(rankLine(info));
    print("#");
    for (const auto& line : tableHeader(o_.reportCpuTime)) print(line);
    if (printing()) std::fflush(stdout);
  }

  // ---- running collectives ---------------------------------------------------------------------

  struct Placement {
    const void* send;
    void* recv;
  };

  Placement placement(const CallShape& shape, ncclDataType_t type, bool inPlace) const {
    if (!inPlace) return {buffers_->send(), buffers_->recv()};
    // One buffer, the larger one, holds input and output at NCCL's in-place offsets.
    char* base = shape.sendElems > shape.recvElems ? buffers_->send() : buffers_->recv();
    size_t typeBytes = check::typeSize(type);
    return {base + check::inPlaceInputOffset(o_.coll, shape.count, s_.rank) * typeBytes,
            base + check::inPlaceOutputOffset(o_.coll, shape.count, s_.rank) * typeBytes};
  }

  CallArgs callArgs(const CallShape& shape, ncclDataType_t type, ncclRedOp_t op, const Placement& where) const {
    CallArgs args;
    args.send = where.send;
    args.recv = where.recv;
    args.count = shape.count;
    args.type = type;
    args.op = op;
    args.root = o_.root;
    args.rank = s_.rank;
    args.nRanks = s_.nRanks;
    args.comm = comm_;
    args.stream = stream_;
    return args;
  }

  void launchGroup(const CallArgs& args, int aggregate) const {
    if (aggregate > 1) PERF_NCCL(ncclGroupStart());
    for (int i = 0; i < aggregate; ++i) PERF_NCCL(launchCollective(o_.coll, args));
    if (aggregate > 1) PERF_NCCL(ncclGroupEnd());
  }

  void synchronize() const {
    if (memory_ != MemoryKind::Device) return;
    if (!o_.poll) {
      PERF_CUDA(cudaStreamSynchronize(stream_));
      return;
    }
    for (;;) {  // nccl-tests' testStreamSynchronize
      const cudaError_t e = cudaStreamQuery(stream_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) PERF_CUDA(e);
      ncclResult_t async = ncclSuccess;
      PERF_NCCL(ncclCommGetAsyncError(comm_, &async));
      PERF_NCCL(async);
    }
  }

  // A tiny all-reduce, so that every rank starts timing together.
  void barrier() const {
    void* scratch = buffers_->scratch();
    PERF_NCCL(ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm_, stream_));
    synchronize();
  }

  // Seconds per collective on this rank (time until completion, or until the calls returned
  // with -C 1).
  double timeIterations(const CallArgs& args) const {
    barrier();
    const int perIteration = o_.aggIters;
    if (o_.graphLaunches > 0) {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      PERF_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < o_.iters; ++i) launchGroup(args, perIteration);
      PERF_CUDA(cudaStreamEndCapture(stream_, &graph));
      PERF_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      auto start = Clock::now();
      for (int g = 0; g < o_.graphLaunches; ++g) PERF_CUDA(cudaGraphLaunch(exec, stream_));
      auto returned = Clock::now();
      synchronize();
      auto done = Clock::now();
      (void)cudaGraphExecDestroy(exec);
      (void)cudaGraphDestroy(graph);
      double calls = static_cast<double>(o_.iters) * perIteration * o_.graphLaunches;
      return secondsBetween(start, o_.reportCpuTime ? returned : done) / calls;
    }
    auto start = Clock::now();
    for (int i = 0; i < o_.iters; ++i) {
      launchGroup(args, perIteration);
      if (o_.blocking) synchronize();
    }
    auto returned = Clock::now();
    synchronize();
    auto done = Clock::now();
    return secondsBetween(start, o_.reportCpuTime ? returned : done) / (static_cast<double>(o_.iters) * perIteration);
  }

  // How values from all ranks combine: nccl-tests' -a codes, plus a plain sum.
  enum Combine { kRankZero = 0, kMean = 1, kMin = 2, kMax = 3, kSum = 4 };

  double combineAcrossRanks(double value, int how) const {
    void* scratch = buffers_->scratch();
    buffers_->upload(scratch, &value, sizeof value);
    if (how == kRankZero)
      PERF_NCCL(ncclBroadcast(scratch, scratch, 1, ncclFloat64, 0, comm_, stream_));
    else
      PERF_NCCL(ncclAllReduce(scratch, scratch, 1, ncclFloat64, how == kMin ? ncclMin : how == kMax ? ncclMax : ncclSum,
                              comm_, stream_));
    synchronize();
    double combined = 0;
    buffers_->download(&combined, scratch, sizeof combined);
    return how == kMean ? combined / s_.nRanks : combined;
  }

  // Writes this rank's inputs into the send side of `where` (and poisons the output side).
  void prepareInputs(const check::CheckSpec& spec, const CallShape& shape, const Placement& where, bool inPlace) {
    size_t typeBytes = check::typeSize(spec.type);
    size_t outBytes = shape.recvElems * typeBytes, inBytes = shape.sendElems * typeBytes;
    if (inPlace) {
      char* base = shape.sendElems > shape.recvElems ? buffers_->send() : buffers_->recv();
      buffers_->fillBytes(base, 0xA5, std::max(inBytes, outBytes));
    } else {
      buffers_->fillBytes(where.recv, 0xA5, outBytes);
    }
    check::fillInput(spec, s_.rank, inputStage_.data());
    buffers_->upload(const_cast<void*>(where.send), inputStage_.data(), inBytes);
  }

  int64_t checkOnce(const check::CheckSpec& spec, const CallShape& shape, const CallArgs& args, bool inPlace) {
    Placement where{args.send, args.recv};
    prepareInputs(spec, shape, where, inPlace);
    barrier();
    launchGroup(args, 1);
    synchronize();
    buffers_->download(outputStage_.data(), args.recv, shape.recvElems * check::typeSize(spec.type));
    check::CheckResult result = check::check(spec, s_.rank, outputStage_.data());
    if (result.wrong > 0 && mismatchReports_++ < kMismatchReportsPerRank)
      std::fprintf(stderr, "braid-perf rank %d: %zu wrong elements (%s); first: %s\n", s_.rank, result.wrong,
                   inPlace ? "in-place" : "out-of-place", result.firstMismatch.c_str());
    return static_cast<int64_t>(result.wrong);
  }

  Measurement measure(const CallShape& shape, ncclDataType_t type, ReduceOp op, const ReduceOpHandle& handle,
                      bool inPlace) {
    CallArgs args = callArgs(shape, type, handle.get(), placement(shape, type, inPlace));
    Measurement m;
    double seconds = combineAcrossRanks(timeIterations(args), o_.average);
    m.timeUs = seconds * 1e6;
    m.algBw = seconds > 0 ? static_cast<double>(shape.bytes) / 1e9 / seconds : 0;
    m.busBw = m.algBw * busBandwidthFactor(o_.coll, s_.nRanks);
    int64_t wrong = 0;
    for (int c = 0; c < o_.checkIters && wrong == 0; ++c) {
      check::CheckSpec spec;
      spec.coll = o_.coll;
      spec.type = type;
      spec.op = op;
      spec.preMulScalar = ReduceOpHandle::kPreMulScalar;
      spec.nRanks = s_.nRanks;
      spec.root = o_.root;
      spec.count = shape.count;
      spec.seed = ++checkSeed_;
      wrong = checkOnce(spec, shape, args, inPlace);
    }
    if (o_.checkIters > 0) m.wrong = static_cast<int64_t>(combineAcrossRanks(static_cast<double>(wrong), kSum));
    return m;
  }

  // Valid inputs of this type and op in both buffers, so that the timed runs (which never
  // refill) work on ordinary numbers rather than whatever the memory held.
  void seedBuffers(ncclDataType_t type, ReduceOp op) {
    CallShape shape = callShape(o_.coll, type, o_.maxBytes, s_.nRanks);
    size_t elems = std::max(shape.sendElems, shape.recvElems);
    std::vector<unsigned char> values(std::max<size_t>(elems * check::typeSize(type), 1));
    check::fillInput(type, check::inputOp(o_.coll, op), s_.rank, 0, elems, values.data());
    buffers_->upload(buffers_->send(), values.data(), shape.sendElems * check::typeSize(type));
    buffers_->upload(buffers_->recv(), values.data(), shape.recvElems * check::typeSize(type));
  }

  void warmUp(ncclDataType_t type, const ReduceOpHandle& handle) const {
    for (size_t bytes : {o_.maxBytes, o_.minBytes}) {
      CallShape shape = callShape(o_.coll, type, bytes, s_.nRanks);
      CallArgs args = callArgs(shape, type, handle.get(), placement(shape, type, false));
      for (int i = 0; i < o_.warmupIters; ++i) launchGroup(args, 1);
      synchronize();
    }
  }

  void runSeries(ncclDataType_t type, ReduceOp op) {
    ReduceOpHandle handle(op, type, comm_);
    seedBuffers(type, op);
    warmUp(type, handle);
    for (size_t bytes : sizeSteps(o_)) {
      CallShape shape = callShape(o_.coll, type, bytes, s_.nRanks);
      ResultRow row;
      row.bytes = shape.bytes;
      row.count = shape.count;
      row.type = check::typeName(type);
      row.op = check::opName(op);
      row.root = check::hasRoot(o_.coll) ? o_.root : -1;
      row.checked = o_.checkIters > 0;
      row.outOfPlace = measure(shape, type, op, handle, false);
      row.inPlace = measure(shape, type, op, handle, true);
      for (const Measurement* m : {&row.outOfPlace, &row.inPlace}) {
        busBwSum_ += m->busBw;
        ++busBwCount_;
        if (m->wrong > 0) ++report_.failedResults;
      }
      print(rowPrefix(row.bytes, row.count, row.type, row.op, row.root) + rowResult(row.outOfPlace, row.checked) +
            rowResult(row.inPlace, row.checked));
      if (printing()) std::fflush(stdout);
      report_.rows.push_back(std::move(row));
    }
  }

  // A type/op pair the library refuses (ncclInvalidArgument or ncclInvalidUsage, the same on
  // every rank) is reported and skipped, so that `-d all -o all` shows everything else; the
  // run still fails at the end. Any other error ends the run.
  void runSeriesOrSkip(ncclDataType_t type, ReduceOp op) {
    try {
      runSeries(type, op);
    } catch (const PerfError& e) {
      if (e.ncclCode != ncclInvalidArgument && e.ncclCode != ncclInvalidUsage) throw;
      ++seriesNotRun_;
      std::string what = std::string(check::typeName(type)) + " " + check::opName(op);
      print("# " + what + ": not run: " + e.what());
      if (!printing()) std::fprintf(stderr, "braid-perf rank %d: %s: %s\n", s_.rank, what.c_str(), e.what());
    }
  }

  void finishReport() {
    report_.avgBusBw = busBwCount_ ? busBwSum_ / busBwCount_ : 0;
    report_.endTime = nowString();
    for (const auto& line : footer(report_.failedResults, report_.avgBusBw, seriesNotRun_)) print(line);
    if (printing()) std::fflush(stdout);
    if (printing() && !o_.jsonPath.empty()) {
      std::string error;
      if (!writeReportJson(o_.jsonPath, report_, &error)) throw PerfError(error, kExitFailure);
    }
    if (printing() && !o_.plotPath.empty()) writePlot();
  }

  // --plot: a failure is exit status 3 like a failed --json, after the table has been printed.
  void writePlot() const {
    ReportSeries mine;
    mine.library = report_.library;
    mine.collective = check::collectiveName(o_.coll);
    mine.nRanks = s_.nRanks;
    mine.rows = report_.rows;
    ReportSeries other;
    std::string error;
    if (!o_.plotComparePath.empty() && !loadReportSeries(o_.plotComparePath, &other, &error))
      throw PerfError("--plot-compare: " + error, kExitFailure);
    if (!plot::writePng(perfPlotPanels(mine, o_.plotComparePath.empty() ? nullptr : &other), o_.plotPath, &error))
      throw PerfError("--plot: " + error, kExitFailure);
  }

  const PerfOptions& o_;
  const RankSetup& s_;
  std::unique_ptr<Watchdog> watchdog_;  // stopped last, after the communicator is gone
  MemoryKind memory_ = MemoryKind::Host;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool finished_ = false;
  std::unique_ptr<RankBuffers> buffers_;
  std::vector<unsigned char> inputStage_, outputStage_;
  RankInfo info_;
  PerfReport report_;
  double busBwSum_ = 0;
  int busBwCount_ = 0;
  uint64_t checkSeed_ = 0;
  int mismatchReports_ = 0;
  int seriesNotRun_ = 0;
};

}  // namespace

int runRank(const PerfOptions& options, const RankSetup& setup) {
  try {
    BenchmarkRank rank(options, setup);
    return rank.run();
  } catch (const PerfError& e) {
    std::fprintf(stderr, "braid-perf rank %d: %s\n", setup.rank, e.what());
    return e.exitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid-perf rank %d: %s\n", setup.rank, e.what());
    return kExitFailure;
  }
}

}  // namespace braid::perf
