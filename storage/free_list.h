// The pages a database is not using: the free set, the freed pages waiting
// for rule 5 of storage/pager.h, and the free list persisted at each
// checkpoint (format: storage/format.h, FREE-LIST PAGE).
//
// Thread safety: none; the pager guards these with its alloc_mu_.
#ifndef MMDOC_STORAGE_FREE_LIST_H_
#define MMDOC_STORAGE_FREE_LIST_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "mmdoc/status.h"
#include "storage/format.h"

namespace mmdoc::storage {

// The set of free pages: a bitmap indexed by page id, lowest first. A
// std::set here cost a heap node per page freed or taken, thousands per
// commit of 1000 inserts.
class FreeSet {
 public:
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool count(PageId id) const {
    return id / 64 < words_.size() && (words_[id / 64] >> (id % 64) & 1) != 0;
  }
  // Adds id; false when it was already free.
  bool insert(PageId id);
  // The lowest free page at or after `from`, or 0 when there is none.
  PageId Next(PageId from) const;
  // Removes and returns the lowest run of n consecutive free pages (0: none).
  PageId TakeRun(uint32_t n);
  template <typename F>
  void ForEach(F f) const {
    for (PageId id = Next(0); id != 0; id = Next(id + 1)) f(id);
  }
  std::vector<PageId> ToVector() const;

 private:
  void Erase(PageId id);
  std::vector<uint64_t> words_;
  size_t count_ = 0;
  size_t first_word_ = 0;  // no free page below word first_word_
};

// Freed pages that are not free yet (rule 5): each waits (a) until no open
// snapshot is older than the transaction that freed it and, (b) when the
// durable meta may reach it, first for a checkpoint at or after that
// transaction.
class PendingPages {
 public:
  // Pages transaction `txid` freed; `for_checkpoint`: rule 5(b) applies.
  void Add(uint64_t txid, const std::vector<PageId>& pages, bool for_checkpoint);
  // A checkpoint at `txid` is durable: pages freed at or before it wait for
  // readers only.
  void CheckpointDone(uint64_t txid);
  // Moves the pages no snapshot can reach (freed at or before
  // `oldest_reader`, and past rule 5(b)) into *free.
  void Release(uint64_t oldest_reader, FreeSet* free);
  uint64_t size() const { return readers_count_ + checkpoint_count_; }
  template <typename F>
  void ForEach(F f) const {
    for (const auto& [txid, v] : readers_) std::for_each(v.begin(), v.end(), f);
    for (const auto& [txid, v] : checkpoint_) std::for_each(v.begin(), v.end(), f);
  }

 private:
  std::map<uint64_t, std::vector<PageId>> readers_;     // rule 5(a) only
  std::map<uint64_t, std::vector<PageId>> checkpoint_;  // 5(b), then 5(a)
  uint64_t readers_count_ = 0;
  uint64_t checkpoint_count_ = 0;
};

// Page numbers one free-list page of `page_size` bytes holds.
inline uint64_t FreeListCapacity(uint32_t page_size) {
  return (page_size - kFreeListEntriesOffset) / 8;
}

// Fills the free-list page `id` (header, link, entries, checksum).
// REQUIRES: n <= FreeListCapacity(page_size).
void EncodeFreeListPage(uint8_t* page, uint32_t page_size, PageId id, uint64_t txid, PageId next,
                        const PageId* entries, uint64_t n);

// Reads the persisted free list from `root` into *free and its own pages
// into *pages, checking every entry against `page_count`. `get` returns a
// verified page. Corruption naming the page on any inconsistency.
Status LoadFreeList(PageId root, uint32_t page_size, uint64_t page_count,
                    const std::function<Status(PageId, const uint8_t**)>& get, FreeSet* free,
                    std::vector<PageId>* pages);

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_FREE_LIST_H_
