#include "core/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/log.h"

namespace braid {

std::string SocketAddress::toString() const {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (sa.sa_family == AF_INET) {
    inet_ntop(AF_INET, &sin.sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(sin.sin_port));
  }
  if (sa.sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &sin6.sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(sin6.sin6_port));
  }
  return "<no address>";
}

bool interfaceMatches(const std::string& name, const std::string& listIn) {
  std::string list = listIn;
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') { exclude = true; list.erase(0, 1); }
  if (!list.empty() && list[0] == '=') { exact = true; list.erase(0, 1); }
  bool hit = false;
  size_t pos = 0;
  while (pos <= list.size() && !hit) {
    size_t comma = list.find(',', pos);
    std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (size_t colon = tok.find(':'); colon != std::string::npos) tok.resize(colon);  // ":port" suffix
    if (!tok.empty()) hit = exact ? name == tok : name.compare(0, tok.size(), tok) == 0;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return exclude ? !hit : hit;
}

ncclResult_t findBootstrapAddress(SocketAddress* out, std::string* ifName) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return fail(ncclSystemError, "bootstrap: getifaddrs failed: %s", std::strerror(errno));
  const char* userList = env::get("NCCL_SOCKET_IFNAME");
  int family = 0;
  if (const char* f = env::get("NCCL_SOCKET_FAMILY")) family = std::strcmp(f, "AF_INET6") == 0 ? AF_INET6 : AF_INET;
  // Preference passes when the user gave no list: real interfaces, then docker, then loopback.
  const char* passes[] = {"^docker,lo,virbr", "docker", "lo", "virbr"};
  bool found = false;
  for (int pass = 0; pass < (userList ? 1 : 4) && !found; ++pass) {
    std::string filter = userList ? userList : passes[pass];
    for (ifaddrs* it = list; it && !found; it = it->ifa_next) {
      if (!it->ifa_addr || !(it->ifa_flags & IFF_UP)) continue;
      int fam = it->ifa_addr->sa_family;
      if (fam != AF_INET && fam != AF_INET6) continue;
      if (family && fam != family) continue;
      if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr)) continue;
      if (!interfaceMatches(it->ifa_name, filter)) continue;
      std::memset(out, 0, sizeof(*out));
      std::memcpy(&out->sa, it->ifa_addr, fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
      if (ifName) *ifName = it->ifa_name;
      found = true;
    }
  }
  freeifaddrs(list);
  if (!found)
    return fail(ncclSystemError,
                "bootstrap: no usable network interface%s%s. Fix: set NCCL_SOCKET_IFNAME to an interface "
                "that is up (see `ip addr`).",
                userList ? " matches NCCL_SOCKET_IFNAME=" : "", userList ? userList : "");
  return ncclSuccess;
}

ncclResult_t parseHostPort(const char* text, SocketAddress* out) {
  std::string s(text);
  std::string host, port;
  if (!s.empty() && s[0] == '[') {
    size_t close = s.find(']');
    if (close == std::string::npos || close + 1 >= s.size() || s[close + 1] != ':')
      return fail(ncclInvalidArgument, "NCCL_COMM_ID='%s' is not [ipv6]:port", text);
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return fail(ncclInvalidArgument, "NCCL_COMM_ID='%s' is not host:port. Fix: e.g. NCCL_COMM_ID=10.0.0.1:29500",
                  text);
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p <= 0 || p > 65535)
    return fail(ncclInvalidArgument, "NCCL_COMM_ID='%s': port '%s' is not in 1..65535", text, port.c_str());
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || !res)
    return fail(ncclInvalidArgument, "NCCL_COMM_ID='%s': cannot resolve host '%s': %s", text, host.c_str(),
                gai_strerror(rc));
  std::memset(out, 0, sizeof(*out));
  std::memcpy(&out->sa, res->ai_addr, std::min<size_t>(res->ai_addrlen, sizeof(sockaddr_in6)));
  freeaddrinfo(res);
  if (out->sa.sa_family == AF_INET) out->sin.sin_port = htons(static_cast<uint16_t>(p));
  else out->sin6.sin6_port = htons(static_cast<uint16_t>(p));
  return ncclSuccess;
}

ncclResult_t listenOn(SocketAddress* addr, int* fd) {
  int s = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(ncclSystemError, "bootstrap: socket() failed: %s", std::strerror(errno));
  int one = 1;
  if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
    close(s);
    return fail(ncclSystemError, "bootstrap: setsockopt(SO_REUSEADDR) failed: %s", std::strerror(errno));
  }
  if (bind(s, &addr->sa, addr->length()) != 0 || listen(s, 1024) != 0) {
    int err = errno;
    close(s);
    return fail(ncclSystemError, "bootstrap: cannot listen on %s: %s", addr->toString().c_str(), std::strerror(err));
  }
  socklen_t len = sizeof(sockaddr_in6);
  if (getsockname(s, &addr->sa, &len) != 0) {
    close(s);
    return fail(ncclSystemError, "bootstrap: getsockname failed: %s", std::strerror(errno));
  }
  *fd = s;
  return ncclSuccess;
}

