// The UCX proxy moving GPU-shaped FIFOs (transport/net_device.h) between real processes on
// "other hosts", with plain host memory standing in for the pinned memory and CPU threads for
// the kernels: each sending thread fills part of each slot (a size that varies per slot), says
// how much in the slot's size word and moves the tail as Simple's post does; each receiving
// thread waits for the tail, checks every word that was sent, checks that the rest of the slot
// did not travel (it zeroes each slot it consumed) and moves the head.
// Meanwhile the main thread runs host-memory all-reduces on the same communicator, whose CPU
// engine uses the same UCX worker and the same (channel, peer) pairs (channel 0): the two
// engines' messages must not mix (their tags differ in space, net_fifo.h).
//   net_fifo_rank [--emulate-hosts PER] [--slots N] [--bench MB [--slot-kib K] [--channels C]]
// --bench: no check and no all-reduce beside: whole slots of K KiB (default 256, the GPU's
// Simple slot) on C channels per peer (default 1), MB megabytes each way per link, as fast as the
// proxy moves them; prints MB/s (what the proxy can carry, with no GPU in the way).
// Started by braid-launch (loopback: --emulate-hosts gives ranks r / PER their own BRAID_HOSTID
// and points UCX and the bootstrap at lo) or by tests/net/nodes_run.sh (namespaces). Prints OK;
// exits 77 (skipped) where UCX is missing, 1 on a wrong word or a wait past its bound.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "nccl.h"
#include "tests/common/rank_env.h"
#include "transport/net_device.h"
#include "transport/ucx_net.h"

