#include "transport/ucx_settings.h"

#if BRAID_HAVE_UCX
#include <cstdlib>
#include <mutex>

#include "core/env.h"
#include "core/socket.h"

namespace braid::transport::ucx {
namespace {

// UCX's TCP transport cuts every message into segments of UCX_TCP_TX_SEG_SIZE (8 KiB by
// default), one send call each: a GPU FIFO slot of 256 KiB went as 32. With segments of a slot,
// the proxy carried whole 256 KiB slots at 2.1-2.5 GB/s each way instead of 0.7-1.4 (2-core VM,
// tests/net/net_fifo_rank --bench, 3 rounds each), and the device all-reduce across 2 emulated
// hosts took half the time from 4 MB (H100, perf/NOTES.md session 14); the CPU engine's
// all-reduce, whose reductions bound it on the VM, measured the same within noise. The
// environment is the one way every UCX version reads transport settings before its context
// exists (ucp_config_modify names only UCP's in UCX 1.13: "invalid configurations"); a value the
// user set stays, and it is set once, before this process's first UCX context.
void defaultTcpSegments() {
  static std::once_flag once;
  std::call_once(once, [] {
    (void)setenv("UCX_TCP_TX_SEG_SIZE", "256k", /*overwrite=*/0);
    (void)setenv("UCX_TCP_RX_SEG_SIZE", "256k", /*overwrite=*/0);
  });
}

}  // namespace

ucs_status_t readConfig(const Api& api, ucp_config_t** config, std::string* ifName) {
  defaultTcpSegments();
  ucs_status_t s = api.configRead(nullptr, nullptr, config);
  SocketAddress unused{};
  // The bootstrap's interface (NCCL_SOCKET_IFNAME's rules) is UCX's too, unless the user chose.
  if (s == UCS_OK && env::get("UCX_NET_DEVICES") == nullptr && findBootstrapAddress(&unused, ifName) == ncclSuccess &&
      *ifName != "lo")
    s = api.configModify(*config, "NET_DEVICES", ifName->c_str());
  else
    ifName->clear();
  // Every message is one slot (at most kFifoSlotBytes and its header) sent only once the
  // receiver has posted its receive (credits), so eager is always expected: UCX's rendezvous
  // (from ~32 KB over TCP) only added handshakes: 2 nodes x 1 rank, all-reduce of 64 KB
  // 234 -> 69 us, 256 KB 981 -> 244 us (medians of 3). Unless the user chose.
  if (s == UCS_OK && env::get("UCX_RNDV_THRESH") == nullptr) s = api.configModify(*config, "RNDV_THRESH", "inf");
  // Every transfer names its memory type (describeMemory), so UCX's memtype cache only costs: it
  // took the GPUDirect slots (cudaMalloc'd through braid's static CUDA runtime, which UCX's
  // hooks did not see) for host memory, and the proxy then crashed or hung in UCX's host copies
  // of them (libucx-cu13 1.22, H100: cache on, SIGSEGV or a hang; off, 96 runs 0 wrong).
  // Unless the user chose.
  if (s == UCS_OK && env::get("UCX_MEMTYPE_CACHE") == nullptr) s = api.configModify(*config, "MEMTYPE_CACHE", "n");
  return s;
}

}  // namespace braid::transport::ucx
#endif
