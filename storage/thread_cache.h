// storage/thread_cache.h: per-thread scratch objects that outlive the
// thread's own thread_local destructors.
//
// A plain `thread_local std::string buf;` is destroyed when its thread
// exits, and for the main thread that happens before static destructors
// run: a DB held in a global and closed from its destructor (which merges,
// and so writes through the B+tree's scratch pages) would write into freed
// memory. ThreadCache<T>::Get() returns this thread's T, built on first
// use and freed at thread exit; a use after that (only from a static
// destructor of the main thread) gets a new T that the process's exit
// takes back.
#ifndef MMDOC_STORAGE_THREAD_CACHE_H_
#define MMDOC_STORAGE_THREAD_CACHE_H_

namespace mmdoc {
namespace storage {

template <typename T>
class ThreadCache {
 public:
  static T& Get() {
    Slot& s = slot;  // trivially destructible: still readable after exit's TLS destructors
    if (s.value == nullptr) {
      s.value = new T();
      if (!s.owned) {
        s.owned = true;
        owner.slot = &s;  // registers the destructor; after it ran, a no-op
      }
    }
    return *s.value;
  }

 private:
  struct Slot {
    T* value = nullptr;
    bool owned = false;  // an Owner will free value (set once per thread)
  };
  struct Owner {
    Slot* slot = nullptr;
    ~Owner() {
      if (slot == nullptr) return;
      delete slot->value;
      slot->value = nullptr;  // a later Get builds a new one, never freed
    }
  };
  static thread_local Slot slot;
  static thread_local Owner owner;
};

template <typename T>
thread_local typename ThreadCache<T>::Slot ThreadCache<T>::slot;
template <typename T>
thread_local typename ThreadCache<T>::Owner ThreadCache<T>::owner;

}  // namespace storage
}  // namespace mmdoc

#endif  // MMDOC_STORAGE_THREAD_CACHE_H_
