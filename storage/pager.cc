// The Pager implementation: the data file map, shadow paging, the free list,
// the write-ahead log, checkpoints and recovery. See storage/pager.h for the
// commit protocol (rules 1-8) this file implements, and storage/format.h for
// the on-disk formats.
//
// Locks (never held in the reverse order):
//   writer gate (writer_mu_/writer_active_): one write Txn at a time; owns all
//     "writer-owned" fields below (base_, map_len_, maps_ append, free-list
//     mutation, log_used_, checkpoint state).
//   alloc_mu_ -> state_mu_ -> err_mu_: alloc_mu_ guards the free/pending sets
//     (mutated by the writer, read by Stats/AccountedPages/Verify);
//     state_mu_ guards the published snapshot, the reader table and the map
//     pointer; err_mu_ guards the sticky error.
//   sync_mu_ -> err_mu_: log sequence numbers and the group-commit leader.
// Readers take state_mu_ only in BeginRead and in ~Txn; Get takes no lock.
// The mutexes' contracts are annotated (storage/mutex.h) and checked by
// tools/check-thread-safety; the writer gate is not a lock the analysis can
// follow (held from BeginWrite to Commit/Abort), so writer-owned fields are
// unannotated.
#include "storage/pager.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "storage/checksum.h"
#include "storage/coding.h"
#include "storage/mutex.h"

namespace mmdoc::storage {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

uint64_t Align8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }

std::string PageMsg(PageId id, const std::string& what) {
  return "page " + std::to_string(id) + ": " + what;
}

// Which pages this process has verified (or written). Two levels, so it can
// grow while readers test bits without a lock: chunk pointers are published
// with release stores before any snapshot that covers them.
class VerifiedBitmap {
 public:
  static constexpr int kChunkShift = 20;  // 2^20 pages per chunk (128 KiB)
  static constexpr uint64_t kChunkWords = (1ull << kChunkShift) / 64;
  static constexpr size_t kChunks = 4096;  // covers 2^32 pages

  VerifiedBitmap() : top_(new std::atomic<std::atomic<uint64_t>*>[kChunks]) {
    for (size_t i = 0; i < kChunks; i++) top_[i].store(nullptr);
  }
  ~VerifiedBitmap() {
    for (size_t i = 0; i < kChunks; i++) delete[] top_[i].load();
  }
  VerifiedBitmap(const VerifiedBitmap&) = delete;
  VerifiedBitmap& operator=(const VerifiedBitmap&) = delete;

  // Makes bits for pages [0, pages) available. Writer only.
  void Reserve(uint64_t pages) {
    uint64_t chunks = std::min<uint64_t>(
        kChunks, (pages + (1ull << kChunkShift) - 1) >> kChunkShift);
    for (uint64_t c = 0; c < chunks; c++) {
      if (top_[c].load(std::memory_order_relaxed) != nullptr) continue;
      auto* chunk = new std::atomic<uint64_t>[kChunkWords];
      for (uint64_t w = 0; w < kChunkWords; w++) chunk[w].store(0);
      top_[c].store(chunk, std::memory_order_release);
    }
  }
  bool Test(uint64_t id) const {
    std::atomic<uint64_t>* w = Word(id);
    return w != nullptr &&
           (w->load(std::memory_order_relaxed) & (1ull << (id & 63))) != 0;
  }
  void Set(uint64_t id) {
    if (std::atomic<uint64_t>* w = Word(id)) {
      w->fetch_or(1ull << (id & 63), std::memory_order_relaxed);
    }
  }
  void Clear(uint64_t id) {
    if (std::atomic<uint64_t>* w = Word(id)) {
      w->fetch_and(~(1ull << (id & 63)), std::memory_order_relaxed);
    }
  }

 private:
  std::atomic<uint64_t>* Word(uint64_t id) const {
    uint64_t c = id >> kChunkShift;
    if (c >= kChunks) return nullptr;
    std::atomic<uint64_t>* chunk = top_[c].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    return &chunk[(id & ((1ull << kChunkShift) - 1)) >> 6];
  }
  std::unique_ptr<std::atomic<std::atomic<uint64_t>*>[]> top_;
};

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
  bool insert(PageId id) {
    if (id / 64 >= words_.size()) words_.resize(std::max<size_t>(id / 64 + 1, words_.size() * 5 / 4));
    uint64_t& w = words_[id / 64];
    const uint64_t bit = uint64_t{1} << (id % 64);
    if (w & bit) return false;
    w |= bit;
    count_++;
    if (id / 64 < first_word_) first_word_ = id / 64;
    return true;
  }
  // The lowest free page at or after `from`, or 0 when there is none.
  PageId Next(PageId from) const {
    size_t i = std::max<size_t>(from / 64, first_word_);
    if (i >= words_.size()) return 0;
    uint64_t w = words_[i];
    if (i == from / 64) w &= ~uint64_t{0} << (from % 64);
    while (w == 0) {
      if (++i >= words_.size()) return 0;
      w = words_[i];
    }
    return i * 64 + static_cast<PageId>(__builtin_ctzll(w));
  }
  // Removes and returns the lowest run of n consecutive free pages (0: none).
  PageId TakeRun(uint32_t n) {
    PageId start = 0, prev = 0;
    uint32_t len = 0;
    for (PageId id = Next(0); id != 0; id = Next(id + 1)) {
      if (len > 0 && id == prev + 1) {
        len++;
      } else {
        start = id;
        len = 1;
      }
      prev = id;
      if (len == n) {
        for (PageId p = start; p < start + n; p++) Erase(p);
        return start;
      }
    }
    return 0;
  }
  template <typename F>
  void ForEach(F f) const {
    for (PageId id = Next(0); id != 0; id = Next(id + 1)) f(id);
  }
  std::vector<PageId> ToVector() const {
    std::vector<PageId> v;
    v.reserve(count_);
    ForEach([&](PageId id) { v.push_back(id); });
    return v;
  }

 private:
  void Erase(PageId id) {
    words_[id / 64] &= ~(uint64_t{1} << (id % 64));
    count_--;
    while (first_word_ < words_.size() && words_[first_word_] == 0) first_word_++;
  }
  std::vector<uint64_t> words_;
  size_t count_ = 0;
  size_t first_word_ = 0;  // no free page below word first_word_
};

struct Snapshot {
  uint64_t txid = 0;
  PageId roots[kMetaRoots] = {};
  uint64_t page_count = 0;
  const uint8_t* base = nullptr;
};

}  // namespace

class PagerImpl;

class ReadTxnImpl final : public Txn {
 public:
  ReadTxnImpl(PagerImpl* p, const Snapshot& snap) : p_(p), snap_(snap) {}
  ~ReadTxnImpl() override;

  bool writable() const override { return false; }
  uint64_t txid() const override { return snap_.txid; }
  uint32_t page_size() const override;
  uint64_t page_count() const override { return snap_.page_count; }
  PageId root(int slot) const override {
    return slot >= 0 && slot < kMetaRoots ? snap_.roots[slot] : 0;
  }
  void set_root(int, PageId) override { assert(false && "read-only txn"); }
  Status Get(PageId id, const uint8_t** page) override;
  Status Allocate(PageType, uint32_t, PageId*, uint8_t**) override {
    return Status::InvalidArgument("Allocate in a read transaction");
  }
  Status Modify(PageId, PageId*, uint8_t**) override {
    return Status::InvalidArgument("Modify in a read transaction");
  }
  Status Free(PageId) override {
    return Status::InvalidArgument("Free in a read transaction");
  }
  bool IsDirty(PageId) const override { return false; }
  // Ends a read snapshot: nothing to commit.
  Status Commit(std::string_view, Durability) override { return Status::OK(); }
  void Abort() override {}

 private:
  PagerImpl* const p_;
  const Snapshot snap_;
};

// What a write txn did to pages. The pager keeps the lists between write
// txns (emptied), so that a txn starts with the capacity the last one grew:
// growing them from empty was ~1.5k instructions of every single-write
// commit (callgrind).
struct WriteLists {
  // Runs this txn allocated (first page, length); a run freed again has its
  // dirty mark cleared and is skipped at commit.
  std::vector<std::pair<PageId, uint32_t>> dirty;
  std::vector<PageId> taken;         // pages taken from the free set
  std::vector<PageId> freed_dirty;   // pages this txn allocated, then freed
  std::vector<PageId> freed_recent;  // born after the last checkpoint
  std::vector<PageId> freed_ckpt;    // born at or before the last checkpoint

  void Clear() {
    dirty.clear();
    taken.clear();
    freed_dirty.clear();
    freed_recent.clear();
    freed_ckpt.clear();
  }
};

