#include "transport/served_link.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "transport/shared_pages.h"

namespace braid::transport {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr uint32_t kMostFrameBytes = 256u << 20;  // a post with its work: far below this
static_assert(sizeof(ServedWords) <= kPageBytes);

sockaddr_un abstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);  // sun_path[0] = 0: the abstract namespace
  *length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

}  // namespace

ncclResult_t ServedPage::create(int rank, std::unique_ptr<ServedPage>* out) {
  std::unique_ptr<ServedPage> p(new ServedPage);
  p->rank_ = rank;
  p->name_ = uniqueShmName("served", rank);
  void *host = nullptr, *dev = nullptr;
  BRAID_CHECK(mapShared("served", rank, p->name_.c_str(), kPageBytes, true, &host, &dev));
  p->named_ = true;
  p->host_ = static_cast<ServedWords*>(host);
  p->device_ = static_cast<ServedWords*>(dev);
  *out = std::move(p);
  return ncclSuccess;
}

ncclResult_t ServedPage::open(int rank, const std::string& name, std::unique_ptr<ServedPage>* out) {
  std::unique_ptr<ServedPage> p(new ServedPage);
  p->rank_ = rank;
  p->name_ = name;
  void *host = nullptr, *dev = nullptr;
  BRAID_CHECK(mapShared("served", rank, name.c_str(), kPageBytes, false, &host, &dev));
  p->host_ = static_cast<ServedWords*>(host);
  p->device_ = static_cast<ServedWords*>(dev);
  *out = std::move(p);
  return ncclSuccess;
}

void ServedPage::unlinkName() {
  if (named_) (void)shm_unlink(name_.c_str());
  named_ = false;
}

ServedPage::~ServedPage() {
  unlinkName();
  if (host_ != nullptr) (void)unmapShared("served", rank_, const_cast<ServedWords*>(host_), kPageBytes);
}

ncclResult_t listenServed(int rank, const std::string& name, int* fd) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return fail(ncclSystemError, "served: rank %d: socket(AF_UNIX): %s", rank, std::strerror(errno));
  socklen_t len = 0;
  sockaddr_un a = abstractAddress(name, &len);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(s, 64) != 0) {
    const int err = errno;
    (void)::close(s);
    return fail(ncclSystemError, "served: rank %d: listening on the Unix socket @%s: %s", rank, name.c_str(),
                std::strerror(err));
  }
  *fd = s;
  return ncclSuccess;
}

ncclResult_t connectServed(int rank, const std::string& name, Deadline deadline, const std::atomic<bool>* abort, int* fd) {
  socklen_t len = 0;
  sockaddr_un a = abstractAddress(name, &len);
  int lastErr = 0;
  for (;;) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return fail(ncclSystemError, "served: rank %d: socket(AF_UNIX): %s", rank, std::strerror(errno));
    if (connect(s, reinterpret_cast<sockaddr*>(&a), len) == 0) {
      *fd = s;
      return ncclSuccess;
    }
    lastErr = errno;
    (void)::close(s);
    if (abort != nullptr && abort->load())
      return fail(ncclInvalidUsage, "served: rank %d: aborted while connecting to the leader's socket @%s", rank, name.c_str());
    if (Clock::now() > deadline)
      return fail(ncclSystemError,
                  "served: rank %d: cannot reach the process that runs this GPU's kernels (Unix socket @%s: %s). It "
                  "must be on this host and in this network namespace. Fix: start MPS, or set BRAID_SERVED=0",
                  rank, name.c_str(), std::strerror(lastErr));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

namespace {
// The socket helpers' verdict (core/socket.h) in words.
bool ok(ncclResult_t rc, std::string* error) {
  if (rc == ncclSuccess) return true;
  *error = rc == ncclRemoteError  ? "the other process closed the connection"
           : rc == ncclInProgress ? "no message in time"
           : rc == ncclInvalidUsage ? "aborted"
                                    : lastError();
  return false;
}
}  // namespace

bool sendFrame(int fd, const std::vector<unsigned char>& bytes, Deadline deadline, std::string* error) {
  const uint32_t n = uint32_t(bytes.size());
  return ok(sendAll(fd, &n, sizeof(n), deadline, nullptr), error) &&
         ok(sendAll(fd, bytes.data(), bytes.size(), deadline, nullptr), error);
}

bool recvFrame(int fd, std::vector<unsigned char>* bytes, Deadline deadline, std::string* error) {
  uint32_t n = 0;
  if (!ok(recvAll(fd, &n, sizeof(n), deadline, nullptr), error)) return false;
  if (n > kMostFrameBytes) {
    *error = "a frame of " + std::to_string(n) + " bytes, more than any post";
    return false;
  }
  bytes->resize(n);
  return ok(recvAll(fd, bytes->data(), n, deadline, nullptr), error);
}

}  // namespace braid::transport
