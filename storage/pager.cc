// The Pager implementation: opening, the data file map and its growth,
// shadow paging, commit, checkpoint and recovery. See storage/pager.h for the
// commit protocol (rules 1-9) this file implements and storage/format.h for
// the on-disk formats. Its parts live apart: the meta page (meta.h), the log
// (log.h), free pages and rule 5's queues (free_list.h), the verified-page
// bitmap (page_bitmap.h), the sticky error (sticky_error.h).
//
// Locks (never held in the reverse order):
//   writer gate (writer_mu_/writer_active_): one write Txn at a time; owns all
//     "writer-owned" fields below (base_, map_len_, maps_ append, free-list
//     mutation, the log's appends, checkpoint state).
//   alloc_mu_ -> state_mu_: alloc_mu_ guards the free/pending sets
//     (mutated by the writer, read by Stats/AccountedPages/Verify);
//     state_mu_ guards the published snapshot, the reader table and the map
//     pointer.
//   The log's sync_mu_ (log.h) and the sticky error's mutex are leaves.
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
#include <ctime>
#include <map>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/checksum.h"
#include "storage/coding.h"
#include "storage/free_list.h"
#include "storage/log.h"
#include "storage/meta.h"
#include "storage/mutex.h"
#include "storage/page_bitmap.h"
#include "storage/sticky_error.h"

namespace mmdoc::storage {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

std::string PageMsg(PageId id, const std::string& what) {
  return "page " + std::to_string(id) + ": " + what;
}

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
  // `holds_writer`: the txn holds the writer gate until it ends.
  ReadTxnImpl(PagerImpl* p, const Snapshot& snap, bool holds_writer = false, bool internal = false)
      : p_(p), snap_(snap), holds_writer_(holds_writer), internal_(internal) {}
  ~ReadTxnImpl() override;

  bool writable() const override { return false; }
  Status Explain(Status s) override;
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
  Status Free(PageId) override { return Status::InvalidArgument("Free in a read transaction"); }
  bool IsDirty(PageId) const override { return false; }
  // Ends a read snapshot: nothing to commit.
  Status Commit(std::string_view, Durability) override { return Status::OK(); }
  void Abort() override {}

 private:
  PagerImpl* const p_;
  const Snapshot snap_;
  const bool holds_writer_;
  const bool internal_;  // BeginInternalRead: not in PagerStats::readers
};

// What a write txn did to pages. The pager keeps the lists between write
// txns (emptied), so that a txn starts with the capacity the last one grew
// instead of growing them from empty on every commit.
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
  // A write txn over `base` that commits as `txid`.
  WriteTxnImpl(PagerImpl* p, const Snapshot& base, uint64_t txid, PageWrites how);
  ~WriteTxnImpl() override { Abort(); }

  bool writable() const override { return true; }
  Status Explain(Status s) override;
  uint64_t txid() const override { return txid_; }
  uint32_t page_size() const override;
  uint64_t page_count() const override { return page_count_; }
  PageId root(int slot) const override { return slot >= 0 && slot < kMetaRoots ? roots_[slot] : 0; }
  void set_root(int slot, PageId id) override {
    assert(slot >= 0 && slot < kMetaRoots);
    if (slot >= 0 && slot < kMetaRoots) roots_[slot] = id;
  }
  Status Get(PageId id, const uint8_t** page) override;
  Status Allocate(PageType type, uint32_t n, PageId* id, uint8_t** page) override;
  // Allocate, optionally without zeroing (for a run about to be overwritten).
  Status AllocateRun(PageType type, uint32_t n, bool zero, PageId* id, uint8_t** page);
  Status Modify(PageId id, PageId* new_id, uint8_t** page) override {
    return ModifySkipping(id, 0, 0, new_id, page);
  }
  Status ModifySkipping(PageId id, uint32_t gap_begin, uint32_t gap_end, PageId* new_id,
                        uint8_t** page) override;
  Status Free(PageId id) override;
  bool IsDirty(PageId id) const override;
  Status Commit(std::string_view log_payload, Durability durability) override;
  void Abort() override;
  uint64_t private_bytes() const override { return private_bytes_; }
  Status WriteBack() override;

 private:
  friend class PagerImpl;
  Status FreeRun(PageId id, uint32_t run, uint64_t born);
  // kWriteAt: a private copy of run `id` (n pages) holding `from` (or, when
  // from is null, zeros if `zero`, else bytes the caller overwrites),
  // replacing any copy it had.
  uint8_t* PrivateCopy(PageId id, uint32_t n, const uint8_t* from, bool zero);
  void DropPrivate(PageId id);
  // Keeps a single page's buffer for the next PrivateCopy.
  void Recycle(std::unique_ptr<uint8_t[]> copy, uint32_t n);

  PagerImpl* const p_;
  const uint64_t txid_;
  const uint32_t serial_;  // this txn's mark in PagerImpl::marks_
  PageId roots_[kMetaRoots];
  uint64_t page_count_;
  bool done_ = false;
  WriteLists lists_;
  // kWriteAt: the private copies of the runs this txn changed and has not
  // written back yet, by first page.
  const bool write_at_;
  std::unordered_map<PageId, std::unique_ptr<uint8_t[]>> private_;
  uint64_t private_bytes_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> spare_;  // one-page buffers to reuse
  static constexpr size_t kMaxGather = 1024;       // runs in one stretch at most
  // Pages from here on were taken from the file's end by this txn: never
  // part of a committed state (WriteBack).
  const PageId fresh_from_;
  // WriteBack's scratch: the private runs in file order, a stretch's
  // residency, and the runs of one write.
  struct PrivateRun {
    PageId id;
    uint8_t* page;
    uint32_t n;
  };
  std::vector<PrivateRun> runs_;
  std::vector<bool> resident_;
  std::vector<File::Buffer> gather_;
  // Writes the private runs [begin, end), which follow each other in the file.
  Status WriteStretch(const PrivateRun* begin, const PrivateRun* end);
};