namespace {

using Clock = std::chrono::steady_clock;
using braid::transport::FifoRecvEnd;
using braid::transport::FifoSendEnd;

constexpr uint32_t kSlotBytes = 64 * 1024;
constexpr uint32_t kSlots = 8;
constexpr int kChannels[] = {0, 3, 64};
constexpr auto kWaitLimit = std::chrono::seconds(30);

std::atomic<int> gFailures{0};
int gRank = 0;

void failf(const char* what, int peer, int channel, uint64_t slot, const char* detail) {
  if (gFailures.fetch_add(1) < 10)
    std::fprintf(stderr, "[rank %d] FAIL: %s (peer %d, channel %d, slot %llu): %s\n", gRank, what, peer, channel,
                 static_cast<unsigned long long>(slot), detail);
}

uint64_t word(int sender, int channel, uint64_t slot, size_t i) {
  return (uint64_t(sender) << 56) ^ (uint64_t(channel) << 48) ^ (slot << 20) ^ i ^ 0x5bd1e995u;
}

std::atomic<uint64_t>* atomicWord(uint64_t* p) { return braid::transport::counterWord(p); }

// The bytes slot k of (channel) carries: 8 .. the whole slot, varying, a whole slot now and then.
size_t sliceBytes(int channel, uint64_t k, uint32_t slotBytes) {
  const size_t words = slotBytes / 8;
  return 8 * (k % 5 == 4 ? words : 1 + (k * 7919 + size_t(channel)) % words);
}

// Waits until pred() or the bound; false past it.
template <class Pred> bool waitFor(Pred pred) {
  const auto end = Clock::now() + kWaitLimit;
  for (uint64_t spins = 0; !pred(); ++spins) {
    if ((spins & 1023) == 0 && Clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

// What Simple's sender does (kernels/proto_simple.cuh): room, the slot, then the tail.
void sendSlots(const FifoSendEnd& e, int peer, int channel, uint64_t from, uint64_t to) {
  for (uint64_t k = from; k < to; ++k) {
    if (!waitFor([&] { return atomicWord(e.localHead)->load(std::memory_order_acquire) + e.nSlots > k; }))
      return failf("no room to send", peer, channel, k, "head never moved");
    auto* slot = reinterpret_cast<uint64_t*>(e.peerFifo + (k % e.nSlots) * e.slotBytes);
    const size_t bytes = sliceBytes(channel, k, e.slotBytes);
    for (size_t i = 0; i < bytes / 8; ++i) slot[i] = word(gRank, channel, k, i);
    __atomic_store_n(&e.slotSizes[k % e.nSlots], uint32_t(bytes), __ATOMIC_RELAXED);
    atomicWord(e.peerTail)->store(k + 1, std::memory_order_release);
  }
}

// What Simple's receiver does: the tail, the slot, then the head.
void recvSlots(const FifoRecvEnd& e, int peer, int channel, uint64_t from, uint64_t to) {
  for (uint64_t k = from; k < to; ++k) {
    if (!waitFor([&] { return atomicWord(e.localTail)->load(std::memory_order_acquire) > k; }))
      return failf("nothing arrived", peer, channel, k, "tail never moved");
    auto* slot = const_cast<uint64_t*>(reinterpret_cast<const uint64_t*>(e.localFifo + (k % e.nSlots) * e.slotBytes));
    const size_t sent = sliceBytes(channel, k, e.slotBytes) / 8;
    for (size_t i = 0; i < e.slotBytes / 8; ++i) {
      const uint64_t want = i < sent ? word(peer, channel, k, i) : 0;  // past the slice: nothing arrived
      if (slot[i] != want) {
        char detail[128];
        std::snprintf(detail, sizeof detail, "word %zu of %zu sent is %016llx, not %016llx", i, sent,
                      (unsigned long long)slot[i], (unsigned long long)want);
        return failf(i < sent ? "wrong data" : "bytes past the slice travelled", peer, channel, k, detail);
      }
    }
    std::memset(slot, 0, e.slotBytes);
    atomicWord(e.peerHead)->store(k + 1, std::memory_order_release);
  }
}

// --bench's sender and receiver: whole slots, one word written and read.
void benchSend(const FifoSendEnd& e, uint64_t to) {
  for (uint64_t k = 0; k < to; ++k) {
    if (!waitFor([&] { return atomicWord(e.localHead)->load(std::memory_order_acquire) + e.nSlots > k; }))
      return failf("no room to send", -1, -1, k, "head never moved");
    *reinterpret_cast<uint64_t*>(e.peerFifo + (k % e.nSlots) * e.slotBytes) = k;
    __atomic_store_n(&e.slotSizes[k % e.nSlots], e.slotBytes, __ATOMIC_RELAXED);
    atomicWord(e.peerTail)->store(k + 1, std::memory_order_release);
  }
}
void benchRecv(const FifoRecvEnd& e, uint64_t to) {
  for (uint64_t k = 0; k < to; ++k) {
    if (!waitFor([&] { return atomicWord(e.localTail)->load(std::memory_order_acquire) > k; }))
      return failf("nothing arrived", -1, -1, k, "tail never moved");
    if (*reinterpret_cast<const uint64_t*>(e.localFifo + (k % e.nSlots) * e.slotBytes) != k)
      return failf("wrong data", -1, -1, k, "the slot's first word");
    atomicWord(e.peerHead)->store(k + 1, std::memory_order_release);
  }
}

struct Links {
  std::vector<std::pair<FifoSendEnd, std::pair<int, int>>> sends;  // end, (peer, channel)
  std::vector<std::pair<FifoRecvEnd, std::pair<int, int>>> recvs;
};

// Moves slots [from, to) on every link at once, each end in its own thread.
void moveSlots(const Links& links, uint64_t from, uint64_t to) {
  std::vector<std::thread> threads;
  for (const auto& [e, pc] : links.sends) threads.emplace_back(sendSlots, e, pc.first, pc.second, from, to);
  for (const auto& [e, pc] : links.recvs) threads.emplace_back(recvSlots, e, pc.first, pc.second, from, to);
  for (std::thread& t : threads) t.join();
}

// A host-memory all-reduce beside the slots: every rank contributes rank + i.
bool hostAllReduce(ncclComm_t comm, int nRanks, size_t count) {
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = float(gRank) + float(i % 1000);
  if (ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
    std::fprintf(stderr, "[rank %d] FAIL: host all-reduce: %s\n", gRank, ncclGetLastError(comm));
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    const float want = float(nRanks * (nRanks - 1) / 2) + float(nRanks) * float(i % 1000);
    if (out[i] != want) {
      std::fprintf(stderr, "[rank %d] FAIL: host all-reduce element %zu is %g, not %g\n", gRank, i, out[i], want);
      return false;
    }
  }
  return true;
}

void setDefault(const char* name, const std::string& value) {
  if (std::getenv(name) == nullptr) setenv(name, value.c_str(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  const braid::test::RankEnv env = braid::test::rankEnvOrExit("net_fifo_rank");
  gRank = env.rank;
  int emulatePer = 0;
  uint64_t nSlotsToMove = 600;
  double benchMb = 0;
  uint32_t slotBytes = kSlotBytes;
  int benchChannels = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--emulate-hosts") == 0) emulatePer = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--slots") == 0) nSlotsToMove = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--bench") == 0) benchMb = std::atof(argv[i + 1]);
    else if (std::strcmp(argv[i], "--slot-kib") == 0) slotBytes = uint32_t(std::atoi(argv[i + 1])) * 1024;
    else if (std::strcmp(argv[i], "--channels") == 0) benchChannels = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: net_fifo_rank [--emulate-hosts PER] [--slots N] [--bench MB [--slot-kib K] [--channels C]]\n");
      return 2;
    }
  }
  if (emulatePer > 0) {  // every PER ranks a "host" of their own, all on loopback
    setenv("BRAID_HOSTID", ("net-fifo-host-" + std::to_string(env.rank / emulatePer)).c_str(), 1);
    setDefault("NCCL_SOCKET_IFNAME", "lo");
    setDefault("UCX_TLS", "tcp");
    setDefault("UCX_NET_DEVICES", "lo");
  }
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRank(&comm, env.nRanks, env.uniqueId, env.rank);
  if (rc != ncclSuccess) {
    const char* why = ncclGetLastError(nullptr);
    const bool noUcx = why != nullptr && (std::strstr(why, "UCX is not installed") || std::strstr(why, "built without UCX"));
    std::fprintf(stderr, "[rank %d] %s: ncclCommInitRank: %s\n", env.rank, noUcx ? "SKIP" : "FAIL", why ? why : "?");
    return noUcx ? 77 : 1;
  }
  if (!comm->net) {
    std::fprintf(stderr, "[rank %d] FAIL: no rank on another host (BRAID_HOSTID?): nothing to test\n", env.rank);
    return 1;
  }
  // Every peer is on another host: a send and a receive link to each, on each channel.
  if (benchMb > 0 && slotBytes == kSlotBytes) slotBytes = 256 * 1024;
  std::vector<int> channels(std::begin(kChannels), std::end(kChannels));
  if (benchMb > 0) {
    channels.clear();
    for (int c = 0; c < benchChannels; ++c) channels.push_back(c);
  }
  std::vector<braid::transport::P2pLink> sendTo, recvFrom;
  for (int p = 0; p < env.nRanks; ++p)
    if (comm->peers[p].hostHash != comm->peers[env.rank].hostHash)
      for (int c : channels) {
        sendTo.push_back({c, p});
        recvFrom.push_back({c, p});
      }
  std::unique_ptr<braid::transport::NetDeviceLinks> net;
  if (braid::transport::NetDeviceLinks::connect(*comm->net, env.rank, braid::transport::plainHostMemory(), nullptr, slotBytes,
                                                kSlots, sendTo, recvFrom, &net) != ncclSuccess) {
    std::fprintf(stderr, "[rank %d] FAIL: NetDeviceLinks::connect: %s\n", env.rank, ncclGetLastError(nullptr));
    return 1;
  }
  Links links;
  for (const auto& l : sendTo) {
    FifoSendEnd e;
    if (!net->sendEnd(l.channel, l.peer, &e) || e.ordered128) return std::fprintf(stderr, "FAIL: send end\n"), 1;
    links.sends.push_back({e, {l.peer, l.channel}});
  }
  for (const auto& l : recvFrom) {
    FifoRecvEnd e;
    if (!net->recvEnd(l.channel, l.peer, &e) || e.ordered128) return std::fprintf(stderr, "FAIL: recv end\n"), 1;
    links.recvs.push_back({e, {l.peer, l.channel}});
  }

  if (benchMb > 0) {
    const uint64_t perLink = uint64_t(benchMb * 1e6 / slotBytes) + 1;
    ncclAllReduce(&benchMb, &benchMb, 0, ncclFloat64, ncclSum, comm, nullptr);  // start together
    const auto start = Clock::now();
    comm->net->kick(braid::transport::UcxNet::kAllChannels);
    std::vector<std::thread> threads;
    for (const auto& [e, pc] : links.sends) threads.emplace_back(benchSend, e, perLink);
    for (const auto& [e, pc] : links.recvs) threads.emplace_back(benchRecv, e, perLink);
    for (std::thread& t : threads) t.join();
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    const double mb = double(perLink) * slotBytes * double(links.sends.size()) / 1e6;
    std::printf("[rank %d] bench: %zu links each way, %u KiB slots x %u: %.1f MB sent and received in %.3f s: %.0f MB/s each way\n",
                env.rank, links.sends.size(), slotBytes / 1024, kSlots, mb, secs, mb / secs);
    net.reset();
    (void)ncclCommDestroy(comm);
    return gFailures.load() == 0 ? 0 : 1;
  }
  // 1. Slots on every link while the CPU engine runs all-reduces on the same worker and channels.
  const auto t0 = Clock::now();
  comm->net->kick(braid::transport::UcxNet::kAllChannels);
  std::thread slots([&] { moveSlots(links, 0, nSlotsToMove); });
  bool hostOk = true;
  for (int i = 0; i < 5 && hostOk; ++i) hostOk = hostAllReduce(comm, env.nRanks, 300000);
  slots.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  // 2. After the poll window has passed without traffic, and without a kick: the proxy still
  //    looks at the counters (at least every millisecond), so the slots arrive, if slowly.
  std::this_thread::sleep_for(std::chrono::milliseconds(braid::transport::UcxNet::kPollWindowMs + 100));
  const auto t1 = Clock::now();
  moveSlots(links, nSlotsToMove, nSlotsToMove + 20);
  const double unkicked = std::chrono::duration<double>(Clock::now() - t1).count();

  double bytes = 0;
  for (const auto& l : links.sends)
    for (uint64_t k = 0; k < nSlotsToMove; ++k) bytes += double(sliceBytes(l.second.second, k, kSlotBytes));
  const double mb = bytes / 1e6;
  std::printf("[rank %d] %llu slots x %zu links each way: %.1f MB sent in %.2f s (%.0f MB/s, beside 5 host all-reduces); "
              "20 slots unkicked in %.3f s\n",
              env.rank, static_cast<unsigned long long>(nSlotsToMove), links.sends.size(), mb, seconds, mb / seconds,
              unkicked);
  net.reset();  // the memory stays with the communicator's UcxNet until its proxy stops
  if (ncclCommDestroy(comm) != ncclSuccess) {
    std::fprintf(stderr, "[rank %d] FAIL: ncclCommDestroy\n", env.rank);
    return 1;
  }
  if (gFailures.load() != 0 || !hostOk) return 1;
  std::printf("[rank %d] OK\n", env.rank);
  return 0;
}
