// What joins a rank that another process serves (its GPU is shared with other processes and
// MPS is off: src/api/served.h) to that leader process: a page of control words in pinned
// shared host memory, and a Unix stream socket for the work.
//
// The words live in host memory that both processes map and CUDA maps for their streams, so
// that the host can always write them: an abort, a dead peer or a teardown releases every stream
// that waits on them, whatever the GPU is doing.
//
// The socket has an abstract name (no file to clean up; it is local to the network namespace,
// which is what "one host" means for braid's tests too). Frames are a 32-bit length, then bytes.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/socket.h"
#include "nccl.h"

namespace braid::transport {

// One served rank's words. Sequence numbers count that rank's posts from 1 and compare
// cyclically (streamWaitAtLeast), so they may wrap.
struct ServedWords {
  alignas(64) uint32_t ready;  // the served rank's stream: its inputs for post `ready` are ready
  // The served rank's stream, with `ready` (one 64-bit write where the driver has it: a stream
  // operation in a served rank's context costs a context switch without MPS): the last
  // collective number its posts so far hold (mod 2^32). The leader's stream waits on it before
  // the leader's own kernels of a collective (ServedLeader::gate), so that no leader kernel spins
  // while this rank's context has yet to run its `ready` write: the GPU would switch to that
  // context only after a time slice (~1-2 ms) without MPS.
  uint32_t readyColl;
  alignas(64) uint32_t done;   // the leader's stream: post `done`'s outputs are written
  alignas(64) uint32_t abort;  // nonzero: the kernels run for this rank return at once
  uint32_t error;              // what those kernels reported (kernels::DeviceError), or a leader's failure
  // The served rank's host: the last post it made. Whoever releases the streams writes `done`
  // (or `ready`) from the host, and a stream may still write an older value after it; so the
  // leader, once its stream for this rank has drained, writes done = posted again.
  alignas(64) uint32_t posted;
};
static_assert(offsetof(ServedWords, readyColl) == offsetof(ServedWords, ready) + 4 && offsetof(ServedWords, ready) % 8 == 0,
              "ready and readyColl form one 64-bit word, low half first");

class ServedPage {
 public:
  // Made by the served rank (named; the name goes once the leader has mapped it) or mapped by
  // the leader from that name.
  static ncclResult_t create(int rank, std::unique_ptr<ServedPage>* out);
  static ncclResult_t open(int rank, const std::string& name, std::unique_ptr<ServedPage>* out);
  ~ServedPage();
  ServedPage(const ServedPage&) = delete;
  ServedPage& operator=(const ServedPage&) = delete;

  volatile ServedWords* host() const { return host_; }  // this process's host address
  ServedWords* device() const { return device_; }       // the streams' and kernels' address
  const std::string& name() const { return name_; }
  void unlinkName();  // once the peer has it mapped

 private:
  ServedPage() = default;
  int rank_ = -1;
  ServedWords* host_ = nullptr;
  ServedWords* device_ = nullptr;
  std::string name_;
  bool named_ = false;  // this process made the name and has not unlinked it
};

// The leader's socket: listening under `name`, non-blocking accept.
ncclResult_t listenServed(int rank, const std::string& name, int* fd);
// Connects to the leader's socket, retrying until `deadline` (the leader may still be in init)
// or until *abort.
ncclResult_t connectServed(int rank, const std::string& name, Deadline deadline, const std::atomic<bool>* abort, int* fd);
// A frame: its 32-bit length, then its bytes (core/socket.h's sendAll/recvAll). False (and
// `error` says why) when the other side is gone, the deadline passed, or the frame is malformed.
bool sendFrame(int fd, const std::vector<unsigned char>& bytes, Deadline deadline, std::string* error);
bool recvFrame(int fd, std::vector<unsigned char>* bytes, Deadline deadline, std::string* error);

}  // namespace braid::transport