class WriteTxnImpl final : public Txn {
 public:
  WriteTxnImpl(PagerImpl* p, const Snapshot& base);
  ~WriteTxnImpl() override { Abort(); }

  bool writable() const override { return true; }
  uint64_t txid() const override { return txid_; }
  uint32_t page_size() const override;
  uint64_t page_count() const override { return page_count_; }
  PageId root(int slot) const override {
    return slot >= 0 && slot < kMetaRoots ? roots_[slot] : 0;
  }
  void set_root(int slot, PageId id) override {
    assert(slot >= 0 && slot < kMetaRoots);
    if (slot >= 0 && slot < kMetaRoots) roots_[slot] = id;
  }
  Status Get(PageId id, const uint8_t** page) override;
  Status Allocate(PageType type, uint32_t n, PageId* id,
                  uint8_t** page) override;
  // Allocate, optionally without zeroing (for a run about to be overwritten).
  Status AllocateRun(PageType type, uint32_t n, bool zero, PageId* id,
                     uint8_t** page);
  Status Modify(PageId id, PageId* new_id, uint8_t** page) override {
    return ModifySkipping(id, 0, 0, new_id, page);
  }
  Status ModifySkipping(PageId id, uint32_t gap_begin, uint32_t gap_end, PageId* new_id,
                        uint8_t** page) override;
  Status Free(PageId id) override;
  bool IsDirty(PageId id) const override;
  Status Commit(std::string_view log_payload, Durability durability) override;
  void Abort() override;

 private:
  friend class PagerImpl;
  Status FreeRun(PageId id, uint32_t run, uint64_t born);

  PagerImpl* const p_;
  const uint64_t txid_;
  const uint32_t serial_;  // this txn's mark in PagerImpl::marks_
  PageId roots_[kMetaRoots];
  uint64_t page_count_;
  bool done_ = false;
  WriteLists lists_;
};

// Writer-owned bookkeeping per page, indexed by page id (grown with the
// file). Arrays, not hash tables: a B+tree commit of 1000 inserts touches
// thousands of pages, and the per-page hash inserts, lookups, erases and
// frees were a fifth of insert time at 1M documents (perf).
struct PageMark {
  uint32_t dirty = 0;     // serial of the write txn that allocated the run
  uint32_t run = 0;       // its length, valid while `dirty` is current
  uint32_t freed = 0;     // serial of the write txn that freed the run
  uint32_t unsummed = 0;  // run length when the checkpoint must sum it, else 0
};

class PagerImpl final : public Pager {
 public:
  PagerImpl(const std::string& path, const PagerOptions& options)
      : path_(path),
        log_path_(path + "-log"),
        opts_(options),
        fs_(options.fs != nullptr ? options.fs : FileSystem::Default()) {}
  ~PagerImpl() override;

  Status Init();

  Status Recover(const ReplayFn& apply) override;
  Result<std::unique_ptr<Txn>> BeginRead() override MMDOC_EXCLUDES(state_mu_);
  Result<std::unique_ptr<Txn>> BeginWrite() override;
  Status CommitReplayed(Txn* txn) override;
  Status Checkpoint() override;
  Status Flush() override MMDOC_EXCLUDES(sync_mu_);
  Status AccountedPages(std::vector<PageId>* pages) override
      MMDOC_EXCLUDES(alloc_mu_);
  Status Verify() override MMDOC_EXCLUDES(state_mu_, alloc_mu_);
  PagerStats Stats() override MMDOC_EXCLUDES(state_mu_, alloc_mu_);
  const std::string& path() const override { return path_; }
  Status BackgroundError() override MMDOC_EXCLUDES(err_mu_) {
    MutexLock l(&err_mu_);
    return bg_error_;
  }
  Status SyncForCommit(Durability d, uint64_t log_offset,
                       uint64_t length) override MMDOC_EXCLUDES(sync_mu_);
  void TEST_CrashOnClose() override { crash_on_close_ = true; }
  void TEST_SetLastWriteSerial(uint32_t last) override {
    AcquireWriter();
    write_serial_ = last;
    ReleaseWriter();
  }

 private:
  friend class ReadTxnImpl;
  friend class WriteTxnImpl;

  // --- pages ---
  // The hot path of Get: bounds, then the checksum the first time.
  Status CheckPage(PageId id, const uint8_t* base, uint64_t page_count,
                   const uint8_t** out) {
    if (id < 2 || id >= page_count) {
      return Status::Corruption(PageMsg(
          id, "out of range (page count " + std::to_string(page_count) + ")"));
    }
    const uint8_t* pg = base + id * ps_;
    if (!opts_.paranoid_checks && verified_.Test(id)) {
      *out = pg;
      return Status::OK();
    }
    MMDOC_RETURN_IF_ERROR(VerifyPageBytes(id, pg, page_count));
    verified_.Set(id);
    *out = pg;
    return Status::OK();
  }
  Status VerifyPageBytes(PageId id, const uint8_t* pg, uint64_t page_count) {
    uint32_t run = DecodeFixed32(pg + kPageRunLengthOffset);
    if (run == 0 || run > page_count - id) {
      return Status::Corruption(
          PageMsg(id, "bad run length " + std::to_string(run)));
    }
    if (DecodeFixed64(pg + kPageChecksumOffset) !=
        PageChecksum(pg, uint64_t{run} * ps_, id)) {
      return Status::Corruption(PageMsg(id, "checksum mismatch"));
    }
    return Status::OK();
  }
  bool CheckMeta(const uint8_t* pg, uint32_t ps, PageId id, std::string* why);
  Status EnsureCapacity(uint64_t pages);
  Status MapData(uint64_t min_len) MMDOC_EXCLUDES(state_mu_);

  // --- open ---
  Status CreateNew();
  Status LoadExisting(uint64_t size);
  Status LoadFreeList(PageId root, uint64_t count, uint64_t page_count)
      MMDOC_REQUIRES(alloc_mu_);
  Status OpenLog(bool fresh);
  Status ZeroFill(File* f, uint64_t from, uint64_t to);
  // Calls fn for each valid record after the checkpoint that ends at or
  // before `limit`; returns the offset after the last one and sets *records.
  uint64_t ScanLog(const std::function<bool(uint64_t, std::string_view)>& fn,
                   uint64_t limit, uint64_t* records);

  // --- writer ---
  void AcquireWriter() MMDOC_EXCLUDES(writer_mu_) {
    MutexLock l(&writer_mu_);
    while (writer_active_) writer_cv_.Wait();
    writer_active_ = true;
  }
  void ReleaseWriter() MMDOC_EXCLUDES(writer_mu_) {
    {
      MutexLock l(&writer_mu_);
      writer_active_ = false;
    }
    writer_cv_.Signal();
  }
  Status CommitTxn(WriteTxnImpl* txn, std::string_view payload, Durability d,
                   bool replayed);
  void AbortTxn(WriteTxnImpl* txn) MMDOC_EXCLUDES(alloc_mu_);
  // Marks txn done, keeps its lists' capacity for the next write txn and
  // releases the writer gate. The txn's lists are empty afterwards.
  void FinishTxn(WriteTxnImpl* txn) MMDOC_EXCLUDES(spare_mu_);
  void ReleasePending() MMDOC_EXCLUDES(state_mu_, alloc_mu_);
  // "Locked": the caller holds the writer gate (not a mutex).
  Status CheckpointLocked() MMDOC_EXCLUDES(alloc_mu_, state_mu_, sync_mu_);
  Status SyncImpl(Durability d, uint64_t off, uint64_t len, uint64_t lsn_end)
      MMDOC_EXCLUDES(sync_mu_);
  void SetError(const Status& s) MMDOC_EXCLUDES(err_mu_) {
    MutexLock l(&err_mu_);
    if (bg_error_.ok()) bg_error_ = s;
    has_error_.store(true, std::memory_order_release);
  }
  bool HasError() const { return has_error_.load(std::memory_order_acquire); }
  void StartFlusher();
  void StopFlusher() MMDOC_EXCLUDES(sync_mu_);
  void UnregisterReader(uint64_t txid) MMDOC_EXCLUDES(state_mu_) {
    MutexLock l(&state_mu_);
    if (txid == newest_reader_txid_ && newest_readers_ > 0) {
      newest_readers_--;
      return;
    }
    auto it = readers_.find(txid);
    if (it != readers_.end() && --it->second == 0) readers_.erase(it);
  }
  // The oldest open snapshot's txid, or UINT64_MAX when none is open.
  uint64_t OldestReaderLocked() const MMDOC_REQUIRES(state_mu_) {
    uint64_t oldest = newest_readers_ > 0 ? newest_reader_txid_ : UINT64_MAX;
    if (!readers_.empty()) oldest = std::min(oldest, readers_.begin()->first);
    return oldest;
  }
  // Takes n contiguous free pages; 0 if none.
  PageId TakeRunLocked(uint32_t n) MMDOC_REQUIRES(alloc_mu_);

