// Speed of the host element-wise kernels (not a test; not run by ctest).
//   reduce_bench [MiB per array, default 8] [repetitions, default 20] [base: baseline kernels]
// For each type and op: dst = recv (op) src over arrays of the given size, out of place and
// in place (dst == recv). Prints the best time and the memory traffic rate (2 arrays read,
// 1 written), next to memcpy's rate (1 read, 1 written) for the same array size.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/numeric.h"
#include "host/reduce.h"
#include "host/reduce_isa.h"

using namespace braid;
using namespace braid::host;

namespace {

template <class F>
double bestSeconds(int reps, F f) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best) best = s;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 8;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  const size_t bytes = mib << 20;
  std::vector<char> a(bytes), b(bytes), d(bytes);
  for (size_t i = 0; i < bytes; i++) {  // small positive values in every type: no NaN/inf paths
    a[i] = char(i % 7 == 0 ? 0x3c : 0x21);
    b[i] = char(i % 5 == 0 ? 0x3b : 0x22);
  }
  std::memset(d.data(), 0, bytes);

  double copy = bestSeconds(reps, [&] { std::memcpy(d.data(), a.data(), bytes); });
  std::printf("array %zu MiB, best of %d\n", mib, reps);
  std::printf("%-9s %-10s %10s %10s %12s\n", "type", "op", "ms", "GB/s", "inplace GB/s");
  std::printf("%-9s %-10s %10.3f %10.1f\n", "-", "memcpy", copy * 1e3, 2.0 * bytes / copy / 1e9);

  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};
  const KernelIsa isa = argc > 3 && std::strcmp(argv[3], "base") == 0 ? KernelIsa::Base : bestKernelIsa();
  std::printf("kernels: %s\n", kernelIsaName(isa));
  for (int t = 0; t < 12; t++) {
    const auto type = ncclDataType_t(t);
    const size_t n = bytes / sizeOfType(type);
    for (ncclRedOp_t op : ops) {
      HostOp h = *makeHostOp(op, type, 4);
      ElemwiseFn fn = selectElemwiseFor(isa, h, true, true, true, op == ncclAvg);
      double s = bestSeconds(reps, [&] { fn(d.data(), a.data(), b.data(), n, h); });
      std::memcpy(d.data(), a.data(), bytes);
      double si = bestSeconds(reps, [&] { fn(d.data(), d.data(), b.data(), n, h); });
      std::printf("%-9s %-10s %10.3f %10.1f %12.1f\n", typeName(type), redOpName(op), s * 1e3,
                  3.0 * bytes / s / 1e9, 3.0 * bytes / si / 1e9);
    }
  }
  return 0;
}
