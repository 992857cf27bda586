// An in-memory storage::Txn for index/ unit tests: heap pages with the
// copy-on-write, run allocation and free semantics of the real pager, plus
// checks the pager does not make (a page written without Allocate/Modify, a
// double free, a read of a freed page), and hooks to damage pages.
//
//   MemStore store;                       // 4096-byte pages
//   auto w = store.BeginWrite();          // one writer at a time
//   index::BTree t(w.get(), 0);
//   ... t.Put(...) ...
//   w->set_root(0, t.root());
//   w->Commit("", Durability::kNone);
//   auto r = store.BeginRead();           // a snapshot of the last commit
#ifndef MMDOC_TESTS_INDEX_MEM_TXN_H_
#define MMDOC_TESTS_INDEX_MEM_TXN_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "storage/coding.h"
#include "storage/pager.h"

namespace mmdoc::index::test {

using storage::PageId;
using storage::PageType;

class MemTxn;

class MemStore {
 public:
  using Buf = std::shared_ptr<std::vector<uint8_t>>;

  explicit MemStore(uint32_t page_size = 4096) : page_size_(page_size) {}

  std::unique_ptr<MemTxn> BeginWrite();
  std::unique_ptr<MemTxn> BeginRead();

  uint32_t page_size() const { return page_size_; }
  uint64_t page_count() const { return next_; }
  PageId root(int slot) const { return roots_[slot]; }

  // Every page of every live run, sorted.
  std::vector<PageId> LivePages() const {
    std::vector<PageId> v;
    for (const auto& [id, buf] : pages_) {
      uint64_t n = buf->size() / page_size_;
      for (uint64_t i = 0; i < n; i++) v.push_back(id + i);
    }
    return v;
  }
  uint64_t FreePages() const {
    uint64_t n = 0;
    for (const auto& [id, len] : free_) n += len;
    return n;
  }
  // The committed bytes of page `id` (first page of a run), for damaging.
  uint8_t* MutablePage(PageId id) { return pages_.at(id)->data(); }

  // When set, every commit checks that no committed page changed in place.
  bool check_clean_pages = false;

 private:
  friend class MemTxn;
  uint32_t page_size_;
  uint64_t next_ = 2;
  uint64_t txid_ = 0;
  std::map<PageId, Buf> pages_;      // committed runs by first page
  std::map<PageId, uint64_t> free_;  // free runs: first page -> length
  PageId roots_[storage::kMetaRoots] = {};
  bool writer_ = false;
};

class MemTxn : public storage::Txn {
 public:
  ~MemTxn() override { Abort(); }

  bool writable() const override { return writable_; }
  uint64_t txid() const override { return txid_; }
  uint32_t page_size() const override { return ps_; }
  uint64_t page_count() const override { return writable_ ? store_->next_ : page_count_; }
  PageId root(int slot) const override { return roots_[slot]; }
  void set_root(int slot, PageId id) override { roots_[slot] = id; }

  Status Explain(Status s) override { return s; }
  Status Get(PageId id, const uint8_t** page) override {
    auto d = dirty_.find(id);
    if (d != dirty_.end()) {
      *page = d->second->data();
      return Status::OK();
    }
    if (writable_ && freed_.count(id)) return Bad(id, "read after free");
    const auto& src = writable_ ? store_->pages_ : snapshot_;
    auto it = src.find(id);
    if (it == src.end()) return Bad(id, "not a live page");
    *page = it->second->data();
    return Status::OK();
  }

  Status Allocate(PageType type, uint32_t n, PageId* id, uint8_t** page) override {
    if (!writable_ || n == 0) return Status::InvalidArgument("bad Allocate");
    PageId got = 0;
    auto& fr = store_->free_;
    for (auto it = fr.begin(); it != fr.end(); ++it) {
      if (it->second >= n) {
        got = it->first;
        uint64_t len = it->second;
        fr.erase(it);
        if (len > n) fr[got + n] = len - n;
        break;
      }
    }
    if (got == 0) {
      got = store_->next_;
      store_->next_ += n;
    }
    auto buf = std::make_shared<std::vector<uint8_t>>(size_t{n} * ps_, 0);
    uint8_t* p = buf->data();
    storage::EncodeFixed64(p + storage::kPageTxidOffset, txid_);
    p[storage::kPageTypeOffset] = static_cast<uint8_t>(type);
    storage::EncodeFixed32(p + storage::kPageRunLengthOffset, n);
    dirty_[got] = buf;
    *id = got;
    *page = p;
    return Status::OK();
  }

