// SharedReads: the reader slots and the installed point-read snapshot
// (shared_read.h).
#include "engine/shared_read.h"

#include "engine/db_impl.h"

namespace mmdoc {

SharedReads::~SharedReads() { delete current_.load(); }

bool SharedReads::Pin(const SharedRead** state, size_t* slot) {
  // Each thread starts at a slot of its own, so that readers seldom meet
  // on one line.
  static std::atomic<uint32_t> next_thread{0};
  thread_local const uint32_t first = next_thread.fetch_add(1, std::memory_order_relaxed);
  for (;;) {
    const SharedRead* s = current_.load(std::memory_order_seq_cst);
    if (s == nullptr) {
      *state = nullptr;
      return true;
    }
    size_t i = first % kSlots;
    bool pinned = false;
    for (size_t n = 0; n < kSlots && !pinned; n++, i = (i + 1) % kSlots) {
      const SharedRead* expected = nullptr;
      pinned = slots_[i].state.load(std::memory_order_relaxed) == nullptr &&
               slots_[i].state.compare_exchange_strong(expected, s, std::memory_order_seq_cst);
      if (pinned) break;
    }
    if (!pinned) return false;
    if (current_.load(std::memory_order_seq_cst) == s) {
      *state = s;
      *slot = i;
      return true;
    }
    Unpin(i);  // replaced meanwhile: pin the new one
  }
}

bool SharedReads::Pinned(const SharedRead* s) const {
  for (const Slot& slot : slots_)
    if (slot.state.load(std::memory_order_seq_cst) == s) return true;
  return false;
}

void SharedReads::Install(std::unique_ptr<SharedRead> next,
                          std::vector<std::unique_ptr<SharedRead>>* dead) {
  const SharedRead* old = current_.exchange(next.release(), std::memory_order_seq_cst);
  // Only this class installs, from a unique_ptr: it owns what it swapped out.
  if (old != nullptr) retired_.emplace_back(const_cast<SharedRead*>(old));
  Collect(dead);
}

void SharedReads::Collect(std::vector<std::unique_ptr<SharedRead>>* dead) {
  for (auto it = retired_.begin(); it != retired_.end();) {
    if (Pinned(it->get())) {
      ++it;
    } else {
      dead->push_back(std::move(*it));
      it = retired_.erase(it);
    }
  }
  retired_count_.store(retired_.size(), std::memory_order_release);
}

// --- DBImpl's side ---

bool DBImpl::Current(const SharedRead& s) const {
  return read_version_.load(std::memory_order_acquire) == s.db_version &&
         s.pager->published() == s.pager_version &&
         (s.wbuf == nullptr || s.wbuf->last_txid() == s.buffer_txid);
}

Result<std::unique_ptr<SharedRead>> DBImpl::BuildSharedRead() {
  auto s = std::make_unique<SharedRead>();
  storage::MutexLock l(&cache_mu_);
  s->db_version = read_version_.load(std::memory_order_relaxed);
  // Read before the txn begins: the snapshot is at least this new, so a
  // commit that ends after this read makes the state stale.
  s->pager_version = pager_->published();
  // The library's own reader: PagerStats::readers counts the caller's.
  auto txn = pager_->BeginInternalRead();
  if (!txn.ok()) return txn.status();
  s->pager = pager_;
  s->txn = std::move(txn.value());
  s->cache = cache_;
  if (wbuf_) {
    s->wbuf = wbuf_;
    s->buffer_txid = wbuf_->last_txid();
    wbuf_->View(s->buffer_txid, &s->view);
  }
  return s;
}

void DBImpl::InstallSharedRead(std::unique_ptr<SharedRead> next) {
  std::vector<std::unique_ptr<SharedRead>> dead;  // freed after the lock
  storage::MutexLock l(reads_->mu());
  reads_->Install(std::move(next), &dead);
}

void DBImpl::DropStaleRead() {
  if (!reads_->holding()) return;
  std::vector<std::unique_ptr<SharedRead>> dead;
  storage::MutexLock l(reads_->mu());
  const SharedRead* s = reads_->installed();
  if (s != nullptr && Current(*s)) {
    reads_->Collect(&dead);
  } else {
    reads_->Install(nullptr, &dead);
  }
}

}  // namespace mmdoc
