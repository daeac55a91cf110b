// braid against the real NCCL in one process (issue 4: comparison and the 1-rank measurements;
// issue 6: the comparison with one rank per GPU). Both libraries are dlopen'ed by absolute path with RTLD_LOCAL and every
// entry point is looked up in its own handle, so neither can bind to the other (both answer to
// the soname libnccl.so.2). This program links no NCCL.
//
//   gpu_nccl_compare --braid /abs/libbraid.so --nccl /abs/libnccl.so.2 [--quick] [--no-bench]
//                    [--ranks N]
//
// --ranks N (N GPUs at least; default 1) makes N ranks, rank r on GPU r, with ncclCommInitAll
// and runs every call of a collective in one group; with N > 1 only step 4 runs (the side by
// side timings on several GPUs are braid-perf's, perf/multigpu.sh).
// 1. GPU memory added by one communicator up to the end of its first all-reduce.
// 2. All-reduce (fp32 sum, out of place) 8 B .. 1 GB, time from CUDA events, median of 40
//    samples alone and 15 of 20 back to back; braid and NCCL take turns.
// 3. Host CPU time per ncclAllReduce call: 10,000 8-byte calls, no graph.
// 4. Every collective, type and op, in and out of place, counts 0 1 7 4097 (all types) and
//    1000003 (fp32, int64, fp16, bf16): braid's output against NCCL's, bit for bit (NaN equals
//    NaN), and both against braid_check's float64 reference. With one or two ranks every
//    output element is a copy or a reduction of at most two values, whose result does not
//    depend on the order, so any difference fails; with more ranks the order of a float
//    reduction may differ, and braid fails only where it misses the reference.
// Every wait is bounded (15 s): a hang ends the program with "HANG <what>", exit status 3.
// Lines starting with SUMMARY are for tests/gpu/run.sh. Exit status: 0 when braid matched NCCL
// everywhere NCCL ran, 1 on a difference or a braid failure, 77 without a GPU.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu_present.h"
#include "nccl.h"
#include "tests/common/reference.h"

namespace {

using namespace braid;

#define CUDA_OK(call)                                                                                    \
  do {                                                                                                   \
    cudaError_t e_ = (call);                                                                             \
    if (e_ != cudaSuccess) {                                                                             \
      std::printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));             \
      std::exit(1);                                                                                      \
    }                                                                                                    \
  } while (0)

// Waits for the stream, at most `seconds`: a collective that never finishes ends the program
// with a message instead of hanging the run.
void waitStream(cudaStream_t stream, const char* what, double seconds = 15) {
  auto t0 = std::chrono::steady_clock::now();
  cudaError_t q;
  while ((q = cudaStreamQuery(stream)) == cudaErrorNotReady) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) {
      std::printf("HANG %s: not finished after %.0f s\n", what, seconds);
      std::fflush(stdout);
      std::_Exit(3);
    }
    std::this_thread::yield();
  }
  if (q != cudaSuccess) {
    std::printf("FAIL %s: %s\n", what, cudaGetErrorString(q));
    std::fflush(stdout);
    std::_Exit(1);
  }
}