// Writer-owned bookkeeping per page, indexed by page id (grown with the
// file). Arrays, not hash tables: a commit of 1000 inserts touches
// thousands of pages, and a hash operation per page was a large share of
// an insert.
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
        opts_(options),
        fs_(options.fs != nullptr ? options.fs : FileSystem::Default()),
        log_(fs_, path + "-log", &error_) {}
  ~PagerImpl() override;
  Status Close() override;

  Status Init();

  Status Recover(const ReplayFn& apply) override;
  Result<std::unique_ptr<Txn>> BeginRead() override MMDOC_EXCLUDES(state_mu_);
  Result<std::unique_ptr<Txn>> BeginInternalRead() override MMDOC_EXCLUDES(state_mu_);
  Result<std::unique_ptr<Txn>> BeginQuiescent() override MMDOC_EXCLUDES(state_mu_);
  Result<std::unique_ptr<Txn>> BeginWrite() override;
  Result<std::unique_ptr<Txn>> BeginWrite(PageWrites how) override;
  Status CommitReplayed(Txn* txn) override;
  Status RecoverIntoMemory(const ReplayFn& apply) override;
  Status PrepareCommits() override;
  Status AppendCommit(std::string_view payload, Durability d, uint64_t* txid) override;
  Status AppendUnsynced(std::string_view payload, Durability d, uint64_t* txid,
                        CommitTicket* ticket) override;
  Status SyncCommit(Durability d, const CommitTicket& ticket) override {
    return log_.Sync(d, Log::Position{ticket.offset, ticket.length, ticket.lsn_end});
  }
  uint64_t published() const override { return published_.load(std::memory_order_acquire); }
  bool file_lost() const override { return file_lost_.load(std::memory_order_acquire); }
  Status CheckReadable() override;
  LogPosition LogHead() override {
    const Log::Cursor h = log_.head();
    return LogPosition{h.offset, h.epoch};
  }
  Status CommitMerge(Txn* txn, uint64_t through_txid, LogPosition next) override;
  Status CommitRewrite(Txn* txn) override;
  Status Checkpoint() override;
  Status Flush() override { return log_.Flush(); }
  Status AccountedPages(std::vector<PageId>* pages) override MMDOC_EXCLUDES(alloc_mu_);
  Status Verify() override MMDOC_EXCLUDES(state_mu_, alloc_mu_);
  PagerStats Stats() override MMDOC_EXCLUDES(state_mu_, alloc_mu_);
  const std::string& path() const override { return path_; }
  void DatabaseId(uint64_t id[2]) const override {
    id[0] = db_id_[0];
    id[1] = db_id_[1];
  }
  Status MoveTo(const std::string& path) override;
  void Retire() override { retired_.store(true); }
  Status BackgroundError() override { return error_.Get(); }
  void Fail(const Status& s) override { error_.Set(s); }
  Status SyncForCommit(Durability d, uint64_t log_offset, uint64_t length) override {
    return log_.SyncRange(d, log_offset, length);
  }
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
  Status CheckPage(PageId id, const uint8_t* base, uint64_t page_count, const uint8_t** out) {
    if (id < 2 || id >= page_count) {
      return Status::Corruption(
          PageMsg(id, "out of range (page count " + std::to_string(page_count) + ")"));
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
      return Status::Corruption(PageMsg(id, "bad run length " + std::to_string(run)));
    }
    if (DecodeFixed64(pg + kPageChecksumOffset) != PageChecksum(pg, uint64_t{run} * ps_, id)) {
      return Status::Corruption(PageMsg(id, "checksum mismatch"));
    }
    return Status::OK();
  }
  Status EnsureCapacity(uint64_t pages);
  Status MapData(uint64_t min_len) MMDOC_EXCLUDES(state_mu_);

  // --- open ---
  // Opens and locks the data file, creating it (CreateFile) when missing
  // and allowed; *created tells whether this call made it.
  Status OpenDataFile(bool* created);
  // Locks f, polling until `deadline` while another process or handle holds it.
  Status LockBy(File* f, std::chrono::steady_clock::time_point deadline);
  // What a write to a read-only open gets.
  Status ReadOnlyError() const {
    return Status::NotSupported(path_, "the database is open read-only");
  }
  // A new database's first two pages: meta 0 (clean, txid 0) and a zero page.
  std::vector<uint8_t> NewFileImage() const;
  Status CreateFile();
  // Reads the meta (rule 4). A file that is empty or all zeros, as a
  // creation cut short by an older version leaves it, is refused unless
  // the caller may create; then it is made a new database in place, and
  // *created is set.
  Status LoadExisting(uint64_t size, bool* created);
  // *has: whether a file at the log's path holds anything but zeros. An
  // error other than NotFound (a name too long, no permission) is returned.
  Status LogHasContent(bool* has);
  Status OpenLog(bool created);
  // OK when the file at the log's path may be replaced by a new log:
  // missing, empty, zeros, or an mmdoc log. Anything else is not ours to
  // truncate (this data file through a link, a database named like our log).
  Status LogPathReplaceable();
  // Before the first commit of a session (rule 9): a log of this database,
  // the data file's holes allocated, and a checkpoint that marks the
  // database in use. Not sticky on failure.
  Status StartWriting();
  // A new log's records area: a sixteenth of log_size, at least 4 KiB and
  // at most 1 MiB; it grows as commits need, up to log_size (Log::Append).
  uint64_t InitialLogSize() const {
    const uint64_t size = std::clamp<uint64_t>(opts_.log_size / 16, 4096, 1ull << 20);
    return (std::min(size, opts_.log_size) + 7) / 8 * 8;
  }
  // The durable stamp (format.h), written after a log sync.
  void StampDurable(uint64_t epoch, uint64_t txid);
  // Log::Scan of the records after the durable checkpoint (rule 4).
  Log::ScanEnd ScanLog(const Log::RecordFn& fn, const Log::Cursor* stop = nullptr) const {
    return log_.Scan(log_from_, log_txid_, fn, stop);
  }

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
  // `merged`: a CommitMerge, whose pages hold the records up to
  // merged->first, the next of them at merged->second.
  Status CommitTxn(WriteTxnImpl* txn, std::string_view payload, Durability d, bool replayed,
                   const std::pair<uint64_t, Log::Cursor>* merged = nullptr);
  void AbortTxn(WriteTxnImpl* txn) MMDOC_EXCLUDES(alloc_mu_);
  // Marks txn done, keeps its lists' capacity for the next write txn and
  // releases the writer gate. The txn's lists are empty afterwards.
  void FinishTxn(WriteTxnImpl* txn) MMDOC_EXCLUDES(spare_mu_);
  void ReleasePending() MMDOC_EXCLUDES(state_mu_, alloc_mu_);
  // "Locked": the caller holds the writer gate (not a mutex). `clean`: the
  // checkpoint says the log holds nothing it lacks (rule 9).
  Status CheckpointLocked(bool clean) MMDOC_EXCLUDES(alloc_mu_, state_mu_);
  // Checkpoint step: writes the persisted free list (free and pending pages)
  // for a checkpoint at `txid`, growing the file when the free set cannot
  // hold the list's own pages; returns its root and entry count.
  Status WriteFreeList(uint64_t txid, PageId* root, uint64_t* entries)
      MMDOC_EXCLUDES(alloc_mu_, state_mu_);
  // Checkpoint step: sums the pages written since the last checkpoint that
  // are still in use (see CommitTxn), before they are synced.
  void SumUnsummedPages();
  void SetError(const Status& s) { error_.Set(s); }
  bool HasError() const { return error_.Has(); }
  // Whether the data file is still at its path: a commit asks at most
  // every kFileCheckMs, so that a database renamed over, replaced or
  // removed while open stops acknowledging commits within that time rather
  // than at the next checkpoint (they could never be read again). The
  // sticky error when not.
  Status CheckFileInPlace();
  // FileIsOurs before a merge's commit writes its pages; on failure aborts
  // `w` and makes the error sticky.
  Status MergeFileIsOurs(WriteTxnImpl* w);
  // Whether the file at path_ is still this database: the same file (not
  // renamed over or removed), whose durable meta page is still this
  // pager's (not overwritten in place, as `cp other.mmdb DB` does). The
  // error when not.
  Status FileIsOurs();
  // Txn::Explain.
  Status ExplainCorruption(Status s) {
    if (!s.IsCorruption()) return s;
    Status here = FileIsOurs();
    if (here.ok()) return s;
    SetError(here);
    return here;
  }
  // Counts a reader of the snapshot committed_ names.
  void RegisterReaderLocked() MMDOC_REQUIRES(state_mu_);
  void UnregisterReader(uint64_t txid, bool internal) MMDOC_EXCLUDES(state_mu_) {
    MutexLock l(&state_mu_);
    if (internal) internal_readers_--;
    if (txid == newest_reader_txid_ && newest_readers_ > 0) {
      newest_readers_--;
      return;
    }
    auto it = readers_.find(txid);
    if (it != readers_.end() && --it->second == 0) readers_.erase(it);
  }
  // The oldest open snapshot's txid, or UINT64_MAX when none is open.
  uint64_t OldestReaderLocked() const MMDOC_REQUIRES(state_mu_) {
    state_mu_.AssertHeld();
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
  const Snapshot& writer_committed() const MMDOC_NO_THREAD_SAFETY_ANALYSIS { return committed_; }
  uint8_t* writer_base() const MMDOC_NO_THREAD_SAFETY_ANALYSIS { return base_; }

  std::string path_;  // changed only by MoveTo, before the Pager is shared
  const PagerOptions opts_;
  FileSystem* const fs_;
  StickyError error_;  // rule 8
  Log log_;
  bool opened_ = false;                      // set by Init, before the Pager is shared
  bool crash_on_close_ = false;              // test hook, set before the destructor runs
  std::atomic<bool> retired_{false};         // Retire
  std::atomic<int64_t> file_checked_ms_{0};  // CheckFileInPlace, CoarseMonotonicMs
  std::atomic<bool> file_lost_{false};       // FileIsOurs found it overwritten
  bool closed_ = false;                      // Close ran; it and the destructor run in one thread
  Status close_status_;                      // what Close returned

  // Set by Init, before the Pager is shared; read-only afterwards.
  std::unique_ptr<File> data_;
  uint32_t ps_ = 0;

  // Maps of the data file; all but the last are kept for old readers.
  std::vector<std::pair<uint8_t*, uint64_t>> maps_;  // writer-owned
  // The current map: written by the writer under state_mu_; the writer
  // reads it without (writer_base()).
  uint8_t* base_ MMDOC_GUARDED_BY(state_mu_) = nullptr;
  uint64_t map_len_ = 0;  // writer-owned
  std::atomic<uint64_t> file_size_{0};

  // Published state.
  Mutex state_mu_;
  // Written by the writer under state_mu_; the writer reads it without
  // (writer_committed()).
  Snapshot committed_ MMDOC_GUARDED_BY(state_mu_);
  // Bumped, under state_mu_, after each change of committed_ (published()).
  std::atomic<uint64_t> published_{0};
  // Open readers: those of the newest snapshot any reader took are counted
  // in newest_readers_, older ones in readers_ (snapshot txid -> count).
  // Most read transactions start and end at the same newest snapshot, and
  // a map node per transaction (insert, then erase) is a noticeable part of
  // a point read.
  std::map<uint64_t, int> readers_ MMDOC_GUARDED_BY(state_mu_);
  uint64_t newest_reader_txid_ MMDOC_GUARDED_BY(state_mu_) = 0;
  int newest_readers_ MMDOC_GUARDED_BY(state_mu_) = 0;
  int internal_readers_ MMDOC_GUARDED_BY(state_mu_) = 0;  // of them, BeginInternalRead's

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
  PendingPages pending_ MMDOC_GUARDED_BY(alloc_mu_);  // rule 5
  std::vector<PageId> freelist_pages_ MMDOC_GUARDED_BY(alloc_mu_);
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

  // Checkpoint state (writer-owned; atomics for Stats).
  std::atomic<uint64_t> checkpoint_txid_{0};
  std::atomic<uint64_t> log_epoch_{0};  // of the record at log_from_
  // The durable checkpoint's replay start: records after log_txid_, from
  // log_from_ (set by Init and by each checkpoint, before the Pager is
  // shared or under the writer gate).
  uint64_t log_txid_ = 0;
  Log::Cursor log_from_;
  // The pages hold every change of the records up to pages_cover_txid_;
  // records after it (log-only commits, rule 10) start at cover_next_.
  // Writer-owned.
  uint64_t pages_cover_txid_ = 0;
  Log::Cursor cover_next_;
  // The last txid given out (write txns, log-only commits, checkpoints):
  // txids only grow. log_mu_ also serializes appends to the log.
  Mutex log_mu_;
  uint64_t last_txid_ MMDOC_GUARDED_BY(log_mu_) = 0;
  // recovered_/recovering_: the writer gate, or writer_mu_ in Recover (run
  // before concurrent use); BeginWrite reads them under the gate alone.
  bool recovered_ = false;       // nothing (more) to replay
  bool recovering_ = false;      // set by Recover while it replays
  uint64_t replay_records_ = 0;  // set by Init (OpenLog), cleared by Recover

  // Rule 9 (writer-owned; set by Init before the Pager is shared).
  uint64_t db_id_[2] = {0, 0};
  bool legacy_ = false;         // a version 1 or 2 file: its log has no header
  bool durable_clean_ = false;  // what the durable meta says
  // The log restarted for this session's commits: written under the
  // writer gate, read by AppendCommit without it.
  std::atomic<bool> in_use_{false};
  bool log_needs_create_ = false;  // missing, foreign, damaged or legacy
  bool log_unreadable_ = false;    // something at the log's path is not a log we read
  Stamp stamp_;                    // the durable meta's stamp at open
  bool have_stamp_ = false;
  uint8_t* meta_map_ = nullptr;  // the first map: the meta pages, always mapped

  VerifiedBitmap verified_;  // lock-free: atomic bits and chunk pointers
};

