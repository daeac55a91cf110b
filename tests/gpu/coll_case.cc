#include "coll_case.h"

#include <chrono>
#include <cstdio>
#include <thread>

namespace braid::gputest {
namespace {

constexpr size_t kGuard = 256;          // bytes checked on both sides of each region
constexpr unsigned char kGuardByte = 0xa5;
constexpr unsigned char kUnsetByte = 0xcd;

// Byte pattern for ops that only move data: every byte differs between ranks and offsets.
unsigned char patternByte(int rank, uint64_t byte) { return static_cast<unsigned char>((byte * 131 + rank * 29 + 7) >> 1); }

struct Layout {
  uint64_t region = 0, inOff = 0, outOff = 0;  // elements
};

Layout layoutOf(const CaseSpec& s, int rank, int n, uint64_t inSize, uint64_t outSize) {
  const uint64_t blockAt = uint64_t(rank) * s.count, rootAt = uint64_t(s.root) * s.count;
  if (!s.inPlace) return {inSize + outSize, 0, inSize};
  switch (s.coll) {
    case algo::Coll::AllReduce:
    case algo::Coll::Reduce:
    case algo::Coll::Broadcast: return {std::max(inSize, outSize), 0, 0};
    case algo::Coll::AllGather: return {outSize, blockAt, 0};
    case algo::Coll::ReduceScatter: return {inSize, 0, blockAt};
    case algo::Coll::Gather:
      if (rank == s.root) return {outSize, rootAt, 0};
      break;
    case algo::Coll::Scatter:
      if (rank == s.root) return {inSize, 0, rootAt};
      break;
    default: break;
  }
  (void)n;
  return {inSize + outSize, 0, inSize};
}

// Which rank's input element lands at output element i of `rank` (gathers and copies).
void sourceOf(const CaseSpec& s, int rank, int n, uint64_t i, int* fromRank, uint64_t* fromIndex) {
  const uint64_t c = s.count;
  switch (s.coll) {
    case algo::Coll::AllGather:
    case algo::Coll::Gather: *fromRank = int(i / c); *fromIndex = i % c; return;
    case algo::Coll::Broadcast: *fromRank = s.root; *fromIndex = i; return;
    case algo::Coll::Scatter: *fromRank = s.root; *fromIndex = uint64_t(rank) * c + i; return;
    case algo::Coll::AlltoAll: *fromRank = int(i / c); *fromIndex = uint64_t(rank) * c + i % c; return;
    default: *fromRank = rank; *fromIndex = i; return;
  }
  (void)n;
}

}  // namespace

std::string CaseSpec::name() const {
  std::string s = std::string(algo::protocolName(protocol)) + " " + algorithm->name + " " + algo::collName(coll) + " " +
                  typeName(type);
  if (algo::collReduces(coll)) s += std::string(" ") + testOpName(op);
  s += " count=" + std::to_string(count) + (inPlace ? " in-place" : " out-of-place");
  if (coll == algo::Coll::Broadcast || coll == algo::Coll::Reduce || coll == algo::Coll::Gather || coll == algo::Coll::Scatter)
    s += " root=" + std::to_string(root);
  return s;
}

CaseRunner::~CaseRunner() {
  for (size_t r = 0; r < buffers_.size(); ++r) {
    (void)cudaSetDevice(group_.device(int(r)));
    (void)cudaFree(buffers_[r]);
    (void)cudaFree(scalars_[r]);
  }
}

bool CaseRunner::ensure(size_t bytes) {
  if (bytes <= capacity_ && !buffers_.empty()) return true;
  for (size_t r = 0; r < buffers_.size(); ++r) {
    (void)cudaFree(buffers_[r]);
    (void)cudaFree(scalars_[r]);
  }
  const int n = group_.nRanks();
  buffers_.assign(n, nullptr);
  scalars_.assign(n, nullptr);
  capacity_ = std::max<size_t>(bytes, 1 << 20);
  for (int r = 0; r < n; ++r) {
    if (!GPU_OK(cudaSetDevice(group_.device(r)))) return false;
    if (!GPU_OK(cudaMalloc(reinterpret_cast<void**>(&buffers_[r]), capacity_ + 2 * kGuard))) return false;
    if (!GPU_OK(cudaMalloc(&scalars_[r], 8))) return false;
  }
  return true;
}

CaseResult CaseRunner::run(const CaseSpec& s) {
  CaseResult res;
  if (broken_) return {false, "skipped: an earlier case hung and was aborted", 0, s.protocol};
  const int n = group_.nRanks();
  const size_t es = sizeOfType(s.type);
  const bool reduces = algo::collReduces(s.coll);
  std::vector<uint64_t> inSize(n), outSize(n);
  std::vector<Layout> layout(n);
  size_t maxBytes = 0;
  for (int r = 0; r < n; ++r) {
    inSize[r] = algo::inputCount(s.coll, s.count, n, r, s.root);
    outSize[r] = algo::outputCount(s.coll, s.count, n, r, s.root);
    layout[r] = layoutOf(s, r, n, inSize[r], outSize[r]);
    maxBytes = std::max(maxBytes, size_t(layout[r].region) * es);
  }
  if (!ensure(maxBytes)) return {false, "buffer allocation failed", 0};

  // Inputs: values for reductions, byte patterns for moves; everything else "unset".
  std::vector<std::vector<unsigned char>> host(n);
  auto inputBytes = [&](int r, uint64_t i, unsigned char* out) {
    if (reduces) storeValue(s.type, inputValue(s.type, s.op, r, i), out);
    else for (size_t b = 0; b < es; ++b) out[b] = patternByte(r, i * es + b);
  };
  std::vector<CollCall> calls(n);
  for (int r = 0; r < n; ++r) {
    host[r].assign(layout[r].region * es + 2 * kGuard, kUnsetByte);
    std::fill(host[r].begin(), host[r].begin() + kGuard, kGuardByte);
    std::fill(host[r].end() - kGuard, host[r].end(), kGuardByte);
    unsigned char* region = host[r].data() + kGuard;
    for (uint64_t i = 0; i < inSize[r]; ++i) inputBytes(r, i, region + (layout[r].inOff + i) * es);
    if (!GPU_OK(cudaMemcpy(buffers_[r], host[r].data(), host[r].size(), cudaMemcpyHostToDevice))) return {false, "upload failed", 0};
    CollCall& c = calls[r];
    c.algorithm = s.algorithm;
    c.args.coll = s.coll;
    c.args.count = s.count;
    c.args.root = s.root;
    c.args.nChannels = group_.options().nChannels;
    c.args.alignElems = uint32_t(16 / es);
    c.type = s.type;
    c.red = redOpFor(s.type, s.op, r, n);
    if (s.op == TestOp::PreMulDevice) {
      uint64_t bits = 0;
      storeValue(s.type, scalarValue(s.type, s.op, r, n), &bits);
      if (!GPU_OK(cudaMemcpy(scalars_[r], &bits, 8, cudaMemcpyHostToDevice))) return {false, "scalar upload failed", 0};
      c.red.deviceScalar = scalars_[r];
      c.red.scalarBits = 0;
    }
    c.input = buffers_[r] + kGuard + layout[r].inOff * es;
    c.output = buffers_[r] + kGuard + layout[r].outOff * es;
  }

  if (!group_.settle()) return {false, "upload failed", 0};
  group_.clearErrors();
  res.ran = group_.usableProtocol(s.protocol);
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < n; ++r) {
    ncclResult_t e = group_.enqueue(r, {calls[r]}, res.ran);
    if (e != ncclSuccess) return {false, "enqueue failed on rank " + std::to_string(r) + ": " + std::to_string(int(e)), 0};
  }
  // Watchdog: a hang becomes an abort and a failure instead of a stuck test.
  bool done = false;
  while (!done) {
    done = true;
    for (int r = 0; r < n; ++r) done = done && cudaStreamQuery(group_.stream(r)) != cudaErrorNotReady;
    if (!done && std::chrono::steady_clock::now() - start > std::chrono::seconds(20)) {
      *group_.abortFlag() = 1;
      group_.synchronize();
      broken_ = true;  // the connections' counters are out of step now
      return {false, "hang: aborted after 20 s", 20};
    }
    if (!done) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!group_.synchronize()) return {false, "CUDA error in the stream", res.seconds};