struct Lib {
  std::string name, path;
  void* handle = nullptr;
  std::vector<ncclComm_t> comms;  // rank r's communicator (on GPU r)
  ncclResult_t (*getVersion)(int*);
  const char* (*getErrorString)(ncclResult_t);
  const char* (*getLastError)(ncclComm_t);
  ncclResult_t (*getUniqueId)(ncclUniqueId*);
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int);
  ncclResult_t (*commInitAll)(ncclComm_t*, int, const int*);
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*allGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*alltoAll)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*gather)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*scatter)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*redOpCreatePreMulSum)(ncclRedOp_t*, void*, ncclDataType_t, ncclScalarResidence_t, ncclComm_t);
  ncclResult_t (*redOpDestroy)(ncclRedOp_t, ncclComm_t);

  template <typename F>
  void bind(F* out, const char* sym) {
    *out = reinterpret_cast<F>(dlsym(handle, sym));
    if (!*out) {
      std::printf("FAIL %s (%s) lacks %s\n", name.c_str(), path.c_str(), sym);
      std::exit(1);
    }
  }
  void open() {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      std::printf("FAIL dlopen %s: %s\n", path.c_str(), dlerror());
      std::exit(1);
    }
    bind(&getVersion, "ncclGetVersion");
    bind(&getErrorString, "ncclGetErrorString");
    bind(&getLastError, "ncclGetLastError");
    bind(&getUniqueId, "ncclGetUniqueId");
    bind(&commInitRank, "ncclCommInitRank");
    bind(&commInitAll, "ncclCommInitAll");
    bind(&commDestroy, "ncclCommDestroy");
    bind(&groupStart, "ncclGroupStart");
    bind(&groupEnd, "ncclGroupEnd");
    bind(&allReduce, "ncclAllReduce");
    bind(&allGather, "ncclAllGather");
    bind(&reduceScatter, "ncclReduceScatter");
    bind(&broadcast, "ncclBroadcast");
    bind(&reduce, "ncclReduce");
    bind(&alltoAll, "ncclAlltoAll");
    bind(&gather, "ncclGather");
    bind(&scatter, "ncclScatter");
    bind(&send, "ncclSend");
    bind(&recv, "ncclRecv");
    bind(&redOpCreatePreMulSum, "ncclRedOpCreatePreMulSum");
    bind(&redOpDestroy, "ncclRedOpDestroy");
    Dl_info info{};
    dladdr(reinterpret_cast<void*>(allReduce), &info);
    int version = 0;
    getVersion(&version);
    std::printf("%-5s %s: ncclGetVersion %d, ncclAllReduce from %s\n", name.c_str(), path.c_str(), version,
                info.dli_fname ? info.dli_fname : "?");
  }
  const char* lastError(int rank = 0) { return getLastError(comms.empty() ? nullptr : comms[rank]); }
};

struct Buffers {
  char* send = nullptr;
  char* recv = nullptr;
  size_t bytes = 0;
};

// What rank r works with: its GPU, stream and buffers (one set per rank, shared by both libraries).
struct RankSide {
  int device = 0;
  cudaStream_t stream = nullptr;
  Buffers buf;
};

ncclRedOp_t builtinOp(check::ReduceOp op) {
  switch (op) {
    case check::ReduceOp::Prod: return ncclProd;
    case check::ReduceOp::Max: return ncclMax;
    case check::ReduceOp::Min: return ncclMin;
    case check::ReduceOp::Avg: return ncclAvg;
    default: return ncclSum;
  }
}

