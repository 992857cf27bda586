#include "index/overlay.h"

#include <algorithm>

#include "index/write_buffer.h"

namespace mmdoc::index {

size_t Overlay::Slot(std::string_view key, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const uint32_t s = slots_[i];
    if (s == 0) return i;
    const Entry& e = entries_[s - 1];
    if (e.hash == hash && this->key(e) == key) return i;
  }
}

void Overlay::Grow() {
  std::vector<uint32_t> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : 2 * old.size(), 0);
  const size_t mask = slots_.size() - 1;
  for (uint32_t s : old) {
    if (s == 0) continue;
    size_t i = entries_[s - 1].hash & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

const Overlay::Entry* Overlay::Find(std::string_view key, uint64_t hash) const {
  if (entries_.empty()) return nullptr;
  const uint32_t s = slots_[Slot(key, hash)];
  if (s == 0 || entries_[s - 1].removed) return nullptr;
  return &entries_[s - 1];
}

void Overlay::Set(std::string_view key, uint64_t hash, std::string_view value, bool erased,
                  bool was_live) {
  if (2 * (entries_.size() + 1) > slots_.size()) Grow();
  const size_t i = Slot(key, hash);
  Entry* e;
  if (slots_[i] != 0) {
    e = &entries_[slots_[i] - 1];
    if (e->removed) live_++;
  } else {
    entries_.emplace_back();
    slots_[i] = static_cast<uint32_t>(entries_.size());
    e = &entries_.back();
    e->hash = hash;
    e->key_off = arena_.size();
    e->key_len = static_cast<uint32_t>(key.size());
    arena_.append(key);
    live_++;
  }
  e->value_off = arena_.size();  // a replaced value's bytes stay until the txn ends
  e->value_len = static_cast<uint32_t>(erased ? 0 : value.size());
  if (!erased) arena_.append(value);
  e->erased = erased;
  e->was_live = was_live;
  e->removed = false;
  sorted_valid_ = false;
}

void Overlay::Remove(std::string_view key, uint64_t hash) {
  if (entries_.empty()) return;
  const uint32_t s = slots_[Slot(key, hash)];
  if (s == 0 || entries_[s - 1].removed) return;
  entries_[s - 1].removed = true;
  live_--;
  sorted_valid_ = false;
}

void Overlay::Clear() {
  constexpr size_t kKeptSlots = 4096;        // a 2k-change transaction's table
  constexpr size_t kKeptArena = 1ull << 20;  // and a MiB of its keys and values
  if (slots_.size() > kKeptSlots) {
    std::vector<uint32_t>().swap(slots_);
    std::vector<Entry>().swap(entries_);
  } else if (!entries_.empty()) {
    std::fill(slots_.begin(), slots_.end(), 0);
  }
  entries_.clear();
  if (arena_.capacity() > kKeptArena) std::string().swap(arena_);
  arena_.clear();
  live_ = 0;
  sorted_.clear();
  sorted_valid_ = false;
}

const std::vector<const Overlay::Entry*>& Overlay::Sorted() const {
  if (sorted_valid_) return sorted_;
  sorted_.clear();
  for (const Entry& e : entries_)
    if (!e.removed) sorted_.push_back(&e);
  std::sort(sorted_.begin(), sorted_.end(), [this](const Entry* a, const Entry* b) {
    return CompareKeys(order_, key(*a), key(*b)) < 0;
  });
  sorted_valid_ = true;
  return sorted_;
}

}  // namespace mmdoc::index
