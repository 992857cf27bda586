// index::Overlay: one write transaction's own changes to one tree, the
// newest per key (a value or a tombstone) and whether the key was live
// before the transaction: the top layer of a BufferedTree.
//
// Flat, because it is on every buffered write's path: keys and values are
// appended to one arena, an open-addressing hash index finds a key by its
// bytes, and the key order is sorted only when a cursor asks for it. (A
// std::map here cost more than half of a buffered insert's instructions: a
// node and two strings allocated, compared and freed per change.)
//
// Keys are compared by their bytes: the tree's order must hold two keys
// equal only when their bytes are (bytewise and its reverse do).
//
// Lifetimes: what key() and value() return is valid until the next Set or
// Remove. Thread safety: one thread, as its transaction.
#ifndef MMDOC_INDEX_OVERLAY_H_
#define MMDOC_INDEX_OVERLAY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "index/btree.h"

namespace mmdoc::index {

class Overlay {
 public:
  struct Entry {
    uint64_t hash = 0;  // KeyHash(key)
    uint64_t key_off = 0;
    uint64_t value_off = 0;
    uint32_t key_len = 0;
    uint32_t value_len = 0;
    bool erased = false;    // a tombstone: the transaction deleted the key
    bool was_live = false;  // live before the transaction
    bool removed = false;   // no change any more (Remove); skipped by all
  };

  explicit Overlay(Comparator order) : order_(order) {}

  // Each call takes the key's hash, `hash` = KeyHash(key), computed once by
  // the caller for every layer it looks in.
  //
  // The change of `key`, or nullptr.
  const Entry* Find(std::string_view key, uint64_t hash) const;
  // Records key's change (replacing any earlier one).
  void Set(std::string_view key, uint64_t hash, std::string_view value, bool erased, bool was_live);
  // Forgets key's change, if any: the key is as the layers below say.
  void Remove(std::string_view key, uint64_t hash);
  // Forgets every change, keeping the memory of a small overlay for the
  // next transaction (a large one's is freed).
  void Clear();

  bool empty() const { return live_ == 0; }
  size_t size() const { return live_; }
  std::string_view key(const Entry& e) const { return {arena_.data() + e.key_off, e.key_len}; }
  std::string_view value(const Entry& e) const {
    return {arena_.data() + e.value_off, e.value_len};
  }

  // Calls fn(entry) for each change, in the order the keys were first
  // changed.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (const Entry& e : entries_)
      if (!e.removed) fn(e);
  }
  // The changes in the tree's order (sorted on the first call after a
  // change). Valid until the next Set or Remove.
  const std::vector<const Entry*>& Sorted() const;

 private:
  // The slot holding `key`, or the empty slot where it would go.
  size_t Slot(std::string_view key, uint64_t hash) const;
  void Grow();

  const Comparator order_;
  std::string arena_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> slots_;  // entry index + 1; 0: empty
  size_t live_ = 0;              // entries not removed
  mutable std::vector<const Entry*> sorted_;
  mutable bool sorted_valid_ = false;
};

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_OVERLAY_H_