// Runs one collective on every rank (one group when there are several); (*out)[r] gets rank
// r's recv region (bufferCounts().recv elements).
ncclResult_t runOne(Lib& lib, const check::CheckSpec& spec, bool inPlace, const std::vector<std::vector<char>>& inputs,
                    std::vector<RankSide>& ranks, std::vector<std::vector<char>>* out, const char* what) {
  const int n = static_cast<int>(ranks.size());
  auto bc = check::bufferCounts(spec.coll, spec.count, n);
  size_t es = check::typeSize(spec.type);
  std::vector<char*> in(n), dst(n);
  for (int r = 0; r < n; ++r) {
    RankSide& rs = ranks[r];
    CUDA_OK(cudaSetDevice(rs.device));
    CUDA_OK(cudaMemsetAsync(rs.buf.send, 0x33, rs.buf.bytes, rs.stream));
    CUDA_OK(cudaMemsetAsync(rs.buf.recv, 0x5a, rs.buf.bytes, rs.stream));
    in[r] = rs.buf.send;
    dst[r] = rs.buf.recv;
    if (inPlace) {
      in[r] = rs.buf.recv + check::inPlaceInputOffset(spec.coll, spec.count, r) * es;
      dst[r] = rs.buf.recv + check::inPlaceOutputOffset(spec.coll, spec.count, r) * es;
    }
    const std::vector<char>& input = inputs[r];
    if (!input.empty())
      CUDA_OK(cudaMemcpyAsync(in[r], input.data(), input.size(), cudaMemcpyHostToDevice, rs.stream));
    // The upload reads pageable memory: finish it before another rank's call can read in[r].
    CUDA_OK(cudaStreamSynchronize(rs.stream));
  }
  std::vector<ncclRedOp_t> ops(n, builtinOp(spec.op));
  if (spec.op == check::ReduceOp::PreMulSum) {
    unsigned char scalar[8] = {};
    check::storeValue(spec.type, spec.preMulScalar, scalar);
    for (int r = 0; r < n; ++r) {
      ncclResult_t rc = lib.redOpCreatePreMulSum(&ops[r], scalar, spec.type, ncclScalarHostImmediate, lib.comms[r]);
      if (rc != ncclSuccess) {
        for (int q = 0; q < r; ++q) lib.redOpDestroy(ops[q], lib.comms[q]);
        return rc;
      }
    }
  }
  size_t count = spec.count;
  ncclResult_t rc = lib.groupStart();
  for (int r = 0; r < n && rc == ncclSuccess; ++r) {
    ncclComm_t c = lib.comms[r];
    cudaStream_t st = ranks[r].stream;
    switch (spec.coll) {
      case check::Collective::AllReduce: rc = lib.allReduce(in[r], dst[r], count, spec.type, ops[r], c, st); break;
      case check::Collective::AllGather: rc = lib.allGather(in[r], dst[r], count, spec.type, c, st); break;
      case check::Collective::ReduceScatter: rc = lib.reduceScatter(in[r], dst[r], count, spec.type, ops[r], c, st); break;
      case check::Collective::Broadcast: rc = lib.broadcast(in[r], dst[r], count, spec.type, spec.root, c, st); break;
      case check::Collective::Reduce: rc = lib.reduce(in[r], dst[r], count, spec.type, ops[r], spec.root, c, st); break;
      case check::Collective::AlltoAll: rc = lib.alltoAll(in[r], dst[r], count, spec.type, c, st); break;
      case check::Collective::Gather: rc = lib.gather(in[r], dst[r], count, spec.type, spec.root, c, st); break;
      case check::Collective::Scatter: rc = lib.scatter(in[r], dst[r], count, spec.type, spec.root, c, st); break;
      case check::Collective::SendRecv:  // the reference's ring: send to r+1, receive from r-1
        rc = lib.send(in[r], count, spec.type, (r + 1) % n, c, st);
        if (rc == ncclSuccess) rc = lib.recv(dst[r], count, spec.type, (r + n - 1) % n, c, st);
        break;
    }
  }
  ncclResult_t ended = lib.groupEnd();
  if (rc == ncclSuccess) rc = ended;
  if (spec.op == check::ReduceOp::PreMulSum)
    for (int r = 0; r < n; ++r) lib.redOpDestroy(ops[r], lib.comms[r]);
  std::string label = lib.name + ": " + what;
  for (int r = 0; r < n; ++r) {
    CUDA_OK(cudaSetDevice(ranks[r].device));
    waitStream(ranks[r].stream, label.c_str());
  }
  if (rc != ncclSuccess) return rc;
  out->assign(n, {});
  for (int r = 0; r < n; ++r) {
    (*out)[r].assign(bc.recv * es, 0);
    if (!(*out)[r].empty()) CUDA_OK(cudaMemcpy((*out)[r].data(), dst[r], (*out)[r].size(), cudaMemcpyDeviceToHost));
  }
  return ncclSuccess;
}

bool isFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 || t == ncclFloat8e4m3 ||
         t == ncclFloat8e5m2;
}

bool isNan(ncclDataType_t t, const unsigned char* p) {
  switch (t) {
    case ncclFloat32: { float v; std::memcpy(&v, p, 4); return std::isnan(v); }
    case ncclFloat64: { double v; std::memcpy(&v, p, 8); return std::isnan(v); }
    case ncclFloat16: { uint16_t v; std::memcpy(&v, p, 2); return (v & 0x7c00) == 0x7c00 && (v & 0x3ff); }
    case ncclBfloat16: { uint16_t v; std::memcpy(&v, p, 2); return (v & 0x7f80) == 0x7f80 && (v & 0x7f); }
    case ncclFloat8e4m3: return (p[0] & 0x7f) == 0x7f;
    case ncclFloat8e5m2: return (p[0] & 0x7c) == 0x7c && (p[0] & 3);
    default: return false;
  }
}

