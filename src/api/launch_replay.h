// A device launch that repeats -- the same collectives, counts, types, ops, roots and stream,
// its buffers perhaps elsewhere (a training loop's buckets; nccl-tests, which moves its buffers
// through a larger allocation from call to call) -- enqueues the kernels packed the first time,
// with the call's buffers written into their buffer table, instead of tuning, planning and
// packing again. On the H200 machine's host those took ~5 us of a 2-rank 8-byte all-reduce's
// ~14 us, more than the GPU's whole share (perf/NOTES.md, session 14).
//
// A packed launch depends only on what the key holds, on the buffers' addresses (only in the
// buffer table: a step's offsets are relative) and on the communicator's connections, which
// live as long as it does (their positions are in device memory, not in the blob). Which
// buffers are the same one is part of the key (in place or not, a buffer two sends share), and
// a group where a send's bytes overlap a receive's is never kept (it stages a copy). The caller
// keeps nothing else that depends on more (scratch, self copies, served ranks, several streams);
// nor are user-made ops (an op handle may be destroyed and made again with another scalar).
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
  // What makes two launches the same: per task, in order, with which of the group's buffers are
  // one (`aliases`: per buffer, send then recv of each task, the index of the first equal one;
  // -1 for none).
  struct TaskKey {
    uint8_t coll = 0;
    uint8_t isSend = 0;
    int32_t type = 0;
    int32_t op = 0;
    int32_t root = 0;
    uint64_t count = 0;
    bool operator==(const TaskKey&) const = default;
  };
  struct Key {
    cudaStream_t stream = nullptr;
    std::vector<TaskKey> tasks;
    std::vector<int32_t> aliases;
    bool operator==(const Key&) const = default;
  };
  // A pointer of a packed kernel's buffer table that is one of the tasks' buffers.
  struct Patch {
    uint32_t kernel = 0, offset = 0;
    uint32_t buffer = 0;  // send of task i: 2i; recv: 2i + 1
  };
  // What a replay enqueues: the launch's settings (device, stream, words, thread count; no ops,
  // lanes or connections), its packed kernels and where the buffers go in them.
  struct Entry {
    Key key;
    kernels::Launch settings;
    int channels = 0;  // the connections' span (channelsOf), for the UCX proxies' kick
    kernels::PackedLaunch packed;
    std::vector<Patch> patches;
    uint64_t lastUse = 0;
  };

  static constexpr size_t kMaxTasks = 64;  // a larger group is never kept

  explicit LaunchReplay(size_t maxEntries = 64) : maxEntries_(maxEntries) {}

  // The key of one communicator's tasks of a group, or nothing when such a launch is never kept:
  // a user-made op, tasks on several streams, a send whose bytes overlap a receive's, no task,
  // more than kMaxTasks.
  static std::optional<Key> keyOf(std::span<const Task* const> tasks);

  // The entry kept for `key`, its buffer tables now holding `tasks`' buffers, or null. Not
  // thread-safe: the caller holds the communicator.
  const Entry* find(const Key& key, std::span<const Task* const> tasks);
  // Keeps a launch of `tasks` (its settings without ops, lanes and connections), the least
  // recently used going first when full.
  void keep(Key key, std::span<const Task* const> tasks, const kernels::Launch& launch, kernels::PackedLaunch packed);
  size_t size() const { return entries_.size(); }
  uint64_t hits() const { return hits_; }

 private:
  size_t maxEntries_;
  std::vector<Entry> entries_;
  uint64_t tick_ = 0, hits_ = 0;
};

}  // namespace braid::api
