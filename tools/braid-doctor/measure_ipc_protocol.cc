#include "tools/braid-doctor/measure_ipc_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tools/braid-doctor/measure_util.h"

namespace braid::doctor::measure {

bool sendMessage(int socket, const void* data, size_t size, int fd, std::string* why) {
  iovec iov{const_cast<void*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    std::memset(control, 0, sizeof control);
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (int attempt = 0; attempt < 100; ++attempt) {  // EINTR only
    ssize_t n = sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(size)) return true;
    if (n < 0 && errno == EINTR) continue;
    *why = n < 0 ? std::string("sendmsg: ") + std::strerror(errno) : "sendmsg: short write";
    return false;
  }
  *why = "sendmsg: interrupted 100 times";
  return false;
}

bool receiveMessage(int socket, void* data, size_t size, int* fd, double deadline, std::string* why) {
  *fd = -1;
  for (;;) {
    double left = deadline - nowSeconds();
    if (left <= 0) {
      *why = "no answer before the deadline";
      return false;
    }
    pollfd p{socket, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *why = std::string("poll: ") + std::strerror(errno);
      return false;
    }
    if (r == 0) continue;  // the deadline check above ends the loop
    break;
  }
  iovec iov{data, size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
      std::memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  if (n == static_cast<ssize_t>(size) && (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0) return true;
  if (*fd >= 0) {
    close(*fd);
    *fd = -1;
  }
  *why = n < 0 ? std::string("recvmsg: ") + std::strerror(errno)
               : n == 0 ? std::string("the other process closed the socket") : std::string("recvmsg: bad message size");
  return false;
}

}  // namespace braid::doctor::measure