// Elements that differ bit for bit (NaN equal to NaN); *first describes the first.
size_t differing(ncclDataType_t t, const std::vector<char>& a, const std::vector<char>& b, std::string* first) {
  size_t es = check::typeSize(t), n = std::min(a.size(), b.size()) / es, bad = 0;
  if (a.size() != b.size()) ++bad;
  for (size_t i = 0; i < n; ++i) {
    auto pa = reinterpret_cast<const unsigned char*>(a.data()) + i * es;
    auto pb = reinterpret_cast<const unsigned char*>(b.data()) + i * es;
    if (std::memcmp(pa, pb, es) == 0) continue;
    if (isFloat(t) && isNan(t, pa) && isNan(t, pb)) continue;
    if (bad++ == 0) {
      char text[160];
      unsigned long long va = 0, vb = 0;
      std::memcpy(&va, pa, es);
      std::memcpy(&vb, pb, es);
      std::snprintf(text, sizeof text, "element %zu: braid 0x%llx nccl 0x%llx", i, va, vb);
      *first = text;
    }
  }
  return bad;
}

struct CompareTotals {
  size_t runs = 0, differ = 0, braidErrors = 0, ncclRefused = 0, braidRefWrong = 0, ncclRefWrong = 0;
  size_t differNcclRight = 0;  // braid differs from an NCCL output that matches the reference
};