  Status Modify(PageId id, PageId* new_id, uint8_t** page) override {
    auto d = dirty_.find(id);
    if (d != dirty_.end()) {
      *new_id = id;
      *page = d->second->data();
      return Status::OK();
    }
    const uint8_t* old;
    MMDOC_RETURN_IF_ERROR(Get(id, &old));
    const uint32_t n = storage::DecodeFixed32(old + storage::kPageRunLengthOffset);
    MMDOC_RETURN_IF_ERROR(
        Allocate(static_cast<PageType>(old[storage::kPageTypeOffset]), n, new_id, page));
    std::memcpy(*page + storage::kPageHeaderSize, old + storage::kPageHeaderSize,
                size_t{n} * ps_ - storage::kPageHeaderSize);
    std::memcpy(*page + storage::kPageFlagsOffset, old + storage::kPageFlagsOffset, 3);
    return Free(id);
  }

  Status Free(PageId id) override {
    auto d = dirty_.find(id);
    if (d != dirty_.end()) {
      store_->free_[id] = d->second->size() / ps_;
      dirty_.erase(d);
      return Status::OK();
    }
    if (!store_->pages_.count(id)) return Bad(id, "free of a page that is not live");
    if (!freed_.insert(id).second) return Bad(id, "double free");
    return Status::OK();
  }

  bool IsDirty(PageId id) const override { return dirty_.count(id) != 0; }

  Status Commit(std::string_view, Durability) override {
    if (!writable_ || done_) return Status::InvalidArgument("commit of a finished txn");
    if (store_->check_clean_pages) {
      for (const auto& [id, sum] : sums_) {
        auto it = store_->pages_.find(id);
        if (Sum(*it->second) != sum) return Bad(id, "committed page written in place");
      }
    }
    for (PageId id : freed_) {
      auto it = store_->pages_.find(id);
      store_->free_[id] = it->second->size() / ps_;
      store_->pages_.erase(it);
    }
    for (auto& [id, buf] : dirty_) store_->pages_[id] = buf;
    std::memcpy(store_->roots_, roots_, sizeof(roots_));
    store_->txid_ = txid_;
    dirty_.clear();
    freed_.clear();
    Finish();
    return Status::OK();
  }

  void Abort() override {
    if (done_) return;
    if (writable_) {
      store_->free_ = saved_free_;
      store_->next_ = saved_next_;
    }
    Finish();
  }

 private:
  friend class MemStore;
  MemTxn(MemStore* store, bool writable) : store_(store), writable_(writable) {
    ps_ = store->page_size_;
    std::memcpy(roots_, store->roots_, sizeof(roots_));
    if (writable) {
      txid_ = store->txid_ + 1;
      saved_free_ = store->free_;
      saved_next_ = store->next_;
      store->writer_ = true;
      if (store->check_clean_pages) {
        for (const auto& [id, buf] : store->pages_) sums_[id] = Sum(*buf);
      }
    } else {
      txid_ = store->txid_;
      snapshot_ = store->pages_;
      page_count_ = store->next_;
    }
  }
  void Finish() {
    done_ = true;
    if (writable_) store_->writer_ = false;
  }
  static uint64_t Sum(const std::vector<uint8_t>& b) {
    uint64_t h = 1469598103934665603ull;
    for (uint8_t c : b) h = (h ^ c) * 1099511628211ull;
    return h;
  }
  static Status Bad(PageId id, const char* what) {
    return Status::Corruption("mem_txn: page " + std::to_string(id), what);
  }

  MemStore* store_;
  bool writable_;
  bool done_ = false;
  uint32_t ps_;
  uint64_t txid_ = 0;
  uint64_t page_count_ = 0;
  PageId roots_[storage::kMetaRoots] = {};
  std::map<PageId, MemStore::Buf> snapshot_;  // read txns
  std::unordered_map<PageId, MemStore::Buf> dirty_;
  std::set<PageId> freed_;  // committed pages freed by this txn
  std::map<PageId, uint64_t> saved_free_;
  uint64_t saved_next_ = 0;
  std::unordered_map<PageId, uint64_t> sums_;
};

inline std::unique_ptr<MemTxn> MemStore::BeginWrite() {
  return std::unique_ptr<MemTxn>(new MemTxn(this, true));
}
inline std::unique_ptr<MemTxn> MemStore::BeginRead() {
  return std::unique_ptr<MemTxn>(new MemTxn(this, false));
}

}  // namespace mmdoc::index::test

#endif  // MMDOC_TESTS_INDEX_MEM_TXN_H_
