#include "core/bootstrap_wire.h"

#include <sys/socket.h>

#include <cstring>

#include "nccl.h"

namespace braid::wire {
namespace {

template <size_t N>
bool terminated(const char (&text)[N]) {
  return std::memchr(text, '\0', N) != nullptr;
}

std::string number(long long v) { return std::to_string(v); }

}  // namespace

std::string peerInfoProblem(const PeerInfo& info, int expectedRanks) {
  if (info.nRanks < 1 || info.nRanks > kMaxRanks)
    return "nranks " + number(info.nRanks) + " is outside 1.." + number(kMaxRanks);
  if (expectedRanks > 0 && info.nRanks != expectedRanks)
    return "nranks " + number(info.nRanks) + " differs from the " + number(expectedRanks) + " expected";
  if (info.rank < 0 || info.rank >= info.nRanks)
    return "rank " + number(info.rank) + " is outside 0.." + number(info.nRanks - 1);
  if (info.cudaDev < -1) return "cudaDev " + number(info.cudaDev) + " is below -1";
  if (info.pid < 0) return "pid " + number(info.pid) + " is negative";
  if (info.initTimeoutMs < 0) return "init timeout " + number(info.initTimeoutMs) + " ms is negative";
  if (!terminated(info.busId)) return "the bus id is not NUL-terminated";
  for (const auto& [a, what] : {std::pair{&info.listen, "listen"}, std::pair{&info.monitor, "liveness"}}) {
    if (a->sa.sa_family != AF_INET && a->sa.sa_family != AF_INET6)
      return std::string("the ") + what + " address has family " + number(a->sa.sa_family) + ", neither IPv4 nor IPv6";
    if ((a->sa.sa_family == AF_INET ? a->sin.sin_port : a->sin6.sin6_port) == 0)
      return std::string("the ") + what + " address has port 0";
  }
  return "";
}

RootHello parseRootHello(const void* bytes, size_t size, uint64_t secret) {
  RootHello out;
  if (size < sizeof(Hello)) {
    out.problem = "only " + number(static_cast<long long>(size)) + " bytes of a hello";
    return out;
  }
  Hello hello;
  std::memcpy(&hello, bytes, sizeof(hello));
  if (hello.secret != secret) {
    out.fault = HelloFault::kWrongSecret;
    out.problem = "not this unique id's secret";
    return out;
  }
  if (hello.kind != kHelloRoot) {
    out.fault = HelloFault::kWrongKind;
    out.problem = "a hello of kind " + number(hello.kind) + ", not a rank reporting to the root";
    return out;
  }
  out.authenticated = true;
  if (size < kRootHelloBytes) {
    out.problem = "only " + number(static_cast<long long>(size)) + " of the " +
                  number(static_cast<long long>(kRootHelloBytes)) + " bytes of a hello";
    return out;
  }
  PeerInfo info;
  std::memcpy(&info, static_cast<const char*>(bytes) + sizeof(Hello), sizeof(info));
  std::string problem = peerInfoProblem(info, 0);
  if (problem.empty() && hello.rank != info.rank)
    problem = "the hello says rank " + number(hello.rank) + " but its PeerInfo says rank " + number(info.rank);
  if (!problem.empty()) {
    out.fault = HelloFault::kBadPeerInfo;
    out.problem = std::move(problem);
    return out;
  }
  out.fault = HelloFault::kNone;
  out.info = info;
  return out;
}

std::string rootReplyProblem(const RootReply& reply, int nRanks) {
  if (reply.status < ncclSuccess || reply.status >= ncclNumResults)
    return "status " + number(reply.status) + " is not an ncclResult_t";
  if (reply.status != ncclSuccess) return terminated(reply.error) ? "" : "its error text is not NUL-terminated";
  if (reply.nRanks != nRanks)
    return "a table of " + number(reply.nRanks) + " ranks for a communicator of " + number(nRanks);
  return "";
}

std::string peerTableProblem(const std::vector<PeerInfo>& peers, int nRanks) {
  if (static_cast<long long>(peers.size()) != nRanks)
    return "a table of " + number(static_cast<long long>(peers.size())) + " ranks for " + number(nRanks);
  for (size_t i = 0; i < peers.size(); ++i) {
    std::string problem = peerInfoProblem(peers[i], nRanks);
    if (problem.empty() && peers[i].rank != static_cast<int>(i))
      problem = "it claims rank " + number(peers[i].rank);
    if (!problem.empty()) return "entry " + number(static_cast<long long>(i)) + ": " + problem;
  }
  return "";
}

}  // namespace braid::wire
