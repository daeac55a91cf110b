// The served ranks' socket (transport/served_link.h), on real Unix sockets: frames go through
// whole, in order, of any size up to the limit; a closed or silent peer and a malformed length
// are reported, not waited for; connecting to nobody fails within its deadline, saying why.
#include "transport/served_link.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "core/log.h"

namespace braid::transport {
namespace {

std::string uniqueName() {
  return "braid-served-test-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}());
}

// A listening socket and one accepted connection to it.
struct Pair {
  int listenFd = -1, client = -1, server = -1;
  explicit Pair(const std::string& name) {
    EXPECT_EQ(listenServed(0, name, &listenFd), ncclSuccess) << lastError();
    std::atomic<bool> abort{false};
    EXPECT_EQ(connectServed(1, name, deadlineIn(5), &abort, &client), ncclSuccess) << lastError();
    pollfd p{listenFd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 5000), 1);
    server = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_GE(server, 0);
  }
  ~Pair() {
    for (int fd : {listenFd, client, server})
      if (fd >= 0) ::close(fd);
  }
};

TEST(ServedLink, FramesArriveWholeAndInOrder) {
  Pair p(uniqueName());
  std::vector<unsigned char> big(3 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(i * 7 + 3);
  std::string why;
  std::thread sender([&] {
    EXPECT_TRUE(sendFrame(p.client, {}, deadlineIn(10), &why));
    EXPECT_TRUE(sendFrame(p.client, big, deadlineIn(10), &why));
    EXPECT_TRUE(sendFrame(p.client, {42}, deadlineIn(10), &why));
  });
  std::vector<unsigned char> got;
  std::string rwhy;
  ASSERT_TRUE(recvFrame(p.server, &got, deadlineIn(10), &rwhy)) << rwhy;
  EXPECT_TRUE(got.empty());
  ASSERT_TRUE(recvFrame(p.server, &got, deadlineIn(10), &rwhy)) << rwhy;
  EXPECT_EQ(got, big);
  ASSERT_TRUE(recvFrame(p.server, &got, deadlineIn(10), &rwhy)) << rwhy;
  EXPECT_EQ(got, std::vector<unsigned char>{42});
  sender.join();
}

TEST(ServedLink, ClosedSilentAndOversizedPeersAreReported) {
  {
    Pair p(uniqueName());
    std::vector<unsigned char> got;
    std::string why;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(recvFrame(p.server, &got, deadlineIn(0.3), &why));
    EXPECT_NE(why.find("no message in time"), std::string::npos) << why;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    const uint32_t huge = 1u << 30;  // a length no post has
    ASSERT_EQ(::send(p.client, &huge, sizeof(huge), MSG_NOSIGNAL), ssize_t(sizeof(huge)));
    EXPECT_FALSE(recvFrame(p.server, &got, deadlineIn(5), &why));
    EXPECT_NE(why.find("more than any post"), std::string::npos) << why;
    ::close(p.client);
    p.client = -1;
    EXPECT_FALSE(recvFrame(p.server, &got, deadlineIn(5), &why));
    EXPECT_FALSE(why.empty());
    EXPECT_FALSE(sendFrame(p.server, {1, 2, 3}, deadlineIn(5), &why));  // no SIGPIPE: an error
  }
}

TEST(ServedLink, ConnectingToNobodyFailsInTimeAndSaysWhy) {
  std::atomic<bool> abort{false};
  int fd = -1;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(connectServed(3, uniqueName(), deadlineIn(0.2), &abort, &fd), ncclSystemError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  const std::string text = lastError();
  EXPECT_NE(text.find("rank 3"), std::string::npos) << text;
  EXPECT_NE(text.find("BRAID_SERVED=0"), std::string::npos) << text;
  abort = true;
  EXPECT_EQ(connectServed(3, uniqueName(), deadlineIn(10), &abort, &fd), ncclInvalidUsage);  // aborted: at once
}

}  // namespace
}  // namespace braid::transport
