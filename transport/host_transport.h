// Host-memory connections between the ranks of one communicator, created on first use.
// Same process: plain memory. Same host: a POSIX shared-memory segment created by the
// receiver and unlinked as soon as the sender has mapped it, so that nothing is left in
// /dev/shm when a process dies. Other hosts: each end has a FIFO in its own memory, and the
// communicator's UCX proxy (transport/ucx_net.h) moves the slots between them.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "nccl.h"

struct ncclComm;

namespace braid {

struct HostConnection {
  void* base = nullptr;     // FifoLayout
  uint64_t posted = 0;      // sender side: slots written
  uint64_t consumed = 0;    // receiver side: slots read
};

// (channel, peer) for one direction.
using ConnKey = std::pair<int, int>;

class HostTransport {
 public:
  explicit HostTransport(ncclComm* comm) : comm_(comm) {}
  ~HostTransport();

  // Connection setup happens in three phases so that ranks handled by one thread (several
  // communicators in a group) never wait on each other: phase 1 never blocks.
  ncclResult_t offerReceivers(const std::set<ConnKey>& recvs);   // create + tell the senders
  ncclResult_t attachSenders(const std::set<ConnKey>& sends);    // map + acknowledge
  ncclResult_t finishReceivers(const std::set<ConnKey>& recvs);  // wait for acks, unlink
  // After a phase failed (a peer died, an abort): removes every segment name of these
  // connections that may still exist, ours and the peers' (the names are derived, so a
  // survivor can remove what a dead peer made).
  void abandonSetup(const std::set<ConnKey>& recvs, const std::set<ConnKey>& sends);

  HostConnection* sendConn(int channel, int peer);
  HostConnection* recvConn(int channel, int peer);
  void close(bool abort);

 private:
  struct Segment {
    void* base = nullptr;
    bool ownedHeap = false;  // allocated here: for a same-process peer, or either end of a network link
    std::string shmName;     // still linked until the sender acknowledged
  };
  // One end of a connection to another host: a FIFO of its own, handed to the UCX proxy.
  ncclResult_t attachNetwork(const ConnKey& key, bool send);

  ncclComm* comm_;
  std::map<ConnKey, HostConnection> sends_, recvs_;
  std::map<ConnKey, Segment> recvSegments_, sendSegments_;
  std::set<ConnKey> pendingRecvs_;
};

}  // namespace braid
