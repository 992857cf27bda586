// index::KeyFilter: a Bloom filter over a tree's keys that proves a key
// absent without a descent of the tree (docs/write-path.md, "Key filters").
//
// With a write buffer, an insert changes no page: its only reads of the
// trees are the unique checks ("is this key live?"), one descent of each
// tree it writes, each level a likely cache miss. A filter answers most of
// those for keys that were never in the tree with one cache line: a
// blocked Bloom filter (one 64-byte block per key, six bits set in it, ten
// or sixteen bits of the filter per key of capacity: about 1% or 0.1%
// false positives at capacity). A false positive costs the descent it
// would have saved; a false negative would let a duplicate in, so the
// filter only ever gains keys: deletes leave theirs (each a false positive
// later).
//
// Thread safety: Add and MayContain from any threads at once (the writer
// and the filter's builder add while writers probe); bits are set with
// atomic ORs. A probe sees every Add that happens-before it.
#ifndef MMDOC_INDEX_KEY_FILTER_H_
#define MMDOC_INDEX_KEY_FILTER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "index/key_hash.h"

namespace mmdoc::index {

class KeyFilter {
 public:
  // Bits of filter per key of capacity: ten give about 1% false positives
  // at capacity (a write buffer's filters, sized for twice their tree);
  // sixteen about 0.1% (a run's filter: a read probes every run's, so each
  // run's false positives add up; docs/write-path.md).
  static constexpr uint64_t kBitsPerKey = 10;
  static constexpr uint64_t kRunBitsPerKey = 16;

  // Sized for `capacity` keys (at least one block). Past it the filter
  // still never answers wrongly "absent"; it answers "maybe" more often.
  explicit KeyFilter(uint64_t capacity, uint64_t bits_per_key = kBitsPerKey);
  ~KeyFilter();
  KeyFilter(const KeyFilter&) = delete;
  KeyFilter& operator=(const KeyFilter&) = delete;

  void Add(std::string_view key) { AddHash(KeyHash(key)); }
  void AddHash(uint64_t hash);  // hash: KeyHash(key)
  // False only when `key` was never added.
  bool MayContain(std::string_view key) const { return MayContainHash(KeyHash(key)); }

  // A key's probe in parts, for the filters of several runs: hash the key
  // once (KeyHash), Prefetch its block in each filter so that their cache
  // misses overlap, then probe each.
  void Prefetch(uint64_t hash) const { __builtin_prefetch(&table_[BlockOf(hash)]); }
  bool MayContainHash(uint64_t hash) const;

  uint64_t capacity() const { return capacity_; }
  // Adds so far (a key added twice counts twice).
  uint64_t added() const { return added_.load(std::memory_order_relaxed); }
  bool full() const { return added() > capacity_; }
  size_t bytes() const { return blocks_ * sizeof(Block); }

 private:
  struct alignas(64) Block {
    std::atomic<uint64_t> words[8];
  };
  // The block of hash h (Lemire's multiply-shift, no division).
  uint64_t BlockOf(uint64_t h) const { return ((h >> 32) * blocks_) >> 32; }

  const uint64_t capacity_;
  const uint64_t blocks_;
  std::unique_ptr<Block[]> table_;
  std::atomic<uint64_t> added_{0};
};

// What a write transaction uses for one tree: `ready`, built from the tree
// as of commit `ready_at` and given every key that became live since, may
// prove a key absent to a transaction whose snapshot is >= ready_at;
// `building`, one being built, gets the keys that become live and proves
// nothing yet. Either may be nullptr.
struct TreeFilters {
  std::shared_ptr<KeyFilter> ready;
  uint64_t ready_at = 0;
  std::shared_ptr<KeyFilter> building;
  // WriteBuffer::filters_version() when these were handed out: while it
  // is unchanged, so are they (a writer may keep them between commits).
  uint64_t version = 0;
};

}  // namespace mmdoc::index

#endif  // MMDOC_INDEX_KEY_FILTER_H_
