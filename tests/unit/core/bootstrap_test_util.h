// Helpers for the bootstrap tests: hellos made by hand (what a rank sends the root), raw
// client sockets that play strays and attackers, and real ranks as threads of this process.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap_wire.h"
#include "core/unique_id.h"
#include "nccl.h"

namespace braid::test {

inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A PeerInfo that passes every check: rank `rank` of `nRanks`, listening (bootstrap and
// liveness) on 127.0.0.1:9.
inline PeerInfo validPeerInfo(int rank, int nRanks) {
  PeerInfo info{};
  info.rank = rank;
  info.nRanks = nRanks;
  info.pid = 4242;
  info.listen.sin.sin_family = AF_INET;
  info.listen.sin.sin_port = htons(9);
  info.listen.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  info.monitor = info.listen;
  info.libraryVersion = NCCL_VERSION_CODE;
  return info;
}

// The bytes of a root hello: Hello then PeerInfo.
inline std::vector<unsigned char> helloBytes(uint64_t secret, const PeerInfo& info, int helloRank,
                                             uint32_t kind = wire::kHelloRoot) {
  wire::Hello hello{secret, kind, helloRank};
  std::vector<unsigned char> bytes(wire::kRootHelloBytes);
  std::memcpy(bytes.data(), &hello, sizeof(hello));
  std::memcpy(bytes.data() + sizeof(hello), &info, sizeof(info));
  return bytes;
}
inline std::vector<unsigned char> helloBytes(uint64_t secret, const PeerInfo& info) {
  return helloBytes(secret, info, info.rank);
}

inline UniqueIdContent idContent(const ncclUniqueId& id) {
  UniqueIdContent c{};
  decodeUniqueId(id, "test", &c);
  return c;
}

// A blocking client connection to `addr`; -1 when it cannot connect.
inline int connectRaw(const SocketAddress& addr) {
  int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, &addr.sa, addr.length()) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline bool sendRaw(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Reads until `size` bytes, EOF or the timeout; returns what arrived.
inline std::vector<char> recvRaw(int fd, size_t size, double seconds) {
  std::vector<char> out;
  auto start = std::chrono::steady_clock::now();
  char buf[4096];
  while (out.size() < size) {
    int left = static_cast<int>((seconds - secondsSince(start)) * 1000);
    if (left <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) break;
    ssize_t n = ::recv(fd, buf, std::min(sizeof(buf), size - out.size()), 0);
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

// True when the other side closes the connection within `seconds` (bytes before it are read
// and ignored).
inline bool closedWithin(int fd, double seconds) {
  auto start = std::chrono::steady_clock::now();
  char buf[4096];
  for (;;) {
    int left = static_cast<int>((seconds - secondsSince(start)) * 1000);
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) return false;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
}

// True when the other side closes the connection within `seconds` without sending a byte:
// the root dropped it rather than answering.
inline bool droppedWithin(int fd, double seconds) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(seconds * 1000)) <= 0) return false;
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, 0);
  return n == 0 || (n < 0 && errno == ECONNRESET);  // a reset: it closed with our bytes unread
}

// The root's answer to a hello on `fd` (status -1 when none came within `seconds`).
inline wire::RootReply readReply(int fd, double seconds) {
  wire::RootReply reply{};
  reply.status = -1;
  std::vector<char> got = recvRaw(fd, sizeof(reply), seconds);
  if (got.size() == sizeof(reply)) std::memcpy(&reply, got.data(), sizeof(reply));
  reply.error[sizeof(reply.error) - 1] = '\0';
  return reply;
}

struct RankOutcome {
  ncclResult_t rc = ncclInternalError;
  double seconds = 0;   // ncclCommInitRank's duration
  std::string error;    // ncclGetLastError after a failure
};

// Real ranks as threads, each calling ncclCommInitRank(nRanks, id, rank) for its rank in
// `ranks`; returns when every one has returned (and destroyed its communicator).
inline std::vector<RankOutcome> initRanks(const ncclUniqueId& id, int nRanks, const std::vector<int>& ranks) {
  std::vector<RankOutcome> out(ranks.size());
  std::vector<ncclComm_t> comms(ranks.size(), nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      auto start = std::chrono::steady_clock::now();
      out[i].rc = ncclCommInitRank(&comms[i], nRanks, id, ranks[i]);
      out[i].seconds = secondsSince(start);
      if (out[i].rc != ncclSuccess) out[i].error = ncclGetLastError(nullptr);
    });
  for (std::thread& t : threads) t.join();
  for (ncclComm_t c : comms)
    if (c) ncclCommDestroy(c);
  return out;
}

inline std::vector<RankOutcome> initAll(const ncclUniqueId& id, int nRanks) {
  std::vector<int> ranks(nRanks);
  for (int r = 0; r < nRanks; ++r) ranks[r] = r;
  return initRanks(id, nRanks, ranks);
}

}  // namespace braid::test