// ---------------------------------------------------------------------------
// Txn implementations

ReadTxnImpl::~ReadTxnImpl() {
  p_->UnregisterReader(snap_.txid, internal_);
  if (holds_writer_) p_->ReleaseWriter();
}
uint32_t ReadTxnImpl::page_size() const { return p_->ps_; }
Status ReadTxnImpl::Explain(Status s) { return p_->ExplainCorruption(std::move(s)); }
Status ReadTxnImpl::Get(PageId id, const uint8_t** page) {
  return p_->CheckPage(id, snap_.base, snap_.page_count, page);
}

WriteTxnImpl::WriteTxnImpl(PagerImpl* p, const Snapshot& base, uint64_t txid, PageWrites how)
    : p_(p),
      txid_(txid),
      serial_(p->NextWriteSerial()),
      page_count_(base.page_count),
      write_at_(how == PageWrites::kWriteAt),
      fresh_from_(base.page_count) {
  std::copy(base.roots, base.roots + kMetaRoots, roots_);
  MutexLock l(&p_->spare_mu_);
  std::swap(lists_, p_->spare_lists_);  // empty lists, or the last txn's
}

uint32_t WriteTxnImpl::page_size() const { return p_->ps_; }
Status WriteTxnImpl::Explain(Status s) { return p_->ExplainCorruption(std::move(s)); }

bool WriteTxnImpl::IsDirty(PageId id) const {
  return id < p_->marks_.size() && p_->marks_[id].dirty == serial_;
}