  // The writer's reads of committed_ and base_, which take no state_mu_:
  // only the writer (or Init, before the Pager is shared) writes them, so it
  // reads its own writes. The analysis cannot express "written under
  // state_mu_ by the writer, read under state_mu_ or by the writer", hence
  // no analysis here; everyone else must hold state_mu_.
  const Snapshot& writer_committed() const MMDOC_NO_THREAD_SAFETY_ANALYSIS {
    return committed_;
  }
  uint8_t* writer_base() const MMDOC_NO_THREAD_SAFETY_ANALYSIS { return base_; }

  const std::string path_;
  const std::string log_path_;
  const PagerOptions opts_;
  FileSystem* const fs_;
  bool opened_ = false;          // set by Init, before the Pager is shared
  bool crash_on_close_ = false;  // test hook, set before the destructor runs

  // Set by Init, before the Pager is shared; read-only afterwards.
  std::unique_ptr<File> data_;
  std::unique_ptr<FileSystem::Lock> lock_;
  std::unique_ptr<File> log_;
  uint32_t ps_ = 0;

  // Maps of the data file; all but the last are kept for old readers.
  std::vector<std::pair<uint8_t*, uint64_t>> maps_;  // writer-owned
  // The current map: written by the writer under state_mu_; the writer
  // reads it without (writer_base()).
  uint8_t* base_ MMDOC_GUARDED_BY(state_mu_) = nullptr;
  uint64_t map_len_ = 0;  // writer-owned
  std::atomic<uint64_t> file_size_{0};
  uint8_t* log_base_ = nullptr;  // set by Init, read-only afterwards
  uint64_t log_cap_ = 0;         // set by Init, read-only afterwards

  // Published state.
  Mutex state_mu_;
  // Written by the writer under state_mu_; the writer reads it without
  // (writer_committed()).
  Snapshot committed_ MMDOC_GUARDED_BY(state_mu_);
  // Open readers: those of the newest snapshot any reader took are counted
  // in newest_readers_, older ones in readers_ (snapshot txid -> count).
  // Most read transactions start and end at the same newest snapshot, and
  // a map node per transaction (insert, then erase) cost ~290 instructions,
  // 7% of a DB::Get (callgrind).
  std::map<uint64_t, int> readers_ MMDOC_GUARDED_BY(state_mu_);
  uint64_t newest_reader_txid_ MMDOC_GUARDED_BY(state_mu_) = 0;
  int newest_readers_ MMDOC_GUARDED_BY(state_mu_) = 0;

  Mutex writer_mu_;
  CondVar writer_cv_{&writer_mu_};
  bool writer_active_ MMDOC_GUARDED_BY(writer_mu_) = false;

  // The lists the last finished write txn left (WriteTxnImpl's ctor takes
  // them, FinishTxn gives them back emptied).
  Mutex spare_mu_;
  WriteLists spare_lists_ MMDOC_GUARDED_BY(spare_mu_);

  // Allocation state (mutated by the writer under alloc_mu_).
  Mutex alloc_mu_;
  FreeSet free_ MMDOC_GUARDED_BY(alloc_mu_);
  // Freed pages waiting for readers (rule 5a) / for a checkpoint (rule 5b).
  std::map<uint64_t, std::vector<PageId>> pending_ MMDOC_GUARDED_BY(alloc_mu_);
  std::map<uint64_t, std::vector<PageId>> pending_ckpt_
      MMDOC_GUARDED_BY(alloc_mu_);
  uint64_t pending_count_ MMDOC_GUARDED_BY(alloc_mu_) = 0;
  uint64_t pending_ckpt_count_ MMDOC_GUARDED_BY(alloc_mu_) = 0;
  std::vector<PageId> freelist_pages_ MMDOC_GUARDED_BY(alloc_mu_);
  std::vector<uint8_t> log_buf_;  // a record being written (writer-owned)
  // Writer-owned: per-page marks (PageMark) and the serial of the newest
  // write txn (a txid can repeat after an abort; a serial never does).
  std::vector<PageMark> marks_;
  uint32_t write_serial_ = 0;
  PageMark& Mark(PageId id) {
    if (id >= marks_.size()) marks_.resize(std::max<uint64_t>(id + 1, marks_.size() * 5 / 4));
    return marks_[id];
  }
  uint32_t NextWriteSerial() {
    if (write_serial_ == UINT32_MAX) {  // wrapped: no old serial may match
      for (PageMark& m : marks_) m.dirty = m.freed = 0;
      write_serial_ = 0;
    }
    return ++write_serial_;
  }
  // Pages written since the last checkpoint, still in use, whose checksums
  // the next checkpoint computes: first pages, each with marks_[id].unsummed
  // set; an entry whose mark was cleared (freed since) is skipped, and an id
  // listed twice is summed once.
  std::vector<PageId> unsummed_;

  // Checkpoint and log state (writer-owned; atomics for Stats).
  std::atomic<uint64_t> checkpoint_txid_{0};
  std::atomic<uint64_t> log_epoch_{0};
  std::atomic<uint64_t> log_used_{0};
  // recovered_/recovering_: the writer gate, or writer_mu_ in Recover (run
  // before concurrent use); BeginWrite reads them under the gate alone.
  bool recovered_ = false;
  bool recovering_ = false;      // set by Recover while it replays
  uint64_t replay_records_ = 0;  // set by Init (OpenLog), cleared by Recover

  // Log sequence numbers: bytes appended over the life of this Pager.
  Mutex sync_mu_;
  CondVar sync_cv_{&sync_mu_};
  uint64_t appended_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;
  uint64_t durable_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;
  uint64_t log_start_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;  // lsn of offset 0
  bool leader_active_ MMDOC_GUARDED_BY(sync_mu_) = false;
  bool stop_flusher_ MMDOC_GUARDED_BY(sync_mu_) = false;
  CondVar flusher_cv_{&sync_mu_};
  std::thread flusher_;           // writer-owned; joined by the destructor
  bool flusher_started_ = false;  // writer-owned

  Mutex err_mu_;
  std::atomic<bool> has_error_{false};
  Status bg_error_ MMDOC_GUARDED_BY(err_mu_);

  VerifiedBitmap verified_;  // lock-free: atomic bits and chunk pointers
};

// ---------------------------------------------------------------------------
// Txn implementations

ReadTxnImpl::~ReadTxnImpl() { p_->UnregisterReader(snap_.txid); }
uint32_t ReadTxnImpl::page_size() const { return p_->ps_; }
Status ReadTxnImpl::Get(PageId id, const uint8_t** page) {
  return p_->CheckPage(id, snap_.base, snap_.page_count, page);
}

WriteTxnImpl::WriteTxnImpl(PagerImpl* p, const Snapshot& base)
    : p_(p), txid_(base.txid + 1), serial_(p->NextWriteSerial()), page_count_(base.page_count) {
  std::copy(base.roots, base.roots + kMetaRoots, roots_);
  MutexLock l(&p_->spare_mu_);
  std::swap(lists_, p_->spare_lists_);  // empty lists, or the last txn's
}

uint32_t WriteTxnImpl::page_size() const { return p_->ps_; }

bool WriteTxnImpl::IsDirty(PageId id) const {
  return id < p_->marks_.size() && p_->marks_[id].dirty == serial_;
}

Status WriteTxnImpl::Get(PageId id, const uint8_t** page) {
  if (id >= 2 && id < page_count_) {
    const uint8_t* pg = p_->writer_base() + id * p_->ps_;
    // Cheap filter first: a page this txn wrote carries its txid.
    if (DecodeFixed64(pg + kPageTxidOffset) == txid_ && IsDirty(id)) {
      *page = pg;
      return Status::OK();
    }
  }
  return p_->CheckPage(id, p_->writer_base(), page_count_, page);
}

Status WriteTxnImpl::Allocate(PageType type, uint32_t n, PageId* id,
                              uint8_t** page) {
  return AllocateRun(type, n, /*zero=*/true, id, page);
}

