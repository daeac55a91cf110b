#include "core/root.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap_wire.h"
#include "core/env.h"
#include "core/log.h"

namespace braid {
namespace {

struct Member {
  int fd = -1;
  PeerInfo info;
};

void replyError(std::vector<Member>& members, ncclResult_t status, const std::string& text, Deadline deadline) {
  wire::RootReply reply{};
  reply.status = status;
  std::snprintf(reply.error, sizeof(reply.error), "%s", text.c_str());
  for (auto& m : members) {
    if (m.fd < 0) continue;
    sendAll(m.fd, &reply, sizeof(reply), deadline, nullptr);  // best effort: the rank may be gone
    closeFd(m.fd);
  }
}

std::string missingRanks(const std::vector<Member>& byRank) {
  std::string list;
  int shown = 0, missing = 0;
  for (size_t r = 0; r < byRank.size(); ++r) {
    if (byRank[r].fd >= 0) continue;
    ++missing;
    if (shown++ < 16) list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  if (missing > shown) list += ", ... (" + std::to_string(missing) + " in all)";
  return list;
}

// Serves one communicator's rendezvous, then exits.
void rootThread(int listenFd, uint64_t secret) {
  std::vector<Member> byRank;
  std::vector<Member> all;  // every accepted member, for error replies before nRanks is known
  int nRanks = -1, arrived = 0;
  double timeoutSeconds = env::initTimeoutSeconds();
  Deadline deadline = Deadline::max();  // starts at the first hello: the id may wait long for its ranks
  std::string error;
  ncclResult_t status = ncclSuccess;
  while (nRanks < 0 || arrived < nRanks) {
    int fd = -1;
    ncclResult_t rc = acceptBefore(listenFd, deadline, nullptr, &fd);
    if (rc == ncclInProgress) {
      status = ncclRemoteError;
      char secs[32];
      std::snprintf(secs, sizeof(secs), "%.0f", timeoutSeconds);
      error = std::string("bootstrap root: timed out after ") + secs + " s waiting for " +
              std::to_string(nRanks - arrived) + " of " + std::to_string(nRanks) + " ranks; missing rank(s): " +
              missingRanks(byRank) +
              ". Fix: check that every rank calls ncclCommInitRank with this id and that it did not die "
              "(BRAID_INIT_TIMEOUT sets the limit).";
      break;
    }
    if (rc != ncclSuccess) { status = rc; error = "bootstrap root: accept failed"; break; }
    wire::Hello hello{};
    PeerInfo info;
    Deadline helloDeadline = deadlineIn(5.0);
    if (recvAll(fd, &hello, sizeof(hello), helloDeadline, nullptr) != ncclSuccess || hello.secret != secret ||
        hello.kind != wire::kHelloRoot) {
      BRAID_WARN("bootstrap root: dropped a connection that did not present this unique id's secret "
                 "(a stray client, or a rank using another ncclUniqueId)");
      closeFd(fd);
      continue;
    }
    if (recvAll(fd, &info, sizeof(info), helloDeadline, nullptr) != ncclSuccess) { closeFd(fd); continue; }
    if (nRanks < 0) {
      nRanks = info.nRanks;
      byRank.resize(std::max(nRanks, 0));
      // The ranks' timeout, not the root process's: the root may live in a launcher.
      timeoutSeconds = info.initTimeoutMs > 0 ? info.initTimeoutMs / 1000.0 : env::initTimeoutSeconds();
      deadline = deadlineIn(timeoutSeconds);
    }
    all.push_back({fd, info});
    if (info.nRanks != nRanks) {
      status = ncclInvalidUsage;
      error = "bootstrap root: rank " + std::to_string(info.rank) + " called ncclCommInitRank with nranks=" +
              std::to_string(info.nRanks) + " but another rank used nranks=" + std::to_string(nRanks) +
              ". Fix: pass the same nranks on every rank.";
      break;
    }
    if (info.rank < 0 || info.rank >= nRanks || byRank[info.rank].fd >= 0) {
      status = ncclInvalidUsage;
      error = "bootstrap root: two ranks both claim rank " + std::to_string(info.rank) + " of " +
              std::to_string(nRanks) + ". Fix: give each process a distinct rank in 0..nranks-1.";
      break;
    }
    byRank[info.rank] = {fd, info};
    ++arrived;
  }
  Deadline replyDeadline = deadlineIn(10.0);
  if (status != ncclSuccess) {
    BRAID_WARN("%s", error.c_str());
    replyError(all, status, error, replyDeadline);
  } else {
    std::vector<PeerInfo> table(nRanks);
    for (int r = 0; r < nRanks; ++r) table[r] = byRank[r].info;
    wire::RootReply reply{};
    reply.status = ncclSuccess;
    reply.nRanks = nRanks;
    for (auto& m : byRank) {
      if (sendAll(m.fd, &reply, sizeof(reply), replyDeadline, nullptr) == ncclSuccess)
        sendAll(m.fd, table.data(), table.size() * sizeof(PeerInfo), replyDeadline, nullptr);
      closeFd(m.fd);
    }
  }
  close(listenFd);
}

}  // namespace

ncclResult_t startRoot(const SocketAddress* fixed, uint64_t secret, UniqueIdContent* content) {
  SocketAddress addr{};
  if (fixed) {
    addr = *fixed;
  } else {
    BRAID_CHECK(findBootstrapAddress(&addr, nullptr));
    if (addr.sa.sa_family == AF_INET) addr.sin.sin_port = 0;
    else addr.sin6.sin6_port = 0;
  }
  int fd = -1;
  BRAID_CHECK(listenOn(&addr, &fd));
  std::memset(content, 0, sizeof(*content));
  content->secret = secret;
  content->root = addr;
  try {
    std::thread(rootThread, fd, secret).detach();
  } catch (const std::exception& e) {
    close(fd);
    return fail(ncclSystemError, "bootstrap: cannot start the root thread: %s", e.what());
  }
  BRAID_INFO(kBootstrap, "bootstrap root listening on %s", addr.toString().c_str());
  return ncclSuccess;
}

}  // namespace braid
