// A device launch that repeats exactly -- the same collectives, counts, types, ops, roots,
// buffers and stream (a training loop's buckets, nccl-tests' iterations) -- enqueues the
// kernels packed the first time instead of tuning, planning and packing again. On the H200
// machine's host those took ~5 us of a 2-rank 8-byte all-reduce's ~14 us, more than the GPU's
// whole share (perf/NOTES.md, session 14).
//
// A packed launch depends only on what the key holds and on the communicator's connections,
// which live as long as it does: its blob names buffers and FIFO ends by address, and the
// connections' positions live in device memory, not in the blob. Launches that also depend on
// something else are never kept (the caller says which: scratch copies, served ranks, several
// streams), nor are user-made ops (an op handle may be destroyed and made again with another
// scalar).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "api/task.h"
#include "kernels/pack.h"

namespace braid::api {

class LaunchReplay {
 public:
  // What makes two launches the same: per task, in order.
  struct TaskKey {
    uint8_t coll = 0;
    uint8_t isSend = 0;
    int32_t type = 0;
    int32_t op = 0;
    int32_t root = 0;
    uint64_t count = 0;
    const void* sendbuff = nullptr;
    const void* recvbuff = nullptr;
    bool operator==(const TaskKey&) const = default;
  };
  struct Key {
    cudaStream_t stream = nullptr;
    std::vector<TaskKey> tasks;
    bool operator==(const Key&) const = default;
  };
  // What a replay enqueues: the launch's settings (device, stream, words, thread count; no ops,
  // lanes or connections) and its packed kernels.
  struct Entry {
    Key key;
    kernels::Launch settings;
    kernels::PackedLaunch packed;
    uint64_t lastUse = 0;
  };

  explicit LaunchReplay(size_t maxEntries = 64) : maxEntries_(maxEntries) {}

  // The key of one communicator's tasks of a group, or nothing when such a launch is never kept:
  // a user-made op, tasks on several streams, no task.
  static std::optional<Key> keyOf(std::span<const Task* const> tasks);

  // The entry kept for `key`, or null. Not thread-safe: the caller holds the communicator.
  const Entry* find(const Key& key);
  // Keeps a launch (its settings without ops, lanes and connections), the oldest going first
  // when full.
  void keep(Key key, const kernels::Launch& launch, kernels::PackedLaunch packed);
  size_t size() const { return entries_.size(); }
  uint64_t hits() const { return hits_; }

 private:
  size_t maxEntries_;
  std::vector<Entry> entries_;
  uint64_t tick_ = 0, hits_ = 0;
};

}  // namespace braid::api