Status WriteTxnImpl::AllocateRun(PageType type, uint32_t n, bool zero,
                                 PageId* id, uint8_t** page) {
  if (done_) return Status::InvalidArgument("transaction already finished");
  if (n == 0) return Status::InvalidArgument("Allocate of 0 pages");
  if (p_->HasError()) return p_->BackgroundError();
  PageId got;
  {
    MutexLock l(&p_->alloc_mu_);
    got = p_->TakeRunLocked(n);
  }
  if (got != 0) {
    for (uint32_t i = 0; i < n; i++) lists_.taken.push_back(got + i);
  } else {
    got = page_count_;
    MMDOC_RETURN_IF_ERROR(p_->EnsureCapacity(page_count_ + n));
    page_count_ += n;
  }
  const uint32_t ps = p_->ps_;
  uint8_t* pg = p_->writer_base() + got * ps;
  // Modify overwrites the whole run with a copy: zeroing it first doubled
  // the memory traffic of every copy-on-write (callgrind).
  if (zero) std::memset(pg, 0, uint64_t{n} * ps);
  EncodeFixed64(pg + kPageTxidOffset, txid_);
  pg[kPageTypeOffset] = static_cast<uint8_t>(type);
  EncodeFixed32(pg + kPageRunLengthOffset, n);
  p_->Mark(got + n - 1);  // covers the whole run
  PageMark& m = p_->marks_[got];
  m.dirty = serial_;
  m.run = n;
  lists_.dirty.emplace_back(got, n);
  *id = got;
  *page = pg;
  return Status::OK();
}

Status WriteTxnImpl::ModifySkipping(PageId id, uint32_t gap_begin, uint32_t gap_end,
                                    PageId* new_id, uint8_t** page) {
  if (done_) return Status::InvalidArgument("transaction already finished");
  const uint8_t* old;
  MMDOC_RETURN_IF_ERROR(Get(id, &old));
  if (IsDirty(id)) {
    *new_id = id;
    *page = const_cast<uint8_t*>(old);
    return Status::OK();
  }
  uint32_t run = DecodeFixed32(old + kPageRunLengthOffset);
  uint64_t born = DecodeFixed64(old + kPageTxidOffset);
  auto type = static_cast<PageType>(old[kPageTypeOffset]);
  PageId nid;
  uint8_t* np;
  MMDOC_RETURN_IF_ERROR(AllocateRun(type, run, /*zero=*/false, &nid, &np));
  // `old` stays valid across a remap: old maps live until Close. Copying
  // around the caller's free space (LMDB's mdb_page_copy does the same)
  // saves a third of the copy at a B+tree's usual fill.
  if (run == 1 && kPageHeaderSize <= gap_begin && gap_begin < gap_end && gap_end <= p_->ps_) {
    std::memcpy(np, old, gap_begin);
    std::memcpy(np + gap_end, old + gap_end, p_->ps_ - gap_end);
  } else {
    std::memcpy(np, old, uint64_t{run} * p_->ps_);
  }
  EncodeFixed64(np + kPageTxidOffset, txid_);
  MMDOC_RETURN_IF_ERROR(FreeRun(id, run, born));
  *new_id = nid;
  *page = np;
  return Status::OK();
}

Status WriteTxnImpl::Free(PageId id) {
  if (done_) return Status::InvalidArgument("transaction already finished");
  if (IsDirty(id)) {
    PageMark& m = p_->marks_[id];
    for (uint32_t i = 0; i < m.run; i++) lists_.freed_dirty.push_back(id + i);
    m.dirty = 0;
    return Status::OK();
  }
  const uint8_t* pg;
  MMDOC_RETURN_IF_ERROR(Get(id, &pg));
  return FreeRun(id, DecodeFixed32(pg + kPageRunLengthOffset),
                 DecodeFixed64(pg + kPageTxidOffset));
}

Status WriteTxnImpl::FreeRun(PageId id, uint32_t run, uint64_t born) {
  PageMark& m = p_->Mark(id);
  if (m.freed == serial_) return Status::InvalidArgument(PageMsg(id, "freed twice in one txn"));
  m.freed = serial_;
  // Rule 5(b): a page that may be reachable from the durable meta waits for
  // the next checkpoint.
  auto& list = born <= p_->checkpoint_txid_.load() ? lists_.freed_ckpt
                                                   : lists_.freed_recent;
  for (uint32_t i = 0; i < run; i++) list.push_back(id + i);
  return Status::OK();
}

Status WriteTxnImpl::Commit(std::string_view log_payload,
                            Durability durability) {
  if (done_) return Status::InvalidArgument("transaction already finished");
  if (p_->recovering_) {
    Abort();
    return Status::InvalidArgument(
        "Commit during Recover: use Pager::CommitReplayed");
  }
  return p_->CommitTxn(this, log_payload, durability, /*replayed=*/false);
}

void WriteTxnImpl::Abort() {
  if (done_) return;
  p_->AbortTxn(this);
}

// ---------------------------------------------------------------------------
// Open

bool PagerImpl::CheckMeta(const uint8_t* pg, uint32_t ps, PageId id,
                          std::string* why) {
  if (DecodeFixed64(pg + kMetaMagicOffset) != kMagic) {
    *why = PageMsg(id, "bad magic");
    return false;
  }
  uint32_t version = DecodeFixed32(pg + kMetaVersionOffset);
  if (version < kMinFormatVersion || version > kFormatVersion) {
    *why = PageMsg(id, "unsupported format version " + std::to_string(version));
    return false;
  }
  if (DecodeFixed32(pg + kMetaPageSizeOffset) != ps) {
    *why = PageMsg(id, "page size mismatch");
    return false;
  }
  if (pg[kPageTypeOffset] != static_cast<uint8_t>(PageType::kMeta) ||
      DecodeFixed32(pg + kPageRunLengthOffset) != 1) {
    *why = PageMsg(id, "not a meta page");
    return false;
  }
  if (DecodeFixed64(pg + kPageChecksumOffset) != PageChecksum(pg, ps, id)) {
    *why = PageMsg(id, "checksum mismatch");
    return false;
  }
  return true;
}

Status PagerImpl::MapData(uint64_t min_len) {
  uint64_t len = std::max<uint64_t>(opts_.initial_map_size, 1ull << 16);
  if (map_len_ != 0) len = map_len_;
  while (len < min_len) len *= 2;
  Result<uint8_t*> m = data_->Map(len, /*writable=*/true);
  if (!m.ok()) return m.status();
  // B+tree pages are read and written at random. Without this hint a fault
  // read ahead into large folios, and since the kernel tracks dirtiness per
  // folio, each page written dirtied its whole folio: a 10M-document insert
  // dirtied 1.2-2.3 GB/s of page cache for a file growing ~13 MB/s (see
  // File::AdviseRandomAccess). A failure only costs speed, so it is ignored.
  (void)data_->AdviseRandomAccess(*m, len);
  // Old maps stay mapped for readers that still use them, but without their
  // page-table entries: a page the writer touched before the remap and
  // touches again through the new map would otherwise be resident twice
  // (at 4M documents, peak RSS was twice the file). A reader of an old map
  // faults its pages back in from the page cache. A failure only costs
  // memory, so it is ignored.
  for (const auto& old : maps_) (void)data_->DropMappedPages(old.first, old.second);
  maps_.emplace_back(*m, len);
  MutexLock l(&state_mu_);
  base_ = *m;
  map_len_ = len;
  return Status::OK();
}

Status PagerImpl::EnsureCapacity(uint64_t pages) {
  const uint64_t need = pages * ps_;
  uint64_t size = file_size_.load();
  if (need > size) {
    uint64_t target = std::max(need, size + std::max(kMiB, size / 8));
    target = (target + ps_ - 1) / ps_ * ps_;
    Status s = data_->Allocate(target);
    if (!s.ok()) {
      SetError(s);
      return s;
    }
    file_size_.store(target);
    if (target > map_len_) {
      s = MapData(target);
      if (!s.ok()) {
        SetError(s);
        return s;
      }
    }
  }
  verified_.Reserve(pages);
  return Status::OK();
}

Status PagerImpl::Init() {
  const uint32_t ps = opts_.page_size;
  if (ps < kMinPageSize || ps > kMaxPageSize || (ps & (ps - 1)) != 0) {
    return Status::InvalidArgument(
        "page_size must be a power of two in 4096..65536, got " +
        std::to_string(ps));
  }
  if (opts_.log_size < 4096) {
    return Status::InvalidArgument("log_size must be at least 4096");
  }
  if (!opts_.create_if_missing && !fs_->Exists(path_)) {
    return Status::NotFound(path_, "database does not exist");
  }
  Result<std::unique_ptr<File>> f = fs_->Open(path_, opts_.create_if_missing);
  if (!f.ok()) return f.status();
  data_ = std::move(f.value());
  Result<std::unique_ptr<FileSystem::Lock>> lk = fs_->LockFile(path_);
  if (!lk.ok()) return lk.status();
  lock_ = std::move(lk.value());
  Result<uint64_t> size = data_->Size();
  if (!size.ok()) return size.status();
  bool fresh = *size == 0;
  if (fresh) {
    MMDOC_RETURN_IF_ERROR(CreateNew());
  } else {
    MMDOC_RETURN_IF_ERROR(LoadExisting(*size));
  }
  MMDOC_RETURN_IF_ERROR(OpenLog(fresh));
  opened_ = true;
  return Status::OK();
}

