// Where the randomized index/ tests keep their pages: the in-memory MemStore
// or the real storage::Pager in a file. Each hands out one write Txn at a
// time and checks page accounting after a commit (pager.h rule 6: every page
// >= 2 is reachable, free, pending or a free-list page, exactly once).
#ifndef MMDOC_TESTS_INDEX_MODEL_BACKENDS_H_
#define MMDOC_TESTS_INDEX_MODEL_BACKENDS_H_

#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "storage/pager.h"
#include "tests/index/mem_txn.h"

namespace mmdoc::index::test {

class Backend {
 public:
  virtual ~Backend() = default;
  // A new write txn (owned by the backend until Commit/Abort).
  virtual storage::Txn* BeginWrite() = 0;
  virtual Status Commit() = 0;
  virtual void Abort() = 0;
  // Closes and opens the store again (no txn open).
  virtual void Reopen() {}
  // `reachable` (the pages of every tree; sorted in place) plus the
  // store's own free pages must be every page exactly once. Called with
  // the write txn open and unchanged.
  virtual void CheckAccounting(std::vector<storage::PageId>* reachable) = 0;
};

class MemBackend : public Backend {
 public:
  explicit MemBackend(uint32_t page_size = 4096) : store_(page_size) {}
  storage::Txn* BeginWrite() override {
    txn_ = store_.BeginWrite();
    return txn_.get();
  }
  Status Commit() override {
    Status s = txn_->Commit("", Durability::kNone);
    txn_.reset();
    return s;
  }
  void Abort() override { txn_.reset(); }
  void CheckAccounting(std::vector<storage::PageId>* reachable) override {
    std::sort(reachable->begin(), reachable->end());
    REQUIRE(*reachable == store_.LivePages());
  }
  MemStore* store() { return &store_; }

 private:
  MemStore store_;
  std::unique_ptr<MemTxn> txn_;
};

#ifndef MMDOC_INDEX_NO_PAGER
class PagerBackend : public Backend {
 public:
  explicit PagerBackend(std::string path) : path_(std::move(path)) { Open(); }
  ~PagerBackend() override {
    txn_.reset();
    pager_.reset();
  }
  storage::Txn* BeginWrite() override {
    auto t = pager_->BeginWrite();
    REQUIRE(t.ok());
    txn_ = std::move(t.value());
    return txn_.get();
  }
  Status Commit() override {
    Status s = txn_->Commit("", Durability::kNone);
    txn_.reset();
    return s;
  }
  void Abort() override {
    if (txn_) txn_->Abort();
    txn_.reset();
  }
  void Reopen() override {
    txn_.reset();
    pager_.reset();
    Open();
  }
  void CheckAccounting(std::vector<storage::PageId>* reachable) override {
    std::vector<storage::PageId> all = *reachable;
    std::vector<storage::PageId> acc;
    REQUIRE(pager_->AccountedPages(&acc).ok());
    all.insert(all.end(), acc.begin(), acc.end());
    std::sort(all.begin(), all.end());
    uint64_t count = txn_->page_count();
    INFO("pages accounted " << all.size() << " of " << count - 2);
    REQUIRE(std::adjacent_find(all.begin(), all.end()) == all.end());
    REQUIRE(all.size() == count - 2);
    if (!all.empty()) {
      REQUIRE(all.front() == 2);
      REQUIRE(all.back() == count - 1);
    }
    REQUIRE(pager_->Verify().ok());
  }
  storage::Pager* pager() { return pager_.get(); }

 private:
  void Open() {
    storage::PagerOptions o;
    auto p = storage::Pager::Open(path_, o);
    INFO(p.status().ToString());
    REQUIRE(p.ok());
    pager_ = std::move(p.value());
    // Commits here carry no payload; a clean close checkpoints, so there
    // is never anything to replay.
    Status s = pager_->Recover([](uint64_t, std::string_view) {
      return Status::Corruption("btree tests: unexpected log record to replay");
    });
    INFO(s.ToString());
    REQUIRE(s.ok());
  }

  std::string path_;
  std::unique_ptr<storage::Pager> pager_;
  std::unique_ptr<storage::Txn> txn_;
};
#endif  // MMDOC_INDEX_NO_PAGER

}  // namespace mmdoc::index::test

#endif  // MMDOC_TESTS_INDEX_MODEL_BACKENDS_H_
