#include "fallback/real_handles.h"

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace braid::fallback {
namespace {

// Never destroyed: exports, and the destructors of real communicators, may run at exit.
std::shared_mutex& handlesMutex() {
  static auto* m = new std::shared_mutex;
  return *m;
}
std::unordered_set<const void*>& handles() {
  static auto* set = new std::unordered_set<const void*>;
  return *set;
}

}  // namespace

void noteRealHandle(const void* handle) {
  std::unique_lock lock(handlesMutex());
  if (handle != nullptr && handles().insert(handle).second) liveRealHandles.fetch_add(1, std::memory_order_relaxed);
}

void forgetRealHandle(const void* handle) {
  std::unique_lock lock(handlesMutex());
  if (handles().erase(handle) > 0) liveRealHandles.fetch_sub(1, std::memory_order_relaxed);
}

bool isRealHandle(const void* handle) {
  std::shared_lock lock(handlesMutex());
  return handles().count(handle) > 0;
}

}  // namespace braid::fallback