Status PagerImpl::CreateNew() {
  ps_ = opts_.page_size;
  const uint64_t size = 2ull * ps_;
  MMDOC_RETURN_IF_ERROR(data_->Allocate(size));
  file_size_.store(size);
  MMDOC_RETURN_IF_ERROR(MapData(size));
  verified_.Reserve(2);
  std::random_device rd;
  uint64_t epoch = ((uint64_t{rd()} << 24) ^ rd()) | 1;
  uint8_t* m = writer_base();
  std::memset(m, 0, 2ull * ps_);
  EncodeFixed64(m + kPageTxidOffset, 0);
  m[kPageTypeOffset] = static_cast<uint8_t>(PageType::kMeta);
  EncodeFixed32(m + kPageRunLengthOffset, 1);
  EncodeFixed64(m + kMetaMagicOffset, kMagic);
  EncodeFixed32(m + kMetaVersionOffset, kFormatVersion);
  EncodeFixed32(m + kMetaPageSizeOffset, ps_);
  EncodeFixed64(m + kMetaPageCountOffset, 2);
  EncodeFixed64(m + kMetaLogEpochOffset, epoch);
  EncodeFixed64(m + kPageChecksumOffset, PageChecksum(m, ps_, 0));
  MMDOC_RETURN_IF_ERROR(data_->Sync());
  MMDOC_RETURN_IF_ERROR(fs_->SyncDir(path_));
  checkpoint_txid_.store(0);
  log_epoch_.store(epoch);
  MutexLock l(&state_mu_);
  committed_ = Snapshot();
  committed_.page_count = 2;
  committed_.base = base_;
  return Status::OK();
}

Status PagerImpl::LoadExisting(uint64_t size) {
  file_size_.store(size);
  MMDOC_RETURN_IF_ERROR(MapData(size));
  const uint8_t* base = writer_base();
  // Find the valid meta pages, trying every legal page size.
  const uint8_t* best = nullptr;
  uint32_t best_ps = 0;
  uint64_t best_txid = 0;
  PageId best_id = 0;
  std::string why[2];
  // The page size the error message uses: page 0's, else the default.
  uint32_t hint = kMinPageSize;
  if (size >= kMetaPageSizeOffset + 4 &&
      DecodeFixed64(base + kMetaMagicOffset) == kMagic) {
    hint = DecodeFixed32(base + kMetaPageSizeOffset);
    if (hint < kMinPageSize || hint > kMaxPageSize || (hint & (hint - 1))) {
      hint = kMinPageSize;
    }
  }
  for (uint32_t ps = kMinPageSize; ps <= kMaxPageSize; ps *= 2) {
    for (PageId id = 0; id < 2; id++) {
      std::string reason;
      bool ok;
      if ((id + 1) * ps > size) {
        ok = false;
        reason = PageMsg(id, "beyond the end of the file");
      } else {
        ok = CheckMeta(base + id * ps, ps, id, &reason);
      }
      if (ps == hint) why[id] = reason;
      if (!ok) continue;
      uint64_t txid = DecodeFixed64(base + id * ps + kPageTxidOffset);
      if (best == nullptr || txid > best_txid) {
        best = base + id * ps;
        best_ps = ps;
        best_txid = txid;
        best_id = id;
      }
    }
  }
  if (best == nullptr) {
    return Status::Corruption(path_,
                              "no valid meta page: " + why[0] + "; " + why[1]);
  }
  ps_ = best_ps;
  const uint64_t pc = DecodeFixed64(best + kMetaPageCountOffset);
  if (pc < 2) {
    return Status::Corruption(path_, PageMsg(best_id, "meta page count < 2"));
  }
  if (pc > size / ps_) {
    return Status::Corruption(
        path_,
        "file is shorter than its meta page says: " + std::to_string(size) +
            " bytes, meta page " + std::to_string(best_id) + " says " +
            std::to_string(pc) + " pages of " + std::to_string(ps_));
  }
  checkpoint_txid_.store(best_txid);
  log_epoch_.store(DecodeFixed64(best + kMetaLogEpochOffset));
  verified_.Reserve(pc);
  {
    MutexLock l(&state_mu_);
    committed_.txid = best_txid;
    committed_.page_count = pc;
    committed_.base = base_;
    for (int i = 0; i < kMetaRoots; i++) {
      committed_.roots[i] = DecodeFixed64(best + kMetaRootsOffset + 8 * i);
    }
  }
  MutexLock l(&alloc_mu_);
  return LoadFreeList(DecodeFixed64(best + kMetaFreeListRootOffset),
                      DecodeFixed64(best + kMetaFreeCountOffset), pc);
}

Status PagerImpl::LoadFreeList(PageId root, uint64_t count,
                               uint64_t page_count) {
  std::set<PageId> lists;
  const uint32_t cap = (ps_ - kFreeListEntriesOffset) / 8;
  for (PageId id = root; id != 0;) {
    if (id < 2 || id >= page_count) {
      return Status::Corruption(
          PageMsg(id, "free-list page out of range (page count " +
                          std::to_string(page_count) + ")"));
    }
    if (!lists.insert(id).second) {
      return Status::Corruption(PageMsg(id, "free-list chain loops"));
    }
    const uint8_t* pg;
    MMDOC_RETURN_IF_ERROR(CheckPage(id, writer_base(), page_count, &pg));
    if (pg[kPageTypeOffset] != static_cast<uint8_t>(PageType::kFreeList)) {
      return Status::Corruption(PageMsg(
          id, "not a free-list page (type " + std::to_string(pg[16]) + ")"));
    }
    uint32_t n = DecodeFixed32(pg + kFreeListCountOffset);
    if (n > cap) return Status::Corruption(PageMsg(id, "bad free-list count"));
    for (uint32_t i = 0; i < n; i++) {
      PageId e = DecodeFixed64(pg + kFreeListEntriesOffset + 8 * i);
      if (e < 2 || e >= page_count) {
        return Status::Corruption(PageMsg(
            id, "free-list entry " + std::to_string(e) + " out of range"));
      }
      if (!free_.insert(e)) {
        return Status::Corruption(PageMsg(
            id, "free list holds page " + std::to_string(e) + " twice"));
      }
    }
    freelist_pages_.push_back(id);
    id = DecodeFixed64(pg + kFreeListNextOffset);
  }
  for (PageId id : freelist_pages_) {
    if (free_.count(id)) {
      return Status::Corruption(
          PageMsg(id, "free-list page is listed as free"));
    }
  }
  if (free_.size() != count) {
    return Status::Corruption(
        path_, "free list holds " + std::to_string(free_.size()) +
                   " pages, meta says " + std::to_string(count));
  }
  return Status::OK();
}

Status PagerImpl::ZeroFill(File* f, uint64_t from, uint64_t to) {
  std::vector<uint8_t> zeros(std::min<uint64_t>(kMiB, to - from));
  while (from < to) {
    uint64_t n = std::min<uint64_t>(zeros.size(), to - from);
    MMDOC_RETURN_IF_ERROR(f->WriteAt(from, zeros.data(), n));
    from += n;
  }
  return Status::OK();
}

Status PagerImpl::OpenLog(bool fresh) {
  Result<std::unique_ptr<File>> f = fs_->Open(log_path_, /*create=*/true);
  if (!f.ok()) return f.status();
  log_ = std::move(f.value());
  Result<uint64_t> size = log_->Size();
  if (!size.ok()) return size.status();
  const uint64_t want = Align8(opts_.log_size);
  if (fresh) {
    MMDOC_RETURN_IF_ERROR(log_->Truncate(0));
    MMDOC_RETURN_IF_ERROR(ZeroFill(log_.get(), 0, want));
    MMDOC_RETURN_IF_ERROR(log_->Sync());
    MMDOC_RETURN_IF_ERROR(fs_->SyncDir(log_path_));
    log_cap_ = want;
  } else if (*size < want) {
    MMDOC_RETURN_IF_ERROR(ZeroFill(log_.get(), *size, want));
    MMDOC_RETURN_IF_ERROR(log_->Sync());
    MMDOC_RETURN_IF_ERROR(fs_->SyncDir(log_path_));
    log_cap_ = want;
  } else {
    log_cap_ = *size / 8 * 8;
  }
  Result<uint8_t*> m = log_->Map(log_cap_, /*writable=*/true);
  if (!m.ok()) return m.status();
  log_base_ = *m;
  if (fresh) {
    recovered_ = true;
  } else {
    ScanLog(nullptr, log_cap_, &replay_records_);
  }
  return Status::OK();
}

