#include "api/launch_replay.h"

#include <algorithm>
#include <cstring>

#include "api/plan.h"

namespace braid::api {
namespace {

// The group's buffers in key order: send, recv of each task.
const void* bufferOf(std::span<const Task* const> tasks, size_t i) {
  const Task& t = *tasks[i / 2];
  return i % 2 == 0 ? t.sendbuff : t.recvbuff;
}

// Whether a send of the group reads bytes that a receive of it writes (the launch then sends a
// staged copy: device_tasks.cc planP2p).
bool someSendOverlapsARecv(std::span<const Task* const> tasks) {
  std::vector<const Task*> p2p;
  for (const Task* t : tasks)
    if (t->coll == algo::Coll::SendRecv) p2p.push_back(t);
  for (const Task* s : p2p)
    if (s->isSend && s->count > 0 && sendOverlapsARecv(*s, p2p)) return true;
  return false;
}

}  // namespace

std::optional<LaunchReplay::Key> LaunchReplay::keyOf(std::span<const Task* const> tasks) {
  // The key's aliases and the overlap test take time quadratic in the group: a large group
  // (an all-to-all of sends and receives) plans as before.
  if (tasks.empty() || tasks.size() > kMaxTasks || someSendOverlapsARecv(tasks)) return std::nullopt;
  Key key;
  key.stream = tasks.front()->stream;
  key.tasks.reserve(tasks.size());
  for (const Task* t : tasks) {
    if (t->stream != key.stream || static_cast<int>(t->op) >= ncclNumOps) return std::nullopt;
    TaskKey k;
    k.coll = static_cast<uint8_t>(t->coll);
    k.isSend = t->isSend ? 1 : 0;
    k.type = static_cast<int32_t>(t->type);
    k.op = static_cast<int32_t>(t->op);
    k.root = t->root;
    k.count = t->count;
    key.tasks.push_back(k);
  }
  key.aliases.resize(2 * tasks.size(), -1);
  for (size_t i = 0; i < key.aliases.size(); ++i) {
    const void* p = bufferOf(tasks, i);
    if (p == nullptr) continue;
    size_t first = 0;
    while (bufferOf(tasks, first) != p) ++first;
    key.aliases[i] = static_cast<int32_t>(first);
  }
  return key;
}

const LaunchReplay::Entry* LaunchReplay::find(const Key& key, std::span<const Task* const> tasks) {
  for (Entry& e : entries_)
    if (e.key == key) {
      for (const Patch& p : e.patches) {
        const void* now = bufferOf(tasks, p.buffer);
        std::memcpy(e.packed.kernels[p.kernel].blob.data() + p.offset, &now, sizeof(now));
      }
      e.lastUse = ++tick_;
      ++hits_;
      return &e;
    }
  return nullptr;
}

void LaunchReplay::keep(Key key, std::span<const Task* const> tasks, const kernels::Launch& launch,
                        kernels::PackedLaunch packed) {
  if (maxEntries_ == 0) return;
  // Every pointer of the blob that is one of the buffers (its first index: an equal one is the
  // same buffer in every call with this key). No other pointer of the blob can equal a user's
  // buffer: the rest are braid's own FIFOs, counters and scalars.
  std::vector<Patch> patches;
  for (size_t k = 0; k < packed.kernels.size(); ++k)
    for (uint32_t offset : kernels::pointerOffsets(packed.kernels[k])) {
      const void* p = nullptr;
      std::memcpy(&p, packed.kernels[k].blob.data() + offset, sizeof(p));
      for (size_t i = 0; i < key.aliases.size(); ++i)
        if (key.aliases[i] == static_cast<int32_t>(i) && bufferOf(tasks, i) == p) {
          patches.push_back({static_cast<uint32_t>(k), offset, static_cast<uint32_t>(i)});
          break;
        }
    }
  if (entries_.size() >= maxEntries_)
    entries_.erase(std::min_element(entries_.begin(), entries_.end(),
                                    [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; }));
  Entry& e = entries_.emplace_back();
  e.key = std::move(key);
  e.settings = kernels::settingsOf(launch);
  e.channels = kernels::channelsOf(launch);
  e.packed = std::move(packed);
  e.patches = std::move(patches);
  e.lastUse = ++tick_;
}

}  // namespace braid::api