Status WriteTxnImpl::Get(PageId id, const uint8_t** page) {
  if (write_at_ && IsDirty(id)) {
    auto it = private_.find(id);
    if (it != private_.end()) {
      *page = it->second.get();
      return Status::OK();
    }
    // Written back: the file (and so the map) holds it, summed.
  }
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

Status WriteTxnImpl::Allocate(PageType type, uint32_t n, PageId* id, uint8_t** page) {
  return AllocateRun(type, n, /*zero=*/true, id, page);
}

Status WriteTxnImpl::AllocateRun(PageType type, uint32_t n, bool zero, PageId* id, uint8_t** page) {
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
  uint8_t* pg;
  if (write_at_) {
    pg = PrivateCopy(got, n, nullptr, zero);
  } else {
    pg = p_->writer_base() + got * ps;
    // Modify overwrites the whole run with a copy: zeroing it first would
    // double the memory traffic of every copy-on-write.
    if (zero) std::memset(pg, 0, uint64_t{n} * ps);
  }
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

Status WriteTxnImpl::ModifySkipping(PageId id, uint32_t gap_begin, uint32_t gap_end, PageId* new_id,
                                    uint8_t** page) {
  if (done_) return Status::InvalidArgument("transaction already finished");
  const uint8_t* old;
  MMDOC_RETURN_IF_ERROR(Get(id, &old));
  if (IsDirty(id)) {
    *new_id = id;
    if (write_at_ && private_.count(id) == 0) {
      // Written back earlier in this txn: changed again, so copied again.
      old = PrivateCopy(id, DecodeFixed32(old + kPageRunLengthOffset), old, false);
    }
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
    // A private copy's gap would carry the heap's bytes to the disk.
    if (write_at_) std::memset(np + gap_begin, 0, gap_end - gap_begin);
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
    if (write_at_) DropPrivate(id);
    PageMark& m = p_->marks_[id];
    for (uint32_t i = 0; i < m.run; i++) lists_.freed_dirty.push_back(id + i);
    m.dirty = 0;
    return Status::OK();
  }
  const uint8_t* pg;
  MMDOC_RETURN_IF_ERROR(Get(id, &pg));
  return FreeRun(id, DecodeFixed32(pg + kPageRunLengthOffset), DecodeFixed64(pg + kPageTxidOffset));
}

Status WriteTxnImpl::FreeRun(PageId id, uint32_t run, uint64_t born) {
  PageMark& m = p_->Mark(id);
  if (m.freed == serial_) return Status::InvalidArgument(PageMsg(id, "freed twice in one txn"));
  m.freed = serial_;
  // Rule 5(b): a page that may be reachable from the durable meta waits for
  // the next checkpoint.
  auto& list = born <= p_->checkpoint_txid_.load() ? lists_.freed_ckpt : lists_.freed_recent;
  for (uint32_t i = 0; i < run; i++) list.push_back(id + i);
  return Status::OK();
}

Status WriteTxnImpl::Commit(std::string_view log_payload, Durability durability) {
  if (done_) return Status::InvalidArgument("transaction already finished");
  if (p_->recovering_) {
    Abort();
    return Status::InvalidArgument("Commit during Recover: use Pager::CommitReplayed");
  }
  return p_->CommitTxn(this, log_payload, durability, /*replayed=*/false);
}

void WriteTxnImpl::Abort() {
  if (done_) return;
  private_.clear();
  private_bytes_ = 0;
  p_->AbortTxn(this);
}

uint8_t* WriteTxnImpl::PrivateCopy(PageId id, uint32_t n, const uint8_t* from, bool zero) {
  const uint64_t bytes = uint64_t{n} * p_->ps_;
  std::unique_ptr<uint8_t[]> copy;
  if (n == 1 && !spare_.empty()) {
    copy = std::move(spare_.back());
    spare_.pop_back();
  } else {
    copy.reset(new uint8_t[bytes]);
  }
  if (from != nullptr) {
    std::memcpy(copy.get(), from, bytes);
  } else if (zero) {
    std::memset(copy.get(), 0, bytes);
  }
  uint8_t* pg = copy.get();
  DropPrivate(id);
  private_.emplace(id, std::move(copy));
  private_bytes_ += bytes;
  return pg;
}

void WriteTxnImpl::Recycle(std::unique_ptr<uint8_t[]> copy, uint32_t n) {
  if (n == 1) spare_.push_back(std::move(copy));
}

void WriteTxnImpl::DropPrivate(PageId id) {
  auto it = private_.find(id);
  if (it == private_.end()) return;
  const uint32_t run = DecodeFixed32(it->second.get() + kPageRunLengthOffset);
  private_bytes_ -= uint64_t{run} * p_->ps_;
  Recycle(std::move(it->second), run);
  private_.erase(it);
}

Status WriteTxnImpl::WriteBack() {
  if (!write_at_ || private_.empty()) return Status::OK();
  // In file order, so the writes are as sequential as the pages are.
  std::vector<PrivateRun>& runs = runs_;
  runs.clear();
  for (const auto& [id, copy] : private_) {
    runs.push_back({id, copy.get(), DecodeFixed32(copy.get() + kPageRunLengthOffset)});
  }
  std::sort(runs.begin(), runs.end(),
            [](const PrivateRun& x, const PrivateRun& y) { return x.id < y.id; });
  const uint32_t ps = p_->ps_;
  for (const PrivateRun& r : runs) {
    // Summed now: the page is written once, not at the checkpoint.
    EncodeFixed64(r.page + kPageChecksumOffset, PageChecksum(r.page, uint64_t{r.n} * ps, r.id));
  }
  for (size_t a = 0; a < runs.size();) {
    size_t b = a + 1;
    while (b < runs.size() && runs[b].id == runs[b - 1].id + runs[b - 1].n && b - a < kMaxGather) {
      b++;
    }
    Status s = WriteStretch(runs.data() + a, runs.data() + b);
    if (!s.ok()) {
      // Into allocated blocks, so not a full disk: the device failed, and
      // as every page write's, the error is sticky (rule 8).
      p_->SetError(s);
      return s;
    }
    a = b;
  }
  for (const PrivateRun& r : runs) p_->marks_[r.id].unsummed = 0;
  // Start writing them to the disk now, so that the checkpoint after the
  // merge waits for the last stretch, not for every page (a hint).
  const uint64_t begin = runs.front().id * ps, end = (runs.back().id + runs.back().n) * ps;
  (void)p_->data_->StartWriteback(begin, end - begin);
  for (auto& [id, copy] : private_) {
    const uint32_t run = DecodeFixed32(copy.get() + kPageRunLengthOffset);
    Recycle(std::move(copy), run);
  }
  private_.clear();
  private_bytes_ = 0;
  return Status::OK();
}

// A merge's pages mostly follow each other in the file (92 a stretch at
// 1M), and on a VM a system call costs more than copying a page, so a
// stretch goes out in few calls. But a write of many pages into file the
// page cache does not hold makes large folios, and a later one-page write
// into one dirties (and writes back) all of it. So only pages the cache
// holds, each in its own folio since the map reads at random, are gathered
// into one write; fresh pages from the file's end are read into the cache
// first (nothing on the disk to read); any other page is written alone.
Status WriteTxnImpl::WriteStretch(const PrivateRun* begin, const PrivateRun* end) {
  const uint32_t ps = p_->ps_;
  File* f = p_->data_.get();
  if (end - begin == 1) return f->WriteAt(begin->id * ps, begin->page, uint64_t{begin->n} * ps);
  const PageId first = begin->id;
  const PageId last = (end - 1)->id + (end - 1)->n;  // one past
  uint8_t* const base = p_->writer_base();
  std::vector<bool>& res = resident_;
  if (!f->ResidentPages(base + first * ps, (last - first) * ps, ps, &res).ok()) {
    res.assign(last - first, false);
  }
  for (PageId id = std::max(first, fresh_from_); id < last;) {
    if (res[id - first]) {
      id++;
      continue;
    }
    PageId to = id + 1;
    while (to < last && !res[to - first]) to++;
    if (f->PrepareMappedRead(base + id * ps, (to - id) * ps).ok()) {
      for (PageId k = id; k < to; k++) res[k - first] = true;
    }
    id = to;
  }
  std::vector<File::Buffer>& parts = gather_;
  parts.clear();
  uint64_t from = 0;  // where the runs in `parts` begin
  for (const PrivateRun* r = begin; r != end; r++) {
    bool cached = true;
    for (uint32_t k = 0; k < r->n; k++) cached = cached && res[r->id + k - first];
    if (!cached) {
      if (!parts.empty()) MMDOC_RETURN_IF_ERROR(f->WriteGather(from, parts.data(), parts.size()));
      parts.clear();
      MMDOC_RETURN_IF_ERROR(f->WriteAt(r->id * ps, r->page, uint64_t{r->n} * ps));
      continue;
    }
    if (parts.empty()) from = r->id * ps;
    parts.push_back(File::Buffer{r->page, size_t{r->n} * ps});
  }
  if (!parts.empty()) MMDOC_RETURN_IF_ERROR(f->WriteGather(from, parts.data(), parts.size()));
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Open

Status PagerImpl::MapData(uint64_t min_len) {
  uint64_t len = std::max<uint64_t>(opts_.initial_map_size, 1ull << 16);
  if (map_len_ != 0) len = map_len_;
  while (len < min_len) len *= 2;
  const MapMode mode = opts_.read_only ? MapMode::kReadOnly : MapMode::kReadWrite;
  Result<uint8_t*> m = data_->Map(len, mode);
  if (!m.ok()) {
    // Address space short of the reservation: the smallest map that will do.
    uint64_t small = 1ull << 16;
    while (small < min_len) small *= 2;
    if (small >= len) return m.status();
    len = small;
    m = data_->Map(len, mode);
    if (!m.ok()) return m.status();
  }
  // B+tree pages are read and written at random. Without this hint a fault
  // reads ahead into large folios, and since the kernel tracks dirtiness per
  // folio, each page written dirties its whole folio (see
  // File::AdviseRandomAccess). A failure only costs speed, so it is ignored.
  (void)data_->AdviseRandomAccess(*m, len);
  // Old maps stay mapped for readers that still use them, but without their
  // page-table entries: a page the writer touched before the remap and
  // touches again through the new map would otherwise be resident twice.
  // A reader of an old map
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
  const uint64_t size = file_size_.load();
  if (need > size) {
    uint64_t target = std::max(need, size + std::max(kMiB, size / 8));
    target = (target + ps_ - 1) / ps_ * ps_;
    // Not sticky: nothing was published, and the disk may have room later.
    MMDOC_RETURN_IF_ERROR(data_->Allocate(size, target - size));
    file_size_.store(target);
  }
  // Apart from the growth: when the map failed after the file grew (the
  // address space short, ulimit -v), the next call maps it again instead of
  // finding the file large enough and reading pages past the map's end.
  const uint64_t file = file_size_.load();
  if (file > map_len_) MMDOC_RETURN_IF_ERROR(MapData(file));
  verified_.Reserve(pages);
  return Status::OK();
}

Status PagerImpl::Init() {
  const uint32_t ps = opts_.page_size;
  if (ps < kMinPageSize || ps > kMaxPageSize || (ps & (ps - 1)) != 0) {
    return Status::InvalidArgument("page_size must be a power of two in 4096..65536, got " +
                                   std::to_string(ps));
  }
  if (opts_.log_size < 4096) {
    return Status::InvalidArgument("log_size must be at least 4096");
  }
  log_.SetDurableHook([this](uint64_t epoch, uint64_t txid) { StampDurable(epoch, txid); });
  bool created = false;
  MMDOC_RETURN_IF_ERROR(OpenDataFile(&created));
  Result<uint64_t> size = data_->Size();
  if (!size.ok()) return size.status();
  Status s = LoadExisting(*size, &created);
  if (s.ok()) s = OpenLog(created);
  if (!s.ok()) {
    // A database this call made and could not finish is removed whole, so
    // a full disk (or an mmap that failed) leaves the path as it was found;
    // its log goes too, or it would refuse the next create. (A create
    // begins only when the log holds nothing: OpenDataFile.) The lock is
    // still ours.
    if (created) {
      (void)fs_->Remove(path_);
      (void)fs_->Remove(log_.path());
    }
    return s;
  }
  opened_ = true;
  return Status::OK();
}

Status PagerImpl::OpenDataFile(bool* created) {
  *created = false;
  // Lock the descriptor that is read, then check that the path still names
  // it: a file renamed over the path in between (a compaction in another
  // process) is opened again.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.lock_timeout_ms);
  for (int attempt = 0; attempt < 100; attempt++) {
    Result<std::unique_ptr<File>> f =
        fs_->Open(path_, opts_.read_only ? OpenMode::kReadOnly : OpenMode::kExisting);
    if (!f.ok()) {
      if (!f.status().IsNotFound()) return f.status();
      if (!opts_.create_if_missing || opts_.read_only)
        return Status::NotFound(path_, "database does not exist");
      // A log without its data file may hold the only copy of commits (a
      // data file deleted after a crash): a new database would overwrite it.
      bool log_has_content;
      MMDOC_RETURN_IF_ERROR(LogHasContent(&log_has_content));
      if (log_has_content) {
        return Status::Corruption(path_, "the data file is missing but its log " + log_.path() +
                                             " is not: refusing to start a new database over it "
                                             "(restore the data file, or remove the log)");
      }
      Status s = CreateFile();
      if (s.ok()) {
        *created = true;
      } else if (!s.IsAlreadyExists()) {
        return s;
      }
      continue;
    }
    MMDOC_RETURN_IF_ERROR(LockBy(f.value().get(), deadline));
    Result<bool> here = f.value()->IsAt(path_);
    if (!here.ok()) return here.status();
    if (*here) {
      data_ = std::move(f.value());
      return Status::OK();
    }
    *created = false;
  }
  return Status::Busy(path_, "the file keeps being replaced while it is opened");
}

Status PagerImpl::LockBy(File* f, std::chrono::steady_clock::time_point deadline) {
  // flock has no timed wait; polling with a growing pause (to 50 ms) finds
  // the lock soon after its holder lets go. Waiters are not queued.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    Status s = opts_.read_only ? f->TryLockShared() : f->TryLock();
    if (!s.IsBusy() || opts_.lock_timeout_ms == 0) return s;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return Status::Busy(path_, "locked by another process or handle (waited " +
                                     std::to_string(opts_.lock_timeout_ms) + " ms)");
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

std::vector<uint8_t> PagerImpl::NewFileImage() const {
  std::random_device rd;
  auto random64 = [&rd] { return (uint64_t{rd()} << 32) ^ rd(); };
  Meta meta;
  meta.page_size = opts_.page_size;
  meta.page_count = 2;
  meta.log_epoch = random64() | 1;
  const bool chosen = opts_.new_db_id[0] != 0 || opts_.new_db_id[1] != 0;
  meta.db_id[0] = chosen ? opts_.new_db_id[0] : random64();
  meta.db_id[1] = chosen ? opts_.new_db_id[1] : random64();
  meta.clean = true;
  meta.log_offset = kLogRecordsOffset;
  std::vector<uint8_t> img(2ull * opts_.page_size, 0);
  EncodeMeta(meta, 0, img.data());
  return img;
}

Status PagerImpl::CreateFile() {
  const std::vector<uint8_t> img = NewFileImage();
  return fs_->CreateExclusive(path_, img.data(), img.size());
}

Status PagerImpl::LogHasContent(bool* has) {
  *has = false;
  Result<std::unique_ptr<File>> f = fs_->Open(log_.path(), OpenMode::kExisting);
  if (!f.ok()) return f.status().IsNotFound() ? Status::OK() : f.status();
  Result<uint64_t> size = f.value()->Size();
  if (!size.ok()) return size.status();
  std::vector<uint8_t> head(std::min<uint64_t>(*size, kLogRecordsOffset));
  if (!head.empty()) MMDOC_RETURN_IF_ERROR(f.value()->ReadAt(0, head.data(), head.size()));
  *has = std::any_of(head.begin(), head.end(), [](uint8_t b) { return b != 0; });
  return Status::OK();
}

Status PagerImpl::LogPathReplaceable() {
  const std::string& log = log_.path();
  Result<bool> same = data_->IsAt(log);
  if (!same.ok()) return same.status();
  if (*same) {
    return Status::InvalidArgument(
        log, "is this database's data file (a link to it): refusing to write the log over it");
  }
  Result<std::unique_ptr<File>> f = fs_->Open(log, OpenMode::kExisting);
  if (!f.ok()) return f.status().IsNotFound() ? Status::OK() : f.status();
  Result<uint64_t> size = f.value()->Size();
  if (!size.ok()) return size.status();
  std::vector<uint8_t> head(std::min<uint64_t>(*size, kLogRecordsOffset));
  if (!head.empty()) MMDOC_RETURN_IF_ERROR(f.value()->ReadAt(0, head.data(), head.size()));
  if (head.size() >= kLogHeaderMagicOffset + 8 &&
      DecodeFixed64(head.data() + kLogHeaderMagicOffset) == kLogMagic)
    return Status::OK();
  if (std::all_of(head.begin(), head.end(), [](uint8_t b) { return b == 0; })) return Status::OK();
  return Status::InvalidArgument(
      log, std::string(head.size() >= kMetaMagicOffset + 8 &&
                               DecodeFixed64(head.data() + kMetaMagicOffset) == kMagic
                           ? "is another mmdoc database's data file"
                           : "exists and is not an mmdoc log") +
               ": refusing to write " + path_ + "'s log over it; move the file away first");
}

Status PagerImpl::LoadExisting(uint64_t size, bool* created) {
  file_size_.store(size);
  MMDOC_RETURN_IF_ERROR(MapData(size));
  meta_map_ = writer_base();
  Meta meta;
  PageId slot;
  Status picked = PickMeta(writer_base(), size, path_, &meta, &slot);
  if (!picked.ok()) {
    const uint64_t head = std::min<uint64_t>(size, 2ull * kMinPageSize);
    const bool blank =
        std::all_of(writer_base(), writer_base() + head, [](uint8_t b) { return b == 0; });
    if (!blank) return picked;
    const std::string what = size == 0 ? "the file is empty" : "the file holds only zeros";
    if (!opts_.create_if_missing || opts_.read_only) {
      return Status::Corruption(path_, what +
                                           ": not an mmdoc database (or one whose creation "
                                           "never finished)");
    }
    bool log_has_content;
    MMDOC_RETURN_IF_ERROR(LogHasContent(&log_has_content));
    if (log_has_content) {
      return Status::Corruption(path_, what + " but its log " + log_.path() +
                                           " is not: refusing to start a new database over it");
    }
    // Made a new database in place: the caller asked to create one.
    const std::vector<uint8_t> img = NewFileImage();
    MMDOC_RETURN_IF_ERROR(data_->Allocate(0, img.size()));
    MMDOC_RETURN_IF_ERROR(data_->WriteAt(0, img.data(), img.size()));
    MMDOC_RETURN_IF_ERROR(data_->Sync());
    size = std::max<uint64_t>(size, img.size());
    file_size_.store(size);
    MMDOC_RETURN_IF_ERROR(MapData(size));
    MMDOC_RETURN_IF_ERROR(PickMeta(writer_base(), size, path_, &meta, &slot));
    *created = true;
  }
  ps_ = meta.page_size;
  checkpoint_txid_.store(meta.txid);
  log_epoch_.store(meta.log_epoch);
  log_txid_ = meta.log_txid;
  pages_cover_txid_ = meta.log_txid;
  {
    MutexLock l(&log_mu_);
    last_txid_ = std::max(meta.txid, meta.log_txid);
  }
  db_id_[0] = meta.db_id[0];
  db_id_[1] = meta.db_id[1];
  legacy_ = meta.version < 3;
  durable_clean_ = meta.clean;
  have_stamp_ = !legacy_ && DecodeStamp(writer_base() + slot * ps_, slot, &stamp_);
  // A version 1 or 2 log has no header: its records start at 0.
  log_from_ = Log::Cursor{legacy_ ? 0 : meta.log_offset, meta.log_epoch};
  cover_next_ = log_from_;
  verified_.Reserve(meta.page_count);
  {
    MutexLock l(&state_mu_);
    committed_.txid = meta.txid;
    committed_.page_count = meta.page_count;
    committed_.base = base_;
    std::copy(meta.roots, meta.roots + kMetaRoots, committed_.roots);
    published_.fetch_add(1, std::memory_order_release);
  }
  MutexLock l(&alloc_mu_);
  MMDOC_RETURN_IF_ERROR(LoadFreeList(
      meta.freelist_root, ps_, meta.page_count,
      [&](PageId id, const uint8_t** pg) {
        return CheckPage(id, writer_base(), meta.page_count, pg);
      },
      &free_, &freelist_pages_));
  if (free_.size() != meta.free_count) {
    return Status::Corruption(path_, "free list holds " + std::to_string(free_.size()) +
                                         " pages, meta says " + std::to_string(meta.free_count));
  }
  return Status::OK();
}

Status PagerImpl::OpenLog(bool created) {
  if (created) {
    // A new database gets its log now, so that a create that fails on a
    // full disk fails whole.
    MMDOC_RETURN_IF_ERROR(log_.Create(db_id_, InitialLogSize(), opts_.log_size));
    log_.Restart(log_epoch_.load());
    recovered_ = true;
    return Status::OK();
  }
  Status s = log_.Open(db_id_, legacy_, opts_.log_size, opts_.accept_log_loss, opts_.read_only);
  uint64_t replayable = log_txid_;
  if (s.ok()) {
    // A clean database's log holds nothing to replay; a legacy one is read
    // and then replaced by a log with a header.
    // A clean meta with records after it: the meta that began them (the
    // newest, page txid % 2) is damaged; its pages are this one's, so the
    // records replay on them as after a crash.
    const Log::ScanEnd e = durable_clean_ && legacy_ ? Log::ScanEnd{} : ScanLog(nullptr);
    if (e.records > 0) durable_clean_ = false;
    replay_records_ = e.records;
    replayable = std::max(replayable, e.last_txid);
    // Records newer than any the scan reached: the data file is older than
    // its log (a copy put back, or its newest meta page damaged).
    uint64_t epoch, first;
    if (!legacy_ && log_.RecordAtStart(&epoch, &first) && first > replayable &&
        !opts_.accept_log_loss) {
      return Status::Corruption(
          path_, "the log holds commit " + std::to_string(first) +
                     ", newer than what the data file and the log after its checkpoint reach "
                     "(commit " +
                     std::to_string(replayable) +
                     "): the data file is an older copy, or its newest meta page is damaged "
                     "(open with accept_log_loss to open at the data file's checkpoint)");
    }
    log_needs_create_ = legacy_;
  } else if (s.IsNotFound() || s.IsCorruption()) {
    // Rule 9: without a log of its own, a database that was not closed
    // cleanly may have lost commits; say so unless told to go on.
    if (!durable_clean_ && !legacy_ && !opts_.accept_log_loss) {
      // (Log::Open's Corruption names the log already.)
      const std::string why = s.IsNotFound() ? log_.path() + ": the log is missing" : s.message();
      return Status::Corruption(why +
                                ", and the database was not closed cleanly: the commits after its "
                                "last checkpoint were in it (open with accept_log_loss to open at "
                                "the last checkpoint)");
    }
    log_needs_create_ = true;
    log_unreadable_ = s.IsCorruption();
  } else {
    return s;
  }
  // The stamp in the newest meta was written after this checkpoint, of
  // records the log must still hold.
  if (!durable_clean_ && have_stamp_ && stamp_.txid > replayable && !opts_.accept_log_loss) {
    return Status::Corruption(
        log_.path(), "the log ends at commit " + std::to_string(replayable) + " but commit " +
                         std::to_string(stamp_.txid) +
                         " was made durable: the log is an older copy or was cut short (open "
                         "with accept_log_loss to open at what it holds)");
  }
  recovered_ = replay_records_ == 0;
  return Status::OK();
}

PagerImpl::~PagerImpl() {
  (void)Close();
  for (auto& m : maps_) (void)data_->Unmap(m.first, m.second);
}

Status PagerImpl::Close() {
  if (closed_) return close_status_;
  closed_ = true;
  log_.StopFlusher();
  bool writer_alive;
  {
    MutexLock l(&writer_mu_);
    writer_alive = writer_active_;
  }
  // A live write Txn violates the REQUIRES of Close; do not deadlock.
  assert(!writer_alive && "write Txn open at Close");
  if (!opened_ || crash_on_close_ || retired_.load() || opts_.read_only) return close_status_;
  if (writer_alive) {
    close_status_ = Status::Busy(path_, "a write transaction is open at close");
  } else if (HasError()) {
    close_status_ = BackgroundError();
  } else {
    AcquireWriter();
    // Rule 9: a database closed cleanly says so, and its log is not needed.
    if (recovered_ && (!durable_clean_ || writer_committed().txid != checkpoint_txid_.load() ||
                       log_.InUse() > 0)) {
      close_status_ = CheckpointLocked(/*clean=*/true);
    }
    ReleaseWriter();
  }
  return close_status_;
}

// ---------------------------------------------------------------------------
// Transactions

void PagerImpl::RegisterReaderLocked() {
  state_mu_.AssertHeld();
  const uint64_t txid = committed_.txid;
  if (txid != newest_reader_txid_) {
    if (newest_readers_ > 0) readers_[newest_reader_txid_] += newest_readers_;
    newest_reader_txid_ = txid;
    newest_readers_ = 0;
  }
  newest_readers_++;
}

Status PagerImpl::CheckReadable() {
  // Readers ask as commits do (at most every kFileCheckMs), so that
  // readers alone notice too.
  Status s = CheckFileInPlace();
  if (!file_lost_.load(std::memory_order_acquire)) return Status::OK();
  return s.ok() ? BackgroundError() : s;
}

Result<std::unique_ptr<Txn>> PagerImpl::BeginRead() {
  MMDOC_RETURN_IF_ERROR(CheckReadable());
  MutexLock l(&state_mu_);
  RegisterReaderLocked();
  return std::unique_ptr<Txn>(new ReadTxnImpl(this, committed_));
}

Result<std::unique_ptr<Txn>> PagerImpl::BeginInternalRead() {
  MMDOC_RETURN_IF_ERROR(CheckReadable());
  MutexLock l(&state_mu_);
  RegisterReaderLocked();
  internal_readers_++;
  return std::unique_ptr<Txn>(
      new ReadTxnImpl(this, committed_, /*holds_writer=*/false, /*internal=*/true));
}

Result<std::unique_ptr<Txn>> PagerImpl::BeginQuiescent() {
  AcquireWriter();
  MutexLock l(&state_mu_);
  RegisterReaderLocked();
  return std::unique_ptr<Txn>(new ReadTxnImpl(this, committed_, /*holds_writer=*/true));
}

Result<std::unique_ptr<Txn>> PagerImpl::BeginWrite() { return BeginWrite(PageWrites::kThroughMap); }

Result<std::unique_ptr<Txn>> PagerImpl::BeginWrite(PageWrites how) {
  if (opts_.read_only) return ReadOnlyError();
  if (HasError()) return BackgroundError();
  AcquireWriter();
  if (HasError()) {
    ReleaseWriter();
    return BackgroundError();
  }
  if (retired_.load()) {
    ReleaseWriter();
    return Status::Busy(path_, "the database was replaced by a compacted copy: begin again");
  }
  if (!recovered_ && !recovering_) {
    ReleaseWriter();
    return Status::InvalidArgument(path_, "the log holds " + std::to_string(replay_records_) +
                                              " committed records: call Pager::Recover first");
  }
  if (!recovering_) {
    Status s = in_use_ ? CheckFileInPlace() : StartWriting();
    if (!s.ok()) {
      ReleaseWriter();
      return s;
    }
  }
  ReleasePending();
  uint64_t txid;
  {
    MutexLock l(&log_mu_);
    txid = ++last_txid_;
  }
  return std::unique_ptr<Txn>(new WriteTxnImpl(this, writer_committed(), txid, how));
}

PageId PagerImpl::TakeRunLocked(uint32_t n) {
  alloc_mu_.AssertHeld();
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
  pending_.Release(oldest, &free_);
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

Status PagerImpl::CommitTxn(WriteTxnImpl* txn, std::string_view payload, Durability d,
                            bool replayed, const std::pair<uint64_t, Log::Cursor>* merged) {
  if (HasError()) {
    AbortTxn(txn);
    return BackgroundError();
  }
  if (txn->write_at_) {
    // Its pages reach the file before anything can refer to them.
    Status s = txn->WriteBack();
    if (!s.ok()) {
      txn->Abort();
      return s;
    }
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
    if (txn->write_at_) {
      // Summed when written back.
    } else if (opts_.paranoid_checks) {
      uint8_t* pg = writer_base() + id * ps_;
      EncodeFixed64(pg + kPageChecksumOffset, PageChecksum(pg, uint64_t{run} * ps_, id));
    } else {
      if (m.unsummed == 0) unsummed_.push_back(id);
      m.unsummed = run;
    }
    verified_.Set(id);
    for (uint32_t i = 1; i < run; i++) verified_.Clear(id + i);
  }
  bool by_checkpoint = false;
  Log::Position pos;
  if (!replayed) {
    bool fits;
    Status s;
    {
      MutexLock l(&log_mu_);
      // Rule 10: a record of a write txn must follow every record before
      // it in txid order, and the pages must hold every record before it.
      if (log_.last_txid() > txn->txid_ || log_.last_txid() > pages_cover_txid_) {
        s = Status::InvalidArgument(path_,
                                    "a write transaction committed beside log-only commits that "
                                    "are not merged into the pages");
      } else {
        s = log_.Append(txn->txid_, payload, d, &pos, &fits);
      }
    }
    if (!s.ok()) {  // not published; an I/O error is sticky (rule 8)
      AbortTxn(txn);
      return s;
    }
    by_checkpoint = !fits;  // rule 3: no record; the checkpoint commits it
  }
  const bool group = !replayed && !by_checkpoint && d == Durability::kGroup;
  if (!replayed && !by_checkpoint && !group) {
    Status s = log_.Sync(d, pos);
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
    published_.fetch_add(1, std::memory_order_release);
  }
  {
    MutexLock l(&alloc_mu_);
    for (PageId id : txn->lists_.freed_dirty) free_.insert(id);
    pending_.Add(txn->txid_, txn->lists_.freed_recent, /*for_checkpoint=*/false);
    pending_.Add(txn->txid_, txn->lists_.freed_ckpt, /*for_checkpoint=*/true);
  }
  // The pages now hold this txn's changes, and (rule 10) every record's
  // before it; or, for a merge, the records it merged.
  if (merged != nullptr) {
    pages_cover_txid_ = merged->first;
    cover_next_ = merged->second;
  } else {
    pages_cover_txid_ = txn->txid_;
    cover_next_ = log_.head();
  }
  Status s;
  if (by_checkpoint) {
    // The commit is published but not logged: it must not be lost behind a
    // later commit's record (rule 8).
    s = CheckpointLocked(/*clean=*/false);
    if (!s.ok()) SetError(s);
  }
  if (d == Durability::kPeriodic && !replayed) log_.StartFlusher(opts_.sync_interval_ms);
  FinishTxn(txn);
  if (group) s = log_.Sync(d, pos);
  return s;
}

Status PagerImpl::PrepareCommits() {
  if (opts_.read_only) return ReadOnlyError();
  if (HasError()) return BackgroundError();
  AcquireWriter();
  Status s;
  if (!recovered_) {
    s = Status::InvalidArgument(path_, "call Pager::Recover first");
  } else if (retired_.load()) {
    s = Status::Busy(path_, "the database was replaced by a compacted copy");
  } else if (!in_use_) {
    s = StartWriting();
  }
  ReleaseWriter();
  return s;
}

namespace {

// Milliseconds of a monotonic clock good to a few: the kernel's coarse
// clock is one memory read, where steady_clock took 2% of a batch-1
// insert on a VM's kvm-clock.
int64_t CoarseMonotonicMs() {
#ifdef CLOCK_MONOTONIC_COARSE
  timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0)
    return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1000000;
#endif
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status PagerImpl::CheckFileInPlace() {
  constexpr int64_t kFileCheckMs = 100;
  const int64_t now = CoarseMonotonicMs();
  int64_t last = file_checked_ms_.load(std::memory_order_relaxed);
  if (now - last < kFileCheckMs || retired_.load()) return Status::OK();
  // One thread asks; commits that race it go on, as within the interval.
  if (!file_checked_ms_.compare_exchange_strong(last, now)) return Status::OK();
  Status s = FileIsOurs();
  if (!s.ok()) SetError(s);
  return s;
}

Status PagerImpl::FileIsOurs() {
  Result<bool> here = data_->IsAt(path_);
  if (!here.ok()) return here.status();
  if (!*here) {  // the map still holds this database's file: reads go on
    return Status::IOError(path_,
                           "the database file was moved, replaced or removed while open: reopen "
                           "the database");
  }
  // Read with pread, between two reads of the txid: a checkpoint that
  // wrote the other meta page meanwhile is not a stranger.
  const uint64_t txid = checkpoint_txid_.load();
  std::vector<uint8_t> page(ps_);
  MMDOC_RETURN_IF_ERROR(data_->ReadAt((txid % 2) * ps_, page.data(), ps_));
  if (checkpoint_txid_.load() != txid) return Status::OK();
  Meta m;
  std::string why;
  if (DecodeMeta(page.data(), ps_, txid % 2, &m, &why) && m.txid == txid &&
      m.db_id[0] == db_id_[0] && m.db_id[1] == db_id_[1]) {
    return Status::OK();
  }
  file_lost_.store(true, std::memory_order_release);
  return Status::IOError(path_,
                         "the database file was overwritten while open (its meta page is no "
                         "longer this database's): reopen the database");
}

Status PagerImpl::AppendCommit(std::string_view payload, Durability d, uint64_t* txid) {
  CommitTicket ticket;
  MMDOC_RETURN_IF_ERROR(AppendUnsynced(payload, d, txid, &ticket));
  return SyncCommit(d, ticket);  // outside log_mu_, so that others append meanwhile
}

Status PagerImpl::AppendUnsynced(std::string_view payload, Durability d, uint64_t* txid,
                                 CommitTicket* ticket) {
  if (HasError()) return BackgroundError();
  MutexLock l(&log_mu_);
  if (!in_use_) return Status::InvalidArgument(path_, "AppendUnsynced before PrepareCommits");
  MMDOC_RETURN_IF_ERROR(CheckFileInPlace());
  const uint64_t next = last_txid_ + 1;
  Log::Position pos;
  bool fits;
  MMDOC_RETURN_IF_ERROR(log_.Append(next, payload, d, &pos, &fits));
  if (!fits) return Status::Busy(log_.path(), "the log is full until a merge and checkpoint");
  last_txid_ = next;
  *txid = next;
  *ticket = CommitTicket{pos.offset, pos.length, pos.lsn_end};
  if (d == Durability::kPeriodic) log_.StartFlusher(opts_.sync_interval_ms);
  return Status::OK();
}

Status PagerImpl::MergeFileIsOurs(WriteTxnImpl* w) {
  // A merge writes its pages where this database's free list says they are
  // free: into a file overwritten in place within CheckFileInPlace's
  // interval, that is over another database's live pages. So a merge asks
  // every time, as a checkpoint does.
  Status here = FileIsOurs();
  if (here.ok()) return here;
  w->Abort();
  SetError(here);
  return here;
}

Status PagerImpl::CommitMerge(Txn* txn, uint64_t through_txid, LogPosition next) {
  auto* w = dynamic_cast<WriteTxnImpl*>(txn);
  if (w == nullptr || w->p_ != this) {
    return Status::InvalidArgument("CommitMerge: not a write txn of this pager");
  }
  if (w->done_) return Status::InvalidArgument("transaction already finished");
  if (through_txid < pages_cover_txid_ || through_txid > log_.last_txid()) {
    w->Abort();
    return Status::InvalidArgument(path_, "CommitMerge: through " + std::to_string(through_txid) +
                                              ", not between the last merge and the last record");
  }
  MMDOC_RETURN_IF_ERROR(MergeFileIsOurs(w));
  const std::pair<uint64_t, Log::Cursor> merged{through_txid, Log::Cursor{next.offset, next.epoch}};
  return CommitTxn(w, {}, Durability::kNone, /*replayed=*/true, &merged);
}

Status PagerImpl::CommitRewrite(Txn* txn) {
  auto* w = dynamic_cast<WriteTxnImpl*>(txn);
  if (w == nullptr || w->p_ != this) {
    return Status::InvalidArgument("CommitRewrite: not a write txn of this pager");
  }
  if (w->done_) return Status::InvalidArgument("transaction already finished");
  MMDOC_RETURN_IF_ERROR(MergeFileIsOurs(w));
  // The pages cover the same records as before.
  const std::pair<uint64_t, Log::Cursor> same{pages_cover_txid_, cover_next_};
  return CommitTxn(w, {}, Durability::kNone, /*replayed=*/true, &same);
}

Status PagerImpl::CommitReplayed(Txn* txn) {
  auto* w = dynamic_cast<WriteTxnImpl*>(txn);
  if (w == nullptr || w->p_ != this) {
    return Status::InvalidArgument("CommitReplayed: not a write txn of this pager");
  }
  if (w->done_) return Status::InvalidArgument("transaction already finished");
  return CommitTxn(w, {}, Durability::kNone, /*replayed=*/true);
}

// ---------------------------------------------------------------------------
// Checkpoint, recovery

Status PagerImpl::Checkpoint() {
  if (opts_.read_only) return ReadOnlyError();
  if (HasError()) return BackgroundError();
  AcquireWriter();
  Status s;
  if (retired_.load()) {
    s = Status::Busy(path_, "the database was replaced by a compacted copy");
  } else if (!recovered_) {
    s = Status::InvalidArgument(path_, "call Pager::Recover before Checkpoint");
  } else {
    s = CheckpointLocked(/*clean=*/!in_use_);
  }
  ReleaseWriter();
  return s;
}

// Rule 3, in its steps. REQUIRES: the writer gate is held and no write txn
// is in progress.
Status PagerImpl::CheckpointLocked(bool clean) {
  if (opts_.read_only) return ReadOnlyError();
  if (HasError()) return BackgroundError();
  // Nothing is written into a file that is no longer this database.
  if (Status here = FileIsOurs(); !here.ok()) {
    SetError(here);
    return here;
  }
  // No commit since the durable meta: this one's pages are that one's.
  const bool same_pages = writer_committed().txid <= checkpoint_txid_.load();
  uint64_t txid = std::max(writer_committed().txid, checkpoint_txid_.load());
  if (txid % 2 == checkpoint_txid_.load() % 2) {
    // Never overwrite the newest durable meta: advance by an empty txn.
    txid++;
    {
      MutexLock l(&log_mu_);
      last_txid_ = std::max(last_txid_, txid);
    }
    MutexLock l(&state_mu_);
    committed_.txid = txid;
    published_.fetch_add(1, std::memory_order_release);
  }
  Meta meta;
  meta.txid = txid;
  meta.page_size = ps_;
  // Rule 10: when the pages hold every record, the log starts over under a
  // new epoch; else replay must start at the first record they lack, and
  // the database is not clean.
  const bool covered = log_.last_txid() <= pages_cover_txid_;
  if (!covered) clean = false;
  if (covered) {
    meta.log_txid = std::max(pages_cover_txid_, log_.last_txid());
    meta.log_offset = log_.start();
    // The next epoch is what a scan from the meta before this one follows
    // on to (a session after a crash appends under it): only right when
    // this meta's pages are that one's. Otherwise one more, so that if
    // this meta is damaged the records after it are not replayed onto the
    // older pages, which lack the commits this checkpoint holds.
    meta.log_epoch = std::max(log_epoch_.load(), log_.head().epoch) + (same_pages ? 1 : 2);
  } else {
    meta.log_txid = pages_cover_txid_;
    meta.log_offset = cover_next_.offset;
    meta.log_epoch = cover_next_.epoch;
  }
  MMDOC_RETURN_IF_ERROR(WriteFreeList(txid, &meta.freelist_root, &meta.free_count));
  SumUnsummedPages();
  // Data pages and free-list pages reach the disk before the meta.
  Status s = data_->Sync();
  if (!s.ok()) {
    SetError(s);
    return s;
  }
  // A data file renamed over or removed behind our back takes this
  // checkpoint with it: say so, once, rather than write into a lost file.
  Result<bool> here = data_->IsAt(path_);
  if (!here.ok() || !*here) {
    s = here.ok() ? Status::IOError(path_,
                                    "the database file was moved, replaced or removed "
                                    "while open")
                  : here.status();
    SetError(s);
    return s;
  }
  meta.page_count = writer_committed().page_count;
  std::copy(writer_committed().roots, writer_committed().roots + kMetaRoots, meta.roots);
  meta.db_id[0] = db_id_[0];
  meta.db_id[1] = db_id_[1];
  meta.clean = clean;
  EncodeMeta(meta, txid % 2, writer_base() + (txid % 2) * ps_);
  s = data_->Sync();
  if (!s.ok()) {
    SetError(s);
    return s;
  }
  // The checkpoint is durable: the log restarts under the new epoch, or
  // lets go of the records the pages now hold.
  log_epoch_.store(meta.log_epoch);
  checkpoint_txid_.store(txid);
  log_txid_ = meta.log_txid;
  log_from_ = Log::Cursor{meta.log_offset, meta.log_epoch};
  durable_clean_ = clean;
  in_use_ = !clean;
  legacy_ = false;
  if (covered) {
    log_.Restart(meta.log_epoch);
    cover_next_ = log_.head();
  } else {
    log_.Release(cover_next_);
  }
  {
    MutexLock l(&alloc_mu_);
    pending_.CheckpointDone(txid);
  }
  ReleasePending();
  return Status::OK();
}

Status PagerImpl::StartWriting() {
  // (A log holding records the pages lack is never replaced.)
  const bool covered = log_.last_txid() <= pages_cover_txid_;
  // A clean database's log is made anew at its starting size, so that a
  // log grown by a busy session does not keep its size into a quiet one.
  if (log_needs_create_ || !log_.ready() ||
      (covered && durable_clean_ && log_.capacity() - log_.start() != InitialLogSize())) {
    // A log is replaced only while the durable meta says it holds nothing.
    if (log_unreadable_) MMDOC_RETURN_IF_ERROR(LogPathReplaceable());
    if (!durable_clean_) MMDOC_RETURN_IF_ERROR(CheckpointLocked(/*clean=*/true));
    MMDOC_RETURN_IF_ERROR(log_.Create(db_id_, InitialLogSize(), opts_.log_size));
    log_needs_create_ = false;
    log_unreadable_ = false;
  } else {
    MMDOC_RETURN_IF_ERROR(log_.AllocateAll());
  }
  // Holes in a sparse copy of the file would otherwise be filled by stores
  // through the map, and a full disk would be SIGBUS instead of Full.
  MMDOC_RETURN_IF_ERROR(data_->Allocate(0, file_size_.load()));
  return CheckpointLocked(/*clean=*/false);
}

Status PagerImpl::MoveTo(const std::string& path) {
  AcquireWriter();
  // Clean first: after a crash between the two renames, the new data file
  // must not need the log that is not yet beside it.
  Status s = CheckpointLocked(/*clean=*/true);
  if (s.ok()) s = fs_->Rename(path_, path);
  if (s.ok()) {
    path_ = path;
    s = log_.Rename(path + "-log");
    // The data file has its new name but the log has not: no more writes
    // here (a reopen finds a clean database and makes its log anew).
    if (!s.ok()) SetError(s);
  }
  if (s.ok()) s = fs_->SyncDir(path);
  ReleaseWriter();
  return s;
}

void PagerImpl::StampDurable(uint64_t epoch, uint64_t txid) {
  // Written into the durable meta, whatever checkpoint it is: a stamp of a
  // record the checkpoint covers says nothing the log contradicts. Not
  // after an error: the file may no longer be this database (FileIsOurs).
  if (HasError()) return;
  const PageId slot = checkpoint_txid_.load() % 2;
  EncodeStamp(Stamp{epoch, txid}, slot, meta_map_ + slot * ps_);
}

Status PagerImpl::WriteFreeList(uint64_t txid, PageId* root, uint64_t* entries_count) {
  MutexLock l(&alloc_mu_);
  const uint64_t cap = FreeListCapacity(ps_);
  // The persisted free list: free + pending + the old free-list pages (on
  // reopen no reader exists and the new meta no longer reaches them).
  const uint64_t total = free_.size() + pending_.size() + freelist_pages_.size();
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
    published_.fetch_add(1, std::memory_order_release);
  }
  // Old free-list pages were reachable from the durable meta: they wait
  // for this checkpoint (rule 5b).
  pending_.Add(txid, freelist_pages_, /*for_checkpoint=*/true);
  std::vector<PageId> entries = free_.ToVector();
  pending_.ForEach([&](PageId id) { entries.push_back(id); });
  std::sort(entries.begin(), entries.end());
  size_t next = 0;
  for (size_t i = 0; i < new_fl.size(); i++) {
    const uint64_t n = std::min<uint64_t>(cap, entries.size() - next);
    EncodeFreeListPage(writer_base() + new_fl[i] * ps_, ps_, new_fl[i], txid,
                       i + 1 < new_fl.size() ? new_fl[i + 1] : 0, entries.data() + next, n);
    next += n;
    verified_.Set(new_fl[i]);
  }
  assert(next == entries.size());
  freelist_pages_ = new_fl;
  *root = new_fl.empty() ? 0 : new_fl[0];
  *entries_count = entries.size();
  return Status::OK();
}

void PagerImpl::SumUnsummedPages() {
  for (PageId id : unsummed_) {
    PageMark& m = marks_[id];
    if (m.unsummed == 0) continue;  // freed since, or listed twice
    uint8_t* pg = writer_base() + id * ps_;
    EncodeFixed64(pg + kPageChecksumOffset, PageChecksum(pg, uint64_t{m.unsummed} * ps_, id));
    m.unsummed = 0;
  }
  unsummed_.clear();
}

Status PagerImpl::Recover(const ReplayFn& apply) {
  {
    MutexLock l(&writer_mu_);
    if (recovered_) return Status::OK();
    if (opts_.read_only) {
      return Status::NotSupported(
          path_, "its log holds " + std::to_string(replay_records_) +
                     " commits to replay into its pages, which a read-only open cannot do "
                     "(open it for writing once)");
    }
    recovering_ = true;
  }
  Status err;
  const Log::ScanEnd end = ScanLog([&](uint64_t txid, std::string_view payload) {
    {
      // The replaying write txn commits as the record's txid.
      MutexLock l(&log_mu_);
      last_txid_ = txid - 1;
    }
    Status s = apply(txid, payload);
    if (s.ok() && writer_committed().txid != txid) {
      s = Status::Corruption(path_, "replay of log record " + std::to_string(txid) +
                                        " did not commit it with CommitReplayed");
    }
    if (!s.ok()) err = s;
    return s.ok();
  });
  {
    MutexLock l(&writer_mu_);
    recovering_ = false;
    if (!err.ok()) return err;
    recovered_ = true;
    replay_records_ = 0;
  }
  {
    MutexLock l(&log_mu_);
    last_txid_ = std::max(last_txid_, end.last_txid);
  }
  log_.SetPosition(log_from_, Log::Cursor{end.end.offset, end.end.epoch + 1}, end.last_txid);
  return Checkpoint();
}

Status PagerImpl::RecoverIntoMemory(const ReplayFn& apply) {
  {
    MutexLock l(&writer_mu_);
    if (recovered_) return Status::OK();
    recovering_ = true;
  }
  Status err;
  const Log::ScanEnd end = ScanLog([&](uint64_t txid, std::string_view payload) {
    err = apply(txid, payload);
    return err.ok();
  });
  MutexLock l(&writer_mu_);
  recovering_ = false;
  if (!err.ok()) return err;
  recovered_ = true;
  replay_records_ = 0;
  {
    MutexLock ll(&log_mu_);
    last_txid_ = std::max(last_txid_, end.last_txid);
  }
  // The records stay in the log, which goes on after them under a new
  // epoch (so a torn record at the end cannot be taken for a new one).
  log_.SetPosition(log_from_, Log::Cursor{end.end.offset, end.end.epoch + 1}, end.last_txid);
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Introspection

Status PagerImpl::AccountedPages(std::vector<PageId>* pages) {
  pages->clear();
  MutexLock l(&alloc_mu_);
  *pages = free_.ToVector();
  pending_.ForEach([&](PageId id) { pages->push_back(id); });
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
      return Status::Corruption(path_, "free list: page " + std::to_string(pages[i]) +
                                           " out of range (page count " + std::to_string(pc) + ")");
    }
    if (i > 0 && pages[i] == pages[i - 1]) {
      return Status::Corruption(path_,
                                "free list: page " + std::to_string(pages[i]) + " listed twice");
    }
  }
  const uint64_t ck = checkpoint_txid_.load();
  std::string why;
  Meta meta;
  if (!DecodeMeta(base + (ck % 2) * ps_, ps_, ck % 2, &meta, &why)) {
    return Status::Corruption(path_, "durable meta: " + why);
  }
  {
    MutexLock l(&alloc_mu_);
    for (PageId id : freelist_pages_) {
      Status s = VerifyPageBytes(id, base + id * ps_, pc);
      if (!s.ok()) return Status::Corruption(path_, "free list: " + s.message());
    }
  }
  // Every record from the replay start to the head must be intact.
  const Log::Cursor head = log_.head();
  const Log::ScanEnd e = ScanLog(nullptr, &head);
  if (e.end.offset != head.offset && log_.last_txid() > log_txid_) {
    return Status::Corruption(
        log_.path(), "log record at offset " + std::to_string(e.end.offset) + " does not verify");
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
    st.readers -= static_cast<uint64_t>(internal_readers_);
    const uint64_t oldest = OldestReaderLocked();
    st.oldest_reader_txid = oldest == UINT64_MAX ? 0 : oldest;
  }
  {
    MutexLock l(&alloc_mu_);
    st.free_pages = free_.size();
    st.pending_pages = pending_.size();
    st.freelist_pages = freelist_pages_.size();
  }
  st.checkpoint_txid = checkpoint_txid_.load();
  st.log_used = log_.InUse();
  st.file_size = file_size_.load();
  st.log_file_size = log_.capacity();
  return st;
}

Pager::~Pager() = default;

Result<std::unique_ptr<Pager>> Pager::Open(const std::string& path, const PagerOptions& options) {
  auto p = std::make_unique<PagerImpl>(path, options);
  Status s = p->Init();
  if (!s.ok()) return s;
  return std::unique_ptr<Pager>(std::move(p));
}

}  // namespace mmdoc::storage