uint64_t PagerImpl::ScanLog(
    const std::function<bool(uint64_t, std::string_view)>& fn, uint64_t limit,
    uint64_t* records) {
  uint64_t off = 0;
  uint64_t expect = checkpoint_txid_.load() + 1;
  const uint64_t epoch = log_epoch_.load();
  *records = 0;
  limit = std::min(limit, log_cap_);
  while (off + kLogHeaderSize <= limit) {
    const uint8_t* r = log_base_ + off;
    uint32_t len = DecodeFixed32(r + kLogLengthOffset);
    if (DecodeFixed32(r + kLogMagicOffset) != kLogRecordMagic ||
        DecodeFixed64(r + kLogEpochOffset) != epoch ||
        DecodeFixed64(r + kLogTxidOffset) != expect ||
        len > limit - off - kLogHeaderSize ||
        DecodeFixed64(r + kLogChecksumOffset) !=
            Checksum(r + 8, kLogHeaderSize - 8 + uint64_t{len}, epoch)) {
      break;
    }
    if (fn && !fn(expect, std::string_view(
                              reinterpret_cast<const char*>(r + kLogHeaderSize),
                              len))) {
      break;
    }
    off += Align8(kLogHeaderSize + uint64_t{len});
    expect++;
    ++*records;
  }
  return off;
}

PagerImpl::~PagerImpl() {
  StopFlusher();
  bool writer_alive;
  {
    MutexLock l(&writer_mu_);
    writer_alive = writer_active_;
  }
  // A live write Txn violates the REQUIRES of ~Pager; do not deadlock.
  assert(!writer_alive && "write Txn outlives its Pager");
  if (opened_ && !crash_on_close_ && !HasError() && !writer_alive) {
    AcquireWriter();
    if (recovered_ && (writer_committed().txid != checkpoint_txid_.load() ||
                       log_used_.load() > 0)) {
      (void)CheckpointLocked();
    }
    ReleaseWriter();
  }
  if (log_base_ != nullptr) (void)log_->Unmap(log_base_, log_cap_);
  for (auto& m : maps_) (void)data_->Unmap(m.first, m.second);
}

// ---------------------------------------------------------------------------
// Transactions

Result<std::unique_ptr<Txn>> PagerImpl::BeginRead() {
  MutexLock l(&state_mu_);
  const uint64_t txid = committed_.txid;
  if (txid != newest_reader_txid_) {
    if (newest_readers_ > 0) readers_[newest_reader_txid_] += newest_readers_;
    newest_reader_txid_ = txid;
    newest_readers_ = 0;
  }
  newest_readers_++;
  return std::unique_ptr<Txn>(new ReadTxnImpl(this, committed_));
}

Result<std::unique_ptr<Txn>> PagerImpl::BeginWrite() {
  if (HasError()) return BackgroundError();
  AcquireWriter();
  if (HasError()) {
    ReleaseWriter();
    return BackgroundError();
  }
  if (!recovered_ && !recovering_) {
    if (replay_records_ > 0) {
      ReleaseWriter();
      return Status::InvalidArgument(
          path_, "the log holds " + std::to_string(replay_records_) +
                     " committed records: call Pager::Recover first");
    }
    recovered_ = true;
    Status s = CheckpointLocked();
    if (!s.ok()) {
      ReleaseWriter();
      return s;
    }
  }
  ReleasePending();
  return std::unique_ptr<Txn>(new WriteTxnImpl(this, writer_committed()));
}

PageId PagerImpl::TakeRunLocked(uint32_t n) {
  if (free_.empty()) return 0;
  return free_.TakeRun(n);
}

void PagerImpl::ReleasePending() {
  uint64_t oldest = UINT64_MAX;
  {
    MutexLock l(&state_mu_);
    oldest = OldestReaderLocked();
  }
  MutexLock l(&alloc_mu_);
  // Rule 5(a): freed by T, reusable once every open snapshot is >= T.
  while (!pending_.empty() && pending_.begin()->first <= oldest) {
    for (PageId id : pending_.begin()->second) free_.insert(id);
    pending_count_ -= pending_.begin()->second.size();
    pending_.erase(pending_.begin());
  }
}

void PagerImpl::FinishTxn(WriteTxnImpl* txn) {
  txn->done_ = true;
  txn->lists_.Clear();
  {
    MutexLock l(&spare_mu_);
    std::swap(spare_lists_, txn->lists_);
  }
  ReleaseWriter();
}

void PagerImpl::AbortTxn(WriteTxnImpl* txn) {
  {
    MutexLock l(&alloc_mu_);
    for (PageId id : txn->lists_.taken) free_.insert(id);
  }
  FinishTxn(txn);
}

Status PagerImpl::CommitTxn(WriteTxnImpl* txn, std::string_view payload,
                            Durability d, bool replayed) {
  if (HasError()) {
    AbortTxn(txn);
    return BackgroundError();
  }
  // Pages this txn wrote are known good (rule 7). Their checksums are
  // computed when they become durable, at the next checkpoint: between
  // checkpoints the log, not these pages, carries the commit, and a page
  // rewritten by many commits before then is summed once, not per commit.
  // With paranoid_checks every read verifies, so sum them now.
  // Pages born since the checkpoint and freed by this txn need no sum.
  for (PageId id : txn->lists_.freed_recent) Mark(id).unsummed = 0;
  for (PageId id : txn->lists_.freed_dirty) Mark(id).unsummed = 0;
  for (const auto& [id, run] : txn->lists_.dirty) {
    PageMark& m = marks_[id];
    if (m.dirty != txn->serial_) continue;  // freed again by this txn
    if (opts_.paranoid_checks) {
      uint8_t* pg = writer_base() + id * ps_;
      EncodeFixed64(pg + kPageChecksumOffset,
                    PageChecksum(pg, uint64_t{run} * ps_, id));
    } else {
      if (m.unsummed == 0) unsummed_.push_back(id);
      m.unsummed = run;
    }
    verified_.Set(id);
    for (uint32_t i = 1; i < run; i++) verified_.Clear(id + i);
  }
  bool by_checkpoint = false;
  uint64_t off = 0, len = 0, lsn_end = 0;
  if (!replayed) {
    len = Align8(kLogHeaderSize + payload.size());
    off = log_used_.load();
    if (len > log_cap_ - off) {
      by_checkpoint = true;  // rule 3: no record; the checkpoint commits it
    } else {
      const uint64_t epoch = log_epoch_.load();
      // kFsync and kGroup write the record with pwrite (WriteAt), the
      // others through the log map. On Linux/ext4 an fdatasync after a write
      // through a shared map took ~10x longer (2.5-4 ms vs 0.3 ms, measured
      // on the test bed) than after pwrite of the same bytes, and the
      // write-protect fault of the first store after each writeback costs
      // ~50-80 us under the writer lock. The map and pwrite see the same page
      // cache, so ScanLog reads either. kMsync keeps writing through the map
      // (its contract: msync of what the commit wrote there).
      const bool via_write = d == Durability::kFsync || d == Durability::kGroup;
      uint8_t* r = log_base_ + off;
      if (via_write) {
        log_buf_.resize(len);
        r = log_buf_.data();
      }
      EncodeFixed32(r + kLogLengthOffset,
                    static_cast<uint32_t>(payload.size()));
      EncodeFixed32(r + kLogMagicOffset, kLogRecordMagic);
      EncodeFixed64(r + kLogTxidOffset, txn->txid_);
      EncodeFixed64(r + kLogEpochOffset, epoch);
      if (!payload.empty()) {
        std::memcpy(r + kLogHeaderSize, payload.data(), payload.size());
      }
      std::memset(r + kLogHeaderSize + payload.size(), 0,
                  len - kLogHeaderSize - payload.size());
      EncodeFixed64(
          r + kLogChecksumOffset,
          Checksum(r + 8, kLogHeaderSize - 8 + payload.size(), epoch));
      if (via_write) {
        Status s = log_->WriteAt(off, r, len);
        if (!s.ok()) {  // not published; the error is sticky (rule 8)
          SetError(s);
          FinishTxn(txn);
          return s;
        }
      }
      log_used_.store(off + len);
      MutexLock l(&sync_mu_);
      appended_lsn_ += len;
      lsn_end = appended_lsn_;
    }
  }
  const bool group = !replayed && !by_checkpoint && d == Durability::kGroup;
  if (!replayed && !by_checkpoint && !group) {
    Status s = SyncImpl(d, off, len, lsn_end);
    if (!s.ok()) {  // not published; the error is sticky (rule 8)
      FinishTxn(txn);
      return s;
    }
  }
  // Publish to new readers.
  {
    MutexLock l(&state_mu_);
    committed_.txid = txn->txid_;
    std::copy(txn->roots_, txn->roots_ + kMetaRoots, committed_.roots);
    committed_.page_count = txn->page_count_;
    committed_.base = base_;
  }
  {
    MutexLock l(&alloc_mu_);
    for (PageId id : txn->lists_.freed_dirty) free_.insert(id);
    if (!txn->lists_.freed_recent.empty()) {
      auto& v = pending_[txn->txid_];
      v.insert(v.end(), txn->lists_.freed_recent.begin(),
               txn->lists_.freed_recent.end());
      pending_count_ += txn->lists_.freed_recent.size();
    }
    if (!txn->lists_.freed_ckpt.empty()) {
      auto& v = pending_ckpt_[txn->txid_];
      v.insert(v.end(), txn->lists_.freed_ckpt.begin(),
               txn->lists_.freed_ckpt.end());
      pending_ckpt_count_ += txn->lists_.freed_ckpt.size();
    }
  }
  Status s;
  if (by_checkpoint) s = CheckpointLocked();
  if (d == Durability::kPeriodic && !replayed) StartFlusher();
  FinishTxn(txn);
  if (group) s = SyncImpl(d, off, len, lsn_end);
  return s;
}

