// TCP sockets for the bootstrap: addresses, interface selection, and blocking I/O with a
// deadline and an abort flag, so that no bootstrap wait is unbounded.
#pragma once
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "nccl.h"

namespace braid {

// An IPv4 or IPv6 socket address that fits in a fixed-size, trivially copyable struct.
struct SocketAddress {
  union {
    sockaddr sa;
    sockaddr_in sin;
    sockaddr_in6 sin6;
  };
  socklen_t length() const { return sa.sa_family == AF_INET6 ? sizeof(sin6) : sizeof(sin); }
  std::string toString() const;
};
static_assert(sizeof(SocketAddress) == 28);

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
inline Deadline deadlineIn(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

// The address of the interface braid uses: NCCL_SOCKET_IFNAME (prefix list, `^` excludes,
// `=` exact names), else the first non-loopback, non-docker interface, else loopback.
ncclResult_t findBootstrapAddress(SocketAddress* out, std::string* ifName);
// "host:port", "[v6addr]:port" or "ipv4:port" (NCCL_COMM_ID).
ncclResult_t parseHostPort(const char* text, SocketAddress* out);
// Matches an interface name against an NCCL_SOCKET_IFNAME-style list.
bool interfaceMatches(const std::string& name, const std::string& list);

// A listening socket on `addr` (port 0 = ephemeral); the bound address is written back.
ncclResult_t listenOn(SocketAddress* addr, int* fd);
// Every wait below ends early when `abortFlag` is set (ncclInvalidUsage), or with
// ncclRemoteError when `peerState` (the liveness monitor's PeerState of the peer waited for)
// says it is gone: at once when it died (2), after a grace of a second when it left (1), to
// take what it sent before its goodbye, which may overtake its last bytes. Either may be null.
// Connects, retrying refused connections until the deadline.
ncclResult_t connectTo(const SocketAddress& addr, Deadline deadline, const std::atomic<bool>* abortFlag,
                       int* fd, const std::atomic<uint8_t>* peerState = nullptr);
// Accepts one connection, or fails at the deadline. Returns ncclInProgress on timeout.
ncclResult_t acceptBefore(int listenFd, Deadline deadline, const std::atomic<bool>* abortFlag, int* fd,
                          const std::atomic<uint8_t>* peerState = nullptr);
// Sends/receives exactly `size` bytes. A closed peer gives ncclRemoteError, the deadline
// ncclInProgress (the caller names what it was waiting for), abort ncclInvalidUsage.
ncclResult_t sendAll(int fd, const void* data, size_t size, Deadline deadline, const std::atomic<bool>* abortFlag,
                     const std::atomic<uint8_t>* peerState = nullptr);
ncclResult_t recvAll(int fd, void* data, size_t size, Deadline deadline, const std::atomic<bool>* abortFlag,
                     const std::atomic<uint8_t>* peerState = nullptr);
void closeFd(int& fd);

}  // namespace braid