  // Every input repeats with the element index modulo kInputPeriod (reference.h), so each
  // rank's expected reduction is one of kInputPeriod values: computed once, not per element.
  std::vector<Expected> expected;
  if (reduces) {
    std::vector<double> raw(n);
    for (uint64_t k = 0; k < kInputPeriod; ++k) {
      for (int q = 0; q < n; ++q) raw[q] = inputValue(s.type, s.op, q, k);
      expected.push_back(reduceReference(s.type, s.op, raw, n));
    }
  }
  auto note = [&](const std::string& what) {
    res.ok = false;
    res.message += what + "\n";
  };
  auto hex = [](const unsigned char* p, size_t bytes) {
    std::string h = "0x";
    char b[3];
    for (size_t k = bytes; k-- > 0;) std::snprintf(b, sizeof(b), "%02x", p[k]), h += b;
    return h;
  };
  int ranksShown = 0;
  for (int r = 0; r < n; ++r) {
    if (group_.deviceError(r) != 0) note("rank " + std::to_string(r) + ": device error " + std::to_string(group_.deviceError(r)));
    std::vector<unsigned char> got(host[r].size());
    if (!GPU_OK(cudaMemcpy(got.data(), buffers_[r], got.size(), cudaMemcpyDeviceToHost))) return {false, "download failed", res.seconds, res.ran};
    for (size_t b = 0; b < kGuard; ++b)
      if (got[b] != kGuardByte || got[got.size() - 1 - b] != kGuardByte) {
        note("rank " + std::to_string(r) + ": guard bytes around the buffer overwritten");
        break;
      }
    const unsigned char* out = got.data() + kGuard + layout[r].outOff * es;
    std::vector<unsigned char> want(es);
    uint64_t wrong = 0;
    std::string first;
    for (uint64_t i = 0; i < outSize[r]; ++i) {
      const unsigned char* g = out + i * es;
      if (reduces) {
        const uint64_t idx = s.coll == algo::Coll::ReduceScatter ? uint64_t(r) * s.count + i : i;
        const Expected& e = expected[idx % kInputPeriod];
        const double v = loadValue(s.type, g);
        if (std::fabs(v - e.value) <= e.tolerance) continue;
        if (wrong++ == 0)
          first = "out[" + std::to_string(i) + "] = " + std::to_string(v) + ", expected " + std::to_string(e.value) +
                  " (tolerance " + std::to_string(e.tolerance) + ")";
      } else {
        int from;
        uint64_t fromIndex;
        sourceOf(s, r, n, i, &from, &fromIndex);
        inputBytes(from, fromIndex, want.data());
        if (std::memcmp(g, want.data(), es) == 0) continue;
        if (wrong++ == 0)
          first = "out[" + std::to_string(i) + "] = " + hex(g, es) + ", expected " + hex(want.data(), es) + " (rank " +
                  std::to_string(from) + "'s element " + std::to_string(fromIndex) + ")";
      }
    }
    if (wrong > 0 && ranksShown++ < 4)
      note("rank " + std::to_string(r) + ": " + std::to_string(wrong) + " of " + std::to_string(outSize[r]) +
           " elements wrong; first " + first);
  }
  return res;
}

}  // namespace braid::gputest