Status PagerImpl::CommitReplayed(Txn* txn) {
  auto* w = dynamic_cast<WriteTxnImpl*>(txn);
  if (w == nullptr || w->p_ != this) {
    return Status::InvalidArgument(
        "CommitReplayed: not a write txn of this pager");
  }
  if (w->done_) return Status::InvalidArgument("transaction already finished");
  return CommitTxn(w, {}, Durability::kNone, /*replayed=*/true);
}

// ---------------------------------------------------------------------------
// Log sync, flush, checkpoint, recovery

Status PagerImpl::SyncForCommit(Durability d, uint64_t log_offset,
                                uint64_t length) {
  uint64_t lsn_end;
  {
    MutexLock l(&sync_mu_);
    lsn_end = log_start_lsn_ + log_offset + length;
  }
  return SyncImpl(d, log_offset, length, lsn_end);
}

// The one place that turns a Durability into syscalls on the log (rule 2).
Status PagerImpl::SyncImpl(Durability d, uint64_t off, uint64_t len,
                           uint64_t lsn_end) {
  if (HasError()) return BackgroundError();
  switch (d) {
    case Durability::kNone:
    case Durability::kPeriodic:  // the flusher thread syncs later
      return Status::OK();
    case Durability::kMsync: {
      if (off > log_cap_ || len > log_cap_ - off) {
        return Status::InvalidArgument("SyncForCommit: range outside the log");
      }
      Status s = log_->MapSync(log_base_, off, len);
      if (!s.ok()) SetError(s);
      return s;
    }
    case Durability::kFsync: {
      uint64_t target;
      {
        MutexLock l(&sync_mu_);
        target = appended_lsn_;
      }
      Status s = log_->Sync();
      if (!s.ok()) {
        SetError(s);
        return s;
      }
      MutexLock l(&sync_mu_);
      durable_lsn_ = std::max(durable_lsn_, target);
      return s;
    }
    case Durability::kGroup: {
      MutexLock l(&sync_mu_);
      for (;;) {
        if (durable_lsn_ >= lsn_end) return Status::OK();
        if (HasError()) return BackgroundError();
        if (!leader_active_) {
          // Leader: one fdatasync covers every record appended so far.
          leader_active_ = true;
          const uint64_t target = appended_lsn_;
          sync_mu_.Unlock();
          Status s = log_->Sync();
          if (!s.ok()) SetError(s);
          sync_mu_.Lock();
          leader_active_ = false;
          if (s.ok()) durable_lsn_ = std::max(durable_lsn_, target);
          sync_cv_.SignalAll();
          if (!s.ok()) return s;
        } else {
          sync_cv_.Wait();
        }
      }
    }
  }
  return Status::InvalidArgument("unknown durability mode");
}

Status PagerImpl::Flush() {
  if (HasError()) return BackgroundError();
  uint64_t target;
  {
    MutexLock l(&sync_mu_);
    target = appended_lsn_;
    if (durable_lsn_ >= target) return Status::OK();
  }
  Status s = log_->Sync();
  if (!s.ok()) {
    SetError(s);
    return s;
  }
  MutexLock l(&sync_mu_);
  durable_lsn_ = std::max(durable_lsn_, target);
  sync_cv_.SignalAll();
  return s;
}

void PagerImpl::StartFlusher() {
  if (flusher_started_) return;
  flusher_started_ = true;
  flusher_ = std::thread([this] {
    MutexLock l(&sync_mu_);
    while (!stop_flusher_) {
      // Sleeps the interval; StopFlusher cuts it short.
      const auto deadline = std::chrono::steady_clock::now() +
                            std::chrono::milliseconds(opts_.sync_interval_ms);
      while (!stop_flusher_ &&
             flusher_cv_.WaitFor(deadline - std::chrono::steady_clock::now())) {
      }
      if (stop_flusher_) break;
      if (appended_lsn_ > durable_lsn_ && !HasError()) {
        sync_mu_.Unlock();
        (void)Flush();
        sync_mu_.Lock();
      }
    }
  });
}

void PagerImpl::StopFlusher() {
  {
    MutexLock l(&sync_mu_);
    stop_flusher_ = true;
  }
  flusher_cv_.SignalAll();
  if (flusher_.joinable()) flusher_.join();
}

Status PagerImpl::Checkpoint() {
  if (HasError()) return BackgroundError();
  AcquireWriter();
  Status s;
  if (!recovered_ && replay_records_ > 0) {
    s = Status::InvalidArgument(path_, "call Pager::Recover before Checkpoint");
  } else {
    recovered_ = true;
    s = CheckpointLocked();
  }
  ReleaseWriter();
  return s;
}

