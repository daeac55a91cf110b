// Several UCX proxies per communicator, for the GPU's connections to other hosts. One proxy
// thread moves every slot of a communicator through one UCX worker (one TCP connection per
// peer over TCP): the kernel's copy into and out of the socket for both directions then runs
// on one core, and a device all-reduce across 2 emulated hosts moved ~1.5 GB/s each way where
// NCCL's socket transport, with threads of its own per connection, moved ~2.3 (H100 host, 16
// cores; perf/NOTES.md, session 15). Here K independent UcxNets (worker, endpoints, proxy
// thread each) share the work: a GPU connection on channel c goes to proxy c % K on both of
// its ends; the CPU engine's connections all stay on proxy 0, whose worker its thread also
// drives (UcxNet::progress), so host-memory calls see no change.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "nccl.h"
#include "transport/ucx_net.h"

struct ncclComm;

namespace braid::transport {

// How many proxies this rank would like: BRAID_NET_PROXIES (1..kMaxNetProxies) when set;
// otherwise the cores this process may run on, halved (the ranks' own threads need theirs),
// over the ranks of the communicator on this machine (hosts emulated with BRAID_HOSTID share
// its cores), between 1 and 4. A 2-core machine gets 1. Measured on an H100 host with 16 cores
// (perf/NOTES.md, session 15): 4 proxies a rank for 2 emulated hosts x 1 made large calls 2x
// faster; for 4 x 1 (16 proxies, 4 spinning ranks) they made small calls 2x slower.
constexpr int kMaxNetProxies = 8;
int wantedNetProxies(const ncclComm* comm);

// Collective: every rank's wish, the smallest taken, so that both ends of a connection pick
// the same proxy. *count is that number (1 on a rank whose exchange failed: it returns the error).
ncclResult_t agreeNetProxies(ncclComm* comm, int wanted, int* count);

// Starts `count` proxies with `startOne` (which sets its UcxNet, started or not, and returns how
// the start went; collective: every rank starts as many) and makes them one UcxNet: connections
// routed as above, kick() to the proxies of the channels it names, close() to every proxy, kept
// memory released after all of them have stopped. On a failure every proxy made is closed.
ncclResult_t startProxies(ncclComm* comm, int count, const std::function<ncclResult_t(std::shared_ptr<UcxNet>*)>& startOne,
                          std::shared_ptr<UcxNet>* out);

// Which proxy carries a connection (pure; both ends compute it alike).
inline int proxyOf(int channel, uint32_t space, int count) {
  return space == kSpaceDevice && count > 1 && channel > 0 ? channel % count : 0;
}

}  // namespace braid::transport
