// Host-memory connections between the ranks of one communicator, created on first use, each
// by the transport select.h picks for its peer (transport.h: memory within a process, shared
// memory within a host, UCX to other hosts). This class keeps the connections and runs the
// three phases; the transports make and release the ends.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "transport/transport.h"

struct ncclComm;

namespace braid {

struct HostConnection {
  void* base = nullptr;     // FifoLayout
  uint64_t posted = 0;      // sender side: slots written
  uint64_t consumed = 0;    // receiver side: slots read
};

using transport::ConnKey;

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
  const transport::HostLinkTransport& transportTo(int peer) const;

  ncclComm* comm_;
  std::map<ConnKey, HostConnection> sends_, recvs_;
  std::map<ConnKey, transport::HostSegment> recvSegments_, sendSegments_;
  std::set<ConnKey> pendingRecvs_;
};

}  // namespace braid