// REQUIRES: the writer gate is held and no write txn is in progress.
Status PagerImpl::CheckpointLocked() {
  if (HasError()) return BackgroundError();
  uint64_t txid = writer_committed().txid;
  if (txid % 2 == checkpoint_txid_.load() % 2) {
    // Never overwrite the newest durable meta: advance by an empty txn.
    txid++;
    MutexLock l(&state_mu_);
    committed_.txid = txid;
  }
  PageId fl_root = 0;
  uint64_t entries_count = 0;
  {
    MutexLock l(&alloc_mu_);
    const uint64_t cap = (ps_ - kFreeListEntriesOffset) / 8;
    // The persisted free list: free + pending + the old free-list pages (on
    // reopen no reader exists and the new meta no longer reaches them).
    const uint64_t total = free_.size() + pending_count_ + pending_ckpt_count_ +
                           freelist_pages_.size();
    const uint64_t k = (total + cap) / (cap + 1);  // ceil(total / (cap + 1))
    std::vector<PageId> new_fl;
    while (new_fl.size() < k && !free_.empty()) new_fl.push_back(free_.TakeRun(1));
    const uint64_t a = new_fl.size();
    uint64_t need = (total - a + cap - 1) / cap;
    if (a == k) need = k;
    if (need > a) {
      const uint64_t pc = writer_committed().page_count;
      const uint64_t ext = need - a;
      Status s = EnsureCapacity(pc + ext);
      if (!s.ok()) {
        for (PageId id : new_fl) free_.insert(id);
        return s;
      }
      for (uint64_t i = 0; i < ext; i++) new_fl.push_back(pc + i);
      MutexLock sl(&state_mu_);
      committed_.page_count = pc + ext;
    }
    // Old free-list pages were reachable from the durable meta: they wait
    // for this checkpoint (rule 5b).
    if (!freelist_pages_.empty()) {
      auto& v = pending_ckpt_[txid];
      v.insert(v.end(), freelist_pages_.begin(), freelist_pages_.end());
      pending_ckpt_count_ += freelist_pages_.size();
    }
    std::vector<PageId> entries = free_.ToVector();
    for (const auto& [t, v] : pending_)
      entries.insert(entries.end(), v.begin(), v.end());
    for (const auto& [t, v] : pending_ckpt_) {
      entries.insert(entries.end(), v.begin(), v.end());
    }
    std::sort(entries.begin(), entries.end());
    entries_count = entries.size();
    size_t next_entry = 0;
    for (size_t i = 0; i < new_fl.size(); i++) {
      const PageId id = new_fl[i];
      uint8_t* pg = writer_base() + id * ps_;
      std::memset(pg, 0, ps_);
      EncodeFixed64(pg + kPageTxidOffset, txid);
      pg[kPageTypeOffset] = static_cast<uint8_t>(PageType::kFreeList);
      EncodeFixed32(pg + kPageRunLengthOffset, 1);
      EncodeFixed64(pg + kFreeListNextOffset,
                    i + 1 < new_fl.size() ? new_fl[i + 1] : 0);
      const uint64_t n = std::min<uint64_t>(cap, entries.size() - next_entry);
      EncodeFixed32(pg + kFreeListCountOffset, static_cast<uint32_t>(n));
      for (uint64_t j = 0; j < n; j++) {
        EncodeFixed64(pg + kFreeListEntriesOffset + 8 * j,
                      entries[next_entry++]);
      }
      EncodeFixed64(pg + kPageChecksumOffset, PageChecksum(pg, ps_, id));
      verified_.Set(id);
    }
    assert(next_entry == entries.size());
    freelist_pages_ = new_fl;
    fl_root = new_fl.empty() ? 0 : new_fl[0];
  }
  // Sum the pages written since the last checkpoint that are still in use
  // (see CommitTxn), before they are synced.
  for (PageId id : unsummed_) {
    PageMark& m = marks_[id];
    if (m.unsummed == 0) continue;  // freed since, or listed twice
    uint8_t* pg = writer_base() + id * ps_;
    EncodeFixed64(pg + kPageChecksumOffset,
                  PageChecksum(pg, uint64_t{m.unsummed} * ps_, id));
    m.unsummed = 0;
  }
  unsummed_.clear();
  // Data pages and free-list pages reach the disk before the meta.
  Status s = data_->Sync();
  if (!s.ok()) {
    SetError(s);
    return s;
  }
  const uint64_t epoch = log_epoch_.load() + 1;
  uint8_t* m = writer_base() + (txid % 2) * ps_;
  std::memset(m, 0, ps_);
  EncodeFixed64(m + kPageTxidOffset, txid);
  m[kPageTypeOffset] = static_cast<uint8_t>(PageType::kMeta);
  EncodeFixed32(m + kPageRunLengthOffset, 1);
  EncodeFixed64(m + kMetaMagicOffset, kMagic);
  EncodeFixed32(m + kMetaVersionOffset, kFormatVersion);
  EncodeFixed32(m + kMetaPageSizeOffset, ps_);
  EncodeFixed64(m + kMetaPageCountOffset, writer_committed().page_count);
  EncodeFixed64(m + kMetaFreeListRootOffset, fl_root);
  EncodeFixed64(m + kMetaFreeCountOffset, entries_count);
  EncodeFixed64(m + kMetaLogEpochOffset, epoch);
  for (int i = 0; i < kMetaRoots; i++) {
    EncodeFixed64(m + kMetaRootsOffset + 8 * i, writer_committed().roots[i]);
  }
  EncodeFixed64(m + kPageChecksumOffset, PageChecksum(m, ps_, txid % 2));
  s = data_->Sync();
  if (!s.ok()) {
    SetError(s);
    return s;
  }
  // The checkpoint is durable: the log restarts under the new epoch.
  checkpoint_txid_.store(txid);
  log_epoch_.store(epoch);
  log_used_.store(0);
  {
    MutexLock l(&sync_mu_);
    durable_lsn_ = appended_lsn_;
    log_start_lsn_ = appended_lsn_;
  }
  sync_cv_.SignalAll();
  {
    MutexLock l(&alloc_mu_);
    while (!pending_ckpt_.empty() && pending_ckpt_.begin()->first <= txid) {
      auto& v = pending_[pending_ckpt_.begin()->first];
      const auto& src = pending_ckpt_.begin()->second;
      v.insert(v.end(), src.begin(), src.end());
      pending_count_ += src.size();
      pending_ckpt_count_ -= src.size();
      pending_ckpt_.erase(pending_ckpt_.begin());
    }
  }
  ReleasePending();
  return Status::OK();
}

Status PagerImpl::Recover(const ReplayFn& apply) {
  {
    MutexLock l(&writer_mu_);
    if (recovered_) return Status::OK();
    recovering_ = true;
  }
  Status err;
  uint64_t records;
  uint64_t end = ScanLog(
      [&](uint64_t txid, std::string_view payload) {
        Status s = apply(txid, payload);
        if (s.ok() && writer_committed().txid != txid) {
          s = Status::Corruption(
              path_, "replay of log record " + std::to_string(txid) +
                         " did not commit it with CommitReplayed");
        }
        if (!s.ok()) err = s;
        return s.ok();
      },
      log_cap_, &records);
  {
    MutexLock l(&writer_mu_);
    recovering_ = false;
    if (!err.ok()) return err;
    recovered_ = true;
    replay_records_ = 0;
  }
  log_used_.store(end);
  return Checkpoint();
}

// ---------------------------------------------------------------------------
// Introspection

Status PagerImpl::AccountedPages(std::vector<PageId>* pages) {
  pages->clear();
  MutexLock l(&alloc_mu_);
  *pages = free_.ToVector();
  for (const auto& [t, v] : pending_)
    pages->insert(pages->end(), v.begin(), v.end());
  for (const auto& [t, v] : pending_ckpt_) {
    pages->insert(pages->end(), v.begin(), v.end());
  }
  pages->insert(pages->end(), freelist_pages_.begin(), freelist_pages_.end());
  std::sort(pages->begin(), pages->end());
  return Status::OK();
}

Status PagerImpl::Verify() {
  uint64_t pc;
  const uint8_t* base;
  {
    MutexLock l(&state_mu_);
    pc = committed_.page_count;
    base = base_;
  }
  std::vector<PageId> pages;
  MMDOC_RETURN_IF_ERROR(AccountedPages(&pages));
  for (size_t i = 0; i < pages.size(); i++) {
    if (pages[i] < 2 || pages[i] >= pc) {
      return Status::Corruption(
          path_, "free list: page " + std::to_string(pages[i]) +
                     " out of range (page count " + std::to_string(pc) + ")");
    }
    if (i > 0 && pages[i] == pages[i - 1]) {
      return Status::Corruption(
          path_,
          "free list: page " + std::to_string(pages[i]) + " listed twice");
    }
  }
  const uint64_t ck = checkpoint_txid_.load();
  std::string why;
  if (!CheckMeta(base + (ck % 2) * ps_, ps_, ck % 2, &why)) {
    return Status::Corruption(path_, "durable meta: " + why);
  }
  {
    MutexLock l(&alloc_mu_);
    for (PageId id : freelist_pages_) {
      Status s = VerifyPageBytes(id, base + id * ps_, pc);
      if (!s.ok())
        return Status::Corruption(path_, "free list: " + s.message());
    }
  }
  uint64_t records;
  uint64_t used = log_used_.load();
  if (used > log_cap_) return Status::Corruption(log_path_, "log overflow");
  if (ScanLog(nullptr, used, &records) < used) {
    return Status::Corruption(log_path_, "log record before offset " +
                                             std::to_string(used) +
                                             " does not verify");
  }
  return Status::OK();
}

PagerStats PagerImpl::Stats() {
  PagerStats st;
  {
    MutexLock l(&state_mu_);
    st.page_count = committed_.page_count;
    st.txid = committed_.txid;
    st.readers = static_cast<uint64_t>(newest_readers_);
    for (const auto& [t, n] : readers_) st.readers += n;
    const uint64_t oldest = OldestReaderLocked();
    st.oldest_reader_txid = oldest == UINT64_MAX ? 0 : oldest;
  }
  {
    MutexLock l(&alloc_mu_);
    st.free_pages = free_.size();
    st.pending_pages = pending_count_ + pending_ckpt_count_;
    st.freelist_pages = freelist_pages_.size();
  }
  st.checkpoint_txid = checkpoint_txid_.load();
  st.log_used = log_used_.load();
  st.file_size = file_size_.load();
  return st;
}

Pager::~Pager() = default;

Result<std::unique_ptr<Pager>> Pager::Open(const std::string& path,
                                           const PagerOptions& options) {
  auto p = std::make_unique<PagerImpl>(path, options);
  Status s = p->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<Pager>(std::move(p));
}

}  // namespace mmdoc::storage
