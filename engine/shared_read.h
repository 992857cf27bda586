// One read snapshot that point reads share while nothing commits, pinned
// through a table of reader slots, as LMDB's readers pin theirs
// (docs/write-path.md, "Point reads share one snapshot").
//
// A point read (DB::Get, DB::GetBy) that took a snapshot of its own took
// three locks and bumped half a dozen reference counts on lines every
// reader writes: on two cores, two reading threads ran no faster than one.
// Instead, the first read after a commit builds a SharedRead and installs
// it; each read then pins it by one compare-and-swap on a slot of its own
// cache line, checks that it is still the installed one, reads, and clears
// the slot. A state is replaced when it goes stale (DBImpl checks the
// versions it was taken at) and freed once no slot holds it: its read txn
// keeps its pages from reuse until then, so commits retire a stale state
// at once (DBImpl::DropStaleRead) rather than leave it for the next read.
//
// Why a pin is safe: a reader stores the state into its slot, then reads
// the installed pointer again; the replacer swaps the installed pointer,
// then reads every slot; all four are sequentially consistent. Either the
// reader's second read sees the swap (it lets go and retries) or the
// replacer's scan sees the reader's slot (the state is kept).
#ifndef MMDOC_ENGINE_SHARED_READ_H_
#define MMDOC_ENGINE_SHARED_READ_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "index/write_buffer.h"
#include "storage/mutex.h"
#include "storage/pager.h"

namespace mmdoc {

struct CatalogCache;  // db_impl.h

// A snapshot taken for many reads: the pager's read txn, the write buffer's
// view and the catalog cache, taken together (DBImpl::Snapshot), and the
// versions they were taken at.
struct SharedRead {
  uint64_t db_version = 0;     // DBImpl's count of pager, cache and buffer swaps
  uint64_t pager_version = 0;  // storage::Pager::published
  uint64_t buffer_txid = 0;    // the buffer's last txid (the view's snapshot)
  std::shared_ptr<storage::Pager> pager;
  std::unique_ptr<storage::Txn> txn;
  std::shared_ptr<index::WriteBuffer> wbuf;  // null without a buffer
  index::BufferView view;
  std::shared_ptr<const CatalogCache> cache;
};

class SharedReads {
 public:
  static constexpr size_t kSlots = 64;

  SharedReads() = default;
  ~SharedReads();  // frees every state; REQUIRES: none pinned
  SharedReads(const SharedReads&) = delete;
  SharedReads& operator=(const SharedReads&) = delete;

  // Pins the installed state in a free slot: *state is it (nullptr when
  // none is installed; nothing is pinned then) and *slot the slot for
  // Unpin. False when every slot is taken (more concurrent reads than
  // slots): the caller takes a snapshot of its own.
  bool Pin(const SharedRead** state, size_t* slot);
  void Unpin(size_t slot) { slots_[slot].state.store(nullptr, std::memory_order_release); }
  // Counts a read through `slot` (pinned): true for one read in 64, which
  // asks what is too costly to ask on every read (the pager's file check).
  bool OneIn64(size_t slot) {
    std::atomic<uint32_t>& n = slots_[slot].reads;
    const uint32_t r = n.load(std::memory_order_relaxed) + 1;  // only the pinning thread writes
    n.store(r, std::memory_order_relaxed);
    return (r & 63) == 1;
  }

  // For the one thread that builds or retires states at a time.
  storage::Mutex* mu() MMDOC_RETURN_CAPABILITY(mu_) { return &mu_; }
  // The installed state (nullptr: none). It stays valid while mu() is held.
  const SharedRead* installed() const MMDOC_REQUIRES(mu_) {
    return current_.load(std::memory_order_seq_cst);
  }
  // Installs `next` (nullptr: none) and retires the state it replaces.
  // The retired states no slot holds move to *dead, for the caller to free
  // after it lets go of mu() (a state's read txn takes the pager's lock).
  void Install(std::unique_ptr<SharedRead> next, std::vector<std::unique_ptr<SharedRead>>* dead)
      MMDOC_REQUIRES(mu_);
  // Moves the retired states no slot holds to *dead (as Install does).
  void Collect(std::vector<std::unique_ptr<SharedRead>>* dead) MMDOC_REQUIRES(mu_);
  // Whether a state is installed or retired and not yet freed: false means
  // no state holds a snapshot, so no commit need look further. Any thread.
  bool holding() const {
    return current_.load(std::memory_order_acquire) != nullptr ||
           retired_count_.load(std::memory_order_acquire) > 0;
  }

 private:
  struct alignas(64) Slot {
    std::atomic<const SharedRead*> state{nullptr};
    std::atomic<uint32_t> reads{0};  // OneIn64
  };
  bool Pinned(const SharedRead* s) const;

  Slot slots_[kSlots];
  std::atomic<const SharedRead*> current_{nullptr};
  std::atomic<size_t> retired_count_{0};
  storage::Mutex mu_;
  std::vector<std::unique_ptr<SharedRead>> retired_ MMDOC_GUARDED_BY(mu_);
};

}  // namespace mmdoc

#endif  // MMDOC_ENGINE_SHARED_READ_H_
