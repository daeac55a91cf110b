#include "api/launch_replay.h"

#include <algorithm>

namespace braid::api {

std::optional<LaunchReplay::Key> LaunchReplay::keyOf(std::span<const Task* const> tasks) {
  if (tasks.empty()) return std::nullopt;
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
    k.sendbuff = t->sendbuff;
    k.recvbuff = t->recvbuff;
    key.tasks.push_back(k);
  }
  return key;
}

const LaunchReplay::Entry* LaunchReplay::find(const Key& key) {
  for (Entry& e : entries_)
    if (e.key == key) {
      e.lastUse = ++tick_;
      ++hits_;
      return &e;
    }
  return nullptr;
}

void LaunchReplay::keep(Key key, const kernels::Launch& launch, kernels::PackedLaunch packed) {
  if (maxEntries_ == 0) return;
  if (entries_.size() >= maxEntries_)
    entries_.erase(std::min_element(entries_.begin(), entries_.end(),
                                     [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; }));
  Entry& e = entries_.emplace_back();
  e.key = std::move(key);
  e.settings = launch;
  e.settings.ops.clear();  // the packed blob holds what the kernels need of these
  e.settings.lanes.clear();
  e.settings.sends.clear();
  e.settings.recvs.clear();
  e.packed = std::move(packed);
  e.lastUse = ++tick_;
}

}  // namespace braid::api