namespace {

// Waits until fd is ready for `events`, the deadline passes, or abort is set (checked every
// 50 ms). What a lost peer sent before it went is still taken: a wait for a peer that died ends
// once nothing is ready; for one that left, kLeftGrace later (its goodbye may overtake its last
// bytes on another connection).
constexpr auto kLeftGrace = std::chrono::seconds(1);
constexpr uint8_t kPeerLeft = 1, kPeerDied = 2;  // core/liveness.h's PeerState
ncclResult_t waitReady(int fd, short events, Deadline deadline, const std::atomic<bool>* abortFlag,
                       const std::atomic<uint8_t>* peerState) {
  Deadline lostBy = Deadline::max();
  for (bool first = true;; first = false) {
    if (abortFlag && abortFlag->load(std::memory_order_relaxed)) return ncclInvalidUsage;
    uint8_t state = peerState ? peerState->load(std::memory_order_acquire) : 0;
    if (state == kPeerDied && !first) return ncclRemoteError;  // the poll before found nothing
    if (state == kPeerLeft && lostBy == Deadline::max()) lostBy = Clock::now() + kLeftGrace;
    auto now = Clock::now();
    if (now >= lostBy) return ncclRemoteError;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(std::min(deadline, lostBy) - now).count();
    if (left <= 0 && now >= deadline) return ncclInProgress;
    pollfd p{fd, events, 0};
    int wait = state == kPeerDied ? 0 : static_cast<int>(std::clamp<int64_t>(left, 0, 50));
    int rc = poll(&p, 1, wait);
    if (rc > 0) return ncclSuccess;
    if (rc < 0 && errno != EINTR) return fail(ncclSystemError, "bootstrap: poll failed: %s", std::strerror(errno));
  }
}

void tuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // best effort: only latency
}

}  // namespace

ncclResult_t connectTo(const SocketAddress& addr, Deadline deadline, const std::atomic<bool>* abortFlag, int* fd,
                       const std::atomic<uint8_t>* peerState) {
  for (int attempt = 0;; ++attempt) {
    int s = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return fail(ncclSystemError, "bootstrap: socket() failed: %s", std::strerror(errno));
    int rc = connect(s, &addr.sa, addr.length());
    if (rc != 0 && errno == EINPROGRESS) {
      ncclResult_t w = waitReady(s, POLLOUT, deadline, abortFlag, peerState);
      if (w != ncclSuccess) { close(s); return w; }
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err ? -1 : 0;
      errno = err;
    }
    if (rc == 0) {
      int flags = fcntl(s, F_GETFL);
      if (flags < 0 || fcntl(s, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        close(s);
        return fail(ncclSystemError, "bootstrap: fcntl failed: %s", std::strerror(errno));
      }
      tuneSocket(s);
      *fd = s;
      return ncclSuccess;
    }
    int err = errno;
    close(s);
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN && err != ECONNRESET)
      return fail(ncclSystemError, "bootstrap: connect to %s failed: %s", addr.toString().c_str(), std::strerror(err));
    if (abortFlag && abortFlag->load()) return ncclInvalidUsage;
    if (peerState && peerState->load()) return ncclRemoteError;  // its listener is closed: nothing to take
    if (Clock::now() >= deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, 5 + attempt * 5)));
  }
}

ncclResult_t acceptBefore(int listenFd, Deadline deadline, const std::atomic<bool>* abortFlag, int* fd,
                          const std::atomic<uint8_t>* peerState) {
  for (;;) {
    ncclResult_t w = waitReady(listenFd, POLLIN, deadline, abortFlag, peerState);
    if (w != ncclSuccess) return w;
    int s = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (s >= 0) {
      tuneSocket(s);
      *fd = s;
      return ncclSuccess;
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
      return fail(ncclSystemError, "bootstrap: accept failed: %s", std::strerror(errno));
  }
}

ncclResult_t sendAll(int fd, const void* data, size_t size, Deadline deadline, const std::atomic<bool>* abortFlag,
                     const std::atomic<uint8_t>* peerState) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ncclResult_t w = waitReady(fd, POLLOUT, deadline, abortFlag, peerState);
    if (w != ncclSuccess) return w;
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == EPIPE || errno == ECONNRESET) return ncclRemoteError;
      return fail(ncclSystemError, "bootstrap: send failed: %s", std::strerror(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return ncclSuccess;
}

ncclResult_t recvAll(int fd, void* data, size_t size, Deadline deadline, const std::atomic<bool>* abortFlag,
                     const std::atomic<uint8_t>* peerState) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ncclResult_t w = waitReady(fd, POLLIN, deadline, abortFlag, peerState);
    if (w != ncclSuccess) return w;
    ssize_t n = ::recv(fd, p, size, MSG_DONTWAIT);
    if (n == 0) return ncclRemoteError;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      // The peer is gone or unreachable (keepalive timed out): the caller says so; errno stays.
      if (errno == ECONNRESET || errno == ETIMEDOUT || errno == EHOSTUNREACH || errno == ENETUNREACH) return ncclRemoteError;
      return fail(ncclSystemError, "bootstrap: recv failed: %s", std::strerror(errno));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return ncclSuccess;
}

void closeFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace braid
