// ncclGroupSimulateEnd on device memory agrees with what the launch runs (issue 13): a group of
// sends and receives alone runs one protocol on every rank (Simple unless NCCL_PROTO leaves
// send/recv exactly one), and a group with a collective runs its first collective's choice, its
// sends too. So, on 4 ranks as threads of one process on GPU 0, 8 B to 4 MiB:
//   - a send under NCCL_PROTO=LL,Simple is estimated as under NCCL_PROTO=Simple, and the TUNING
//     log names p2p/Simple, never p2p/LL;
//   - an all-reduce grouped with a send under NCCL_PROTO=LL,Simple costs the all-reduce alone
//     plus the send under the all-reduce's protocol (LL or Simple, told apart by the estimates
//     under NCCL_PROTO=LL and =Simple);
//   - under NCCL_PROTO=LL a send alone is estimated (and logged) as LL.
// Nothing is launched. Prints SUMMARY lines for tests/gpu/run.sh. Exit status 0: passed, 1:
// failed, 77: no GPU.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "api_check.h"
#include "gpu_present.h"
#include "nccl.h"

namespace {

// The log settings are read once per process, at the first log call: set them before main.
struct LogToFile {
  std::string path = "/tmp/braid_gpu_api_simulate_" + std::to_string(getpid()) + ".log";
  LogToFile() {
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "TUNING", 1);
    setenv("NCCL_DEBUG_FILE", path.c_str(), 1);
    unsetenv("NCCL_ALGO");
  }
  ~LogToFile() { std::remove(path.c_str()); }
} gLog;
const std::string& kLog = gLog.path;

std::string logText() {
  std::ifstream f(kLog);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Four ranks on GPU 0 with NCCL_PROTO=`proto` (read at init), and the estimates of rank 0's
// groups there.
struct Comms {
  ncclComm_t c[4] = {};
  explicit Comms(const char* proto) {
    setenv("NCCL_PROTO", proto, 1);
    int devs[4] = {0, 0, 0, 0};
    NCCL_OK(ncclCommInitAll(c, 4, devs));
    unsetenv("NCCL_PROTO");
  }
  ~Comms() {
    for (ncclComm_t x : c) ncclCommDestroy(x);
  }
  template <typename Enqueue>
  float simulate(Enqueue enqueue) {
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    NCCL_OK(ncclGroupStart());
    enqueue(c[0]);
    NCCL_OK(ncclGroupSimulateEnd(&sim));
    return sim.estimatedTime;
  }
};

bool near(float a, float b) { return std::fabs(a - b) <= 1e-3f * std::max(std::fabs(a), std::fabs(b)); }

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (braid::gputest::skipWithoutGpu()) return braid::gputest::kSkipExit;
  CUDA_OK(cudaSetDevice(0));
  void* buf = nullptr;
  constexpr size_t kMax = 4u << 20;
  CUDA_OK(cudaMalloc(&buf, 2 * kMax));
  char* x = static_cast<char*>(buf);
  char* y = x + kMax;
  int failures = 0;
  auto check = [&failures](bool ok, const char* what, size_t bytes, float a, float b) {
    if (!ok) {
      ++failures;
      std::printf("FAIL %s at %zu B: %.3f against %.3f us\n", what, bytes, a, b);
    }
  };
  int grouped = 0, groupedLL = 0;
  {
    Comms simple("Simple"), both("LL,Simple"), ll("LL");
    for (size_t bytes = 8; bytes <= kMax; bytes *= 8) {
      auto send = [&](ncclComm_t c) { ncclSend(x, bytes, ncclInt8, 1, c, nullptr); };
      const float sendSimple = simple.simulate(send), sendBoth = both.simulate(send);
      check(sendSimple > 0 && near(sendBoth, sendSimple), "send under LL,Simple is not the Simple send", bytes, sendBoth,
            sendSimple);
    }
    const std::string log = logText();
    if (log.find("SendRecv of 8 bytes on device memory: p2p/Simple") == std::string::npos ||
        log.find("p2p/LL") != std::string::npos) {
      ++failures;
      std::printf("FAIL the TUNING log does not name p2p/Simple alone for sends under LL,Simple:\n%s\n", log.c_str());
    }
    for (size_t bytes = 8; bytes <= kMax; bytes *= 8) {
      auto send = [&](ncclComm_t c) { ncclSend(x, bytes, ncclInt8, 1, c, nullptr); };
      auto allReduce = [&](ncclComm_t c) { ncclAllReduce(x, y, bytes, ncclInt8, ncclSum, c, nullptr); };
      auto group = [&](ncclComm_t c) {
        allReduce(c);
        send(c);
      };
      const float arBoth = both.simulate(allReduce), arLL = ll.simulate(allReduce), arSimple = simple.simulate(allReduce);
      const bool isLL = near(arBoth, arLL) && !near(arBoth, arSimple);
      if (!isLL && !(near(arBoth, arSimple) && !near(arBoth, arLL))) continue;  // a tie: cannot tell
      ++grouped;
      groupedLL += isLL ? 1 : 0;
      const float sendUnder = isLL ? ll.simulate(send) : simple.simulate(send), groupBoth = both.simulate(group);
      check(near(groupBoth, arBoth + sendUnder), isLL ? "grouped all-reduce (LL) + send is not LL's" :
            "grouped all-reduce (Simple) + send is not Simple's", bytes, groupBoth, arBoth + sendUnder);
    }
  }
  if (grouped == 0) {
    ++failures;
    std::printf("FAIL no size told the all-reduce's protocol apart\n");
  }
  std::printf("SUMMARY grouped sizes checked %d (the all-reduce LL at %d)\n", grouped, groupedLL);
  {
    const size_t before = logText().size();
    Comms ll("LL"), simple("Simple");
    auto send = [&](ncclComm_t c) { ncclSend(x, 8, ncclInt8, 1, c, nullptr); };
    const float sendLL = ll.simulate(send), sendSimple = simple.simulate(send);
    check(sendLL > 0 && !near(sendLL, sendSimple), "send under LL is estimated as Simple", 8, sendLL, sendSimple);
    const std::string after = logText().substr(before);
    if (after.find("SendRecv of 8 bytes on device memory: p2p/LL,") == std::string::npos) {
      ++failures;
      std::printf("FAIL the TUNING log does not name p2p/LL for a send under NCCL_PROTO=LL:\n%s\n", after.c_str());
    }
  }
  CUDA_OK(cudaFree(buf));
  std::printf("SUMMARY simulate matches the launch's protocol %s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