void compareAll(Lib& braidLib, Lib& ncclLib, std::vector<RankSide>& ranks, bool quick, CompareTotals* t) {
  struct Set {
    size_t count;
    bool allTypes;
  };
  const int n = static_cast<int>(ranks.size());
  std::vector<Set> sets = {{0, true}, {1, true}, {7, true}, {4097, true}};
  if (!quick) sets.push_back({1000003, false});
  uint64_t seed = 100;
  for (const Set& set : sets) {
    std::vector<ncclDataType_t> types(std::begin(check::kAllTypes), std::end(check::kAllTypes));
    if (!set.allTypes) types = {ncclFloat32, ncclInt64, ncclFloat16, ncclBfloat16};
    for (check::Collective coll : check::kAllCollectives) {
      std::vector<check::ReduceOp> ops = {check::ReduceOp::None};
      if (check::isReduction(coll)) ops.assign(std::begin(check::kAllReduceOps), std::end(check::kAllReduceOps));
      for (ncclDataType_t type : types)
        for (check::ReduceOp op : ops)
          for (int inPlace = 0; inPlace < 2; ++inPlace) {
            check::CheckSpec spec;
            spec.coll = coll;
            spec.type = type;
            spec.op = op;
            spec.preMulScalar = 2.0;
            spec.nRanks = n;
            spec.root = check::hasRoot(coll) ? n - 1 : 0;  // not rank 0, where a mix-up hides
            spec.count = set.count;
            spec.seed = ++seed;
            auto bc = check::bufferCounts(coll, set.count, n);
            std::vector<std::vector<char>> inputs(n, std::vector<char>(bc.send * check::typeSize(type)));
            for (int r = 0; r < n; ++r) check::fillInput(spec, r, inputs[r].data());
            std::vector<std::vector<char>> outB, outN;
            char what[160];
            std::snprintf(what, sizeof what, "%d ranks %s %s %s count %zu %s", n, check::collectiveName(coll),
                          check::typeName(type), check::opName(op), set.count, inPlace ? "in-place" : "out-of-place");
            ++t->runs;
            ncclResult_t rn = runOne(ncclLib, spec, inPlace, inputs, ranks, &outN, what);
            ncclResult_t rb = runOne(braidLib, spec, inPlace, inputs, ranks, &outB, what);
            if (rb != ncclSuccess) {
              ++t->braidErrors;
              std::printf("BRAID-ERROR %s: %d %s (nccl: %d)\n", what, rb, braidLib.lastError(), rn);
              continue;
            }
            for (int r = 0; r < n; ++r) {
              check::CheckResult cr = check::check(spec, r, outB[r].data());
              if (!outB[r].empty() && cr.wrong) {
                ++t->braidRefWrong;
                std::printf("BRAID-REF-WRONG %s rank %d: %s\n", what, r, cr.firstMismatch.c_str());
              }
            }
            if (rn != ncclSuccess) {
              if (t->ncclRefused++ < 5) std::printf("nccl refused %s: %d %s\n", what, rn, ncclLib.lastError());
              continue;
            }
            for (int r = 0; r < n; ++r) {
              if (!check::hasOutput(coll, r, spec.root)) continue;
              bool ncclWrong = !outN[r].empty() && check::check(spec, r, outN[r].data()).wrong;
              if (ncclWrong) ++t->ncclRefWrong;
              std::string first;
              if (size_t d = differing(type, outB[r], outN[r], &first)) {
                if (!ncclWrong) ++t->differNcclRight;
                if (t->differ++ < 40)
                  std::printf("DIFFER %s rank %d: %zu elements; first %s%s\n", what, r, d, first.c_str(),
                              ncclWrong ? " (NCCL misses the float64 reference here)" : "");
              }
            }
          }
    }
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median GPU time (us) of one fp32 sum all-reduce of `bytes` for each library, alone on an
// idle stream (the host's enqueue time counts), or with `backToBack` calls between the events
// (nccl-tests' way; per call). The libraries take turns sample by sample, first one then the
// other, so that drift in the machine's clocks and launch jitter hit both alike.
std::array<double, 2> timeAllReduce(std::array<Lib*, 2> libs, Buffers& b, size_t bytes, cudaStream_t stream, int iters,
                                    bool* failed, int backToBack = 1) {
  size_t count = bytes / 4;
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  std::array<std::vector<double>, 2> us;
  for (int i = -3; i < iters && !*failed; ++i)
    for (int turn = 0; turn < 2 && !*failed; ++turn) {
      const int l = (i + turn) & 1;
      Lib& lib = *libs[l];
      CUDA_OK(cudaEventRecord(e0, stream));
      ncclResult_t rc = ncclSuccess;
      for (int k = 0; k < backToBack && rc == ncclSuccess; ++k)
        rc = lib.allReduce(b.send, b.recv, count, ncclFloat32, ncclSum, lib.comms[0], stream);
      CUDA_OK(cudaEventRecord(e1, stream));
      std::string label = lib.name + ": all-reduce of " + std::to_string(bytes) + " B";
      waitStream(stream, label.c_str());
      if (rc != ncclSuccess) {
        std::printf("%s all-reduce of %zu B failed: %d %s\n", lib.name.c_str(), bytes, rc, lib.lastError());
        *failed = true;
        break;
      }
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      if (i >= 0) us[l].push_back(ms * 1000.0 / backToBack);
    }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return {median(us[0]), median(us[1])};
}

double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Host CPU and wall time per call (us) over `calls` 8-byte all-reduces, no synchronisation inside.
void cpuPerCall(Lib& lib, Buffers& b, cudaStream_t stream, int calls, double* cpuUs, double* wallUs) {
  for (int i = 0; i < 200; ++i) lib.allReduce(b.send, b.recv, 2, ncclFloat32, ncclSum, lib.comms[0], stream);
  waitStream(stream, (lib.name + ": 200 small all-reduces").c_str());
  double c0 = cpuSeconds();
  auto w0 = std::chrono::steady_clock::now();
  int bad = 0;
  for (int i = 0; i < calls; ++i) bad += lib.allReduce(b.send, b.recv, 2, ncclFloat32, ncclSum, lib.comms[0], stream) != ncclSuccess;
  double c1 = cpuSeconds();
  auto w1 = std::chrono::steady_clock::now();
  waitStream(stream, (lib.name + ": 10000 small all-reduces").c_str(), 30);
  if (bad) std::printf("%s: %d of %d calls failed\n", lib.name.c_str(), bad, calls);
  *cpuUs = (c1 - c0) * 1e6 / calls;
  *wallUs = std::chrono::duration<double>(w1 - w0).count() * 1e6 / calls;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Lib braidLib, ncclLib;
  braidLib.name = "braid";
  ncclLib.name = "nccl";
  bool quick = false, bench = true;
  int nRanks = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--braid" && i + 1 < argc) braidLib.path = argv[++i];
    else if (a == "--nccl" && i + 1 < argc) ncclLib.path = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--no-bench") bench = false;
    else if (a == "--ranks" && i + 1 < argc) nRanks = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s --braid /abs/libbraid.so --nccl /abs/libnccl.so.2 [--quick] [--no-bench] [--ranks N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (braidLib.path.empty() || ncclLib.path.empty() || braidLib.path[0] != '/' || ncclLib.path[0] != '/') {
    std::fprintf(stderr, "gpu_nccl_compare: --braid and --nccl want absolute paths\n");
    return 2;
  }
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  const int devices = braid::gputest::gpuCount();
  if (nRanks < 1 || nRanks > devices) {
    std::printf("SKIP --ranks %d needs %d GPUs, %d present\n", nRanks, nRanks, devices);
    return braid::gputest::kSkipExit;
  }
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(nullptr));
  braidLib.open();
  ncclLib.open();
  if (braidLib.handle == ncclLib.handle) {
    std::printf("FAIL both paths gave the same library handle\n");
    return 1;
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Buffers small;
  small.bytes = 256;
  CUDA_OK(cudaMalloc(&small.send, small.bytes));
  CUDA_OK(cudaMalloc(&small.recv, small.bytes));
  CUDA_OK(cudaMemset(small.send, 0, small.bytes));

  Lib* libs[2] = {&braidLib, &ncclLib};
  std::vector<RankSide> ranks(nRanks);
  for (int r = 0; r < nRanks; ++r) ranks[r].device = r;
  // Several ranks: one communicator per GPU from ncclCommInitAll, then only the comparison.
  if (nRanks > 1) {
    std::vector<int> devs(nRanks);
    for (int r = 0; r < nRanks; ++r) devs[r] = r;
    for (Lib* lib : libs) {
      lib->comms.assign(nRanks, nullptr);
      if (ncclResult_t rc = lib->commInitAll(lib->comms.data(), nRanks, devs.data()); rc != ncclSuccess) {
        std::printf("FAIL %s ncclCommInitAll(%d GPUs): %d %s %s\n", lib->name.c_str(), nRanks, rc, lib->getErrorString(rc),
                    lib->getLastError(nullptr));
        return 1;
      }
    }
    bench = false;
  }
  // 1. Communicator memory (one rank): init + first all-reduce, braid first, then NCCL.
  double memMiB[2] = {0, 0}, initMs[2] = {0, 0};
  for (int l = 0; l < 2 && nRanks == 1; ++l) {
    Lib& lib = *libs[l];
    lib.comms.assign(1, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    size_t free0 = 0, free1 = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free0, &total));
    auto t0 = std::chrono::steady_clock::now();
    ncclUniqueId id;
    ncclResult_t rc = lib.getUniqueId(&id);
    if (rc == ncclSuccess) rc = lib.commInitRank(&lib.comms[0], 1, id, 0);
    initMs[l] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rc != ncclSuccess) {
      std::printf("FAIL %s init: %d %s %s\n", lib.name.c_str(), rc, lib.getErrorString(rc), lib.getLastError(nullptr));
      return 1;
    }
    rc = lib.allReduce(small.send, small.recv, 2, ncclFloat32, ncclSum, lib.comms[0], stream);
    waitStream(stream, (lib.name + ": first all-reduce").c_str());
    CUDA_OK(cudaMemGetInfo(&free1, &total));
    if (rc != ncclSuccess) {
      std::printf("FAIL %s first all-reduce: %d %s\n", lib.name.c_str(), rc, lib.lastError());
      return 1;
    }
    memMiB[l] = (double(free0) - double(free1)) / (1 << 20);
    std::printf("%-5s init %.1f ms, GPU memory added by init + first all-reduce: %.1f MiB\n", lib.name.c_str(),
                initMs[l], memMiB[l]);
  }

  bool benchFailed = false;
  if (bench) {
    // 2. Latency / bandwidth, 8 B .. 1 GB (x4 steps, then 1 GB).
    std::vector<size_t> sizes;
    size_t maxBytes = quick ? (size_t(64) << 20) : (size_t(1) << 30);
    for (size_t s = 8; s <= maxBytes; s *= 4) sizes.push_back(s);
    if (sizes.back() != maxBytes) sizes.push_back(maxBytes);
    Buffers big;
    big.bytes = maxBytes + 4096;  // room for the copy checks' odd sizes past 64 MiB
    CUDA_OK(cudaMalloc(&big.send, big.bytes));
    CUDA_OK(cudaMalloc(&big.recv, big.bytes));
    CUDA_OK(cudaMemset(big.send, 0, big.bytes));
    std::printf("\n1-rank all-reduce, fp32 sum, out of place; GPU time (CUDA events), median of 40 after 3 warm-up,\n"
                "braid and NCCL taking turns sample by sample\n");
    std::printf("(b2b: 20 calls back to back between the events, per call; median of 15)\n");
    std::printf("%12s %11s %11s %10s %10s %8s %9s %9s %8s\n", "bytes", "braid_us", "nccl_us", "braid_GB/s", "nccl_GB/s",
                "b/n_time", "braid_b2b", "nccl_b2b", "b/n_b2b");
    double lat8[2] = {0, 0}, bw1g[2] = {0, 0};
    for (size_t s : sizes) {
      auto [ub, un] = timeAllReduce({&braidLib, &ncclLib}, big, s, stream, 40, &benchFailed);
      auto [bb, nb] = timeAllReduce({&braidLib, &ncclLib}, big, s, stream, 15, &benchFailed, 20);
      std::printf("%12zu %11.2f %11.2f %10.2f %10.2f %8.3f %9.2f %9.2f %8.3f\n", s, ub, un, ub > 0 ? s / ub / 1e3 : 0,
                  un > 0 ? s / un / 1e3 : 0, un > 0 ? ub / un : 0, bb, nb, nb > 0 ? bb / nb : 0);
      if (s == 8) lat8[0] = ub, lat8[1] = un;
      if (s == sizes.back()) bw1g[0] = s / ub / 1e3, bw1g[1] = s / un / 1e3;
    }
    // The 1-rank copy changes its way with the size (a kernel, streaming from 16 MiB,
    // cudaMemcpyAsync from 64 MiB): each way's output, tails included, against its input.
    for (size_t bytes : {(size_t(16) << 20) + 4, (size_t(40) << 20) + 28, (size_t(64) << 20) + 4}) {
      std::vector<uint32_t> in(bytes / 4), out(bytes / 4);
      for (size_t i = 0; i < in.size(); ++i) in[i] = uint32_t(i * 2654435761u) & 0x3f7fffffu;  // finite floats
      CUDA_OK(cudaMemcpy(big.send, in.data(), bytes, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemset(big.recv, 0xff, bytes + 64));
      ncclResult_t rc = braidLib.allReduce(big.send, big.recv, bytes / 4, ncclFloat32, ncclSum, braidLib.comms[0], stream);
      waitStream(stream, "braid: 1-rank all-reduce check");
      CUDA_OK(cudaMemcpy(out.data(), big.recv, bytes, cudaMemcpyDeviceToHost));
      uint32_t past = 0;
      CUDA_OK(cudaMemcpy(&past, static_cast<char*>(big.recv) + bytes, 4, cudaMemcpyDeviceToHost));
      const bool good = rc == ncclSuccess && out == in && past == 0xffffffffu;
      std::printf("1-rank all-reduce of %zu B: %s\n", bytes, good ? "output = input" : "WRONG");
      if (!good) benchFailed = true;
    }
    CUDA_OK(cudaFree(big.send));
    CUDA_OK(cudaFree(big.recv));
    // 3. Host CPU per call.
    double cpu[2], wall[2];
    for (int l = 0; l < 2; ++l) cpuPerCall(*libs[l], small, stream, 10000, &cpu[l], &wall[l]);
    std::printf("\nhost time per ncclAllReduce call (10000 calls of 8 B, no graph): braid cpu %.2f us wall %.2f us | nccl cpu %.2f us wall %.2f us\n",
                cpu[0], wall[0], cpu[1], wall[1]);
    std::printf("SUMMARY 8B: braid %.1f us nccl %.1f us; %zuMB: braid %.0f GB/s nccl %.0f GB/s\n", lat8[0], lat8[1],
                sizes.back() >> 20, bw1g[0], bw1g[1]);
    std::printf("SUMMARY cpu/call: braid %.2f us nccl %.2f us; comm mem: braid %.1f MiB nccl %.1f MiB\n", cpu[0], cpu[1],
                memMiB[0], memMiB[1]);
  } else if (nRanks == 1) {
    std::printf("SUMMARY comm mem: braid %.1f MiB nccl %.1f MiB\n", memMiB[0], memMiB[1]);
  }
  // 4. Correctness against NCCL (last: the measurements come first in case a combination hangs).
  // Each rank's buffers hold the largest case: 1000003 8-byte elements from every rank.
  for (RankSide& rs : ranks) {
    CUDA_OK(cudaSetDevice(rs.device));
    rs.buf.bytes = size_t(1000003) * 8 * nRanks + 4096;
    CUDA_OK(cudaMalloc(&rs.buf.send, rs.buf.bytes));
    CUDA_OK(cudaMalloc(&rs.buf.recv, rs.buf.bytes));
    CUDA_OK(cudaStreamCreateWithFlags(&rs.stream, cudaStreamNonBlocking));
  }
  CompareTotals t;
  auto c0 = std::chrono::steady_clock::now();
  compareAll(braidLib, ncclLib, ranks, quick, &t);
  double cmpSecs = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
  for (RankSide& rs : ranks) {
    CUDA_OK(cudaSetDevice(rs.device));
    CUDA_OK(cudaFree(rs.buf.send));
    CUDA_OK(cudaFree(rs.buf.recv));
    CUDA_OK(cudaStreamDestroy(rs.stream));
  }
  CUDA_OK(cudaSetDevice(0));
  std::printf("compare (%d ranks): %zu runs in %.1f s: %zu differ, %zu braid errors, %zu refused by nccl, reference misses: braid %zu nccl %zu\n",
              nRanks, t.runs, cmpSecs, t.differ, t.braidErrors, t.ncclRefused, t.braidRefWrong, t.ncclRefWrong);
  std::printf("SUMMARY vs-nccl %d ranks %zu runs: %zu differ (%zu where NCCL is right), %zu braid err, %zu nccl-refused, ref-miss braid %zu nccl %zu\n",
              nRanks, t.runs, t.differ, t.differNcclRight, t.braidErrors, t.ncclRefused, t.braidRefWrong, t.ncclRefWrong);

  for (Lib* lib : libs)
    for (ncclComm_t c : lib->comms)
      if (ncclResult_t rc = lib->commDestroy(c); rc != ncclSuccess)
        std::printf("%s ncclCommDestroy: %d %s\n", lib->name.c_str(), rc, lib->getLastError(nullptr));
  cudaFree(small.send);
  cudaFree(small.recv);
  cudaStreamDestroy(stream);
  // A difference counts against braid unless NCCL's output is the one that misses the reference
  // or, with more than two ranks, the order of a float reduction may differ (see the top).
  bool ok = (t.differNcclRight == 0 || nRanks > 2) && t.braidErrors == 0 && t.braidRefWrong == 0 && !benchFailed;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
