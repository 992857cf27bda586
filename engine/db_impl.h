// Internals of the engine: DBImpl (one open database), TransactionImpl (a
// read snapshot or the write transaction over a storage::Txn), CursorImpl
// (query execution), and the logical log payload.
//
// How a database maps onto trees (index::Catalog names):
//   "c:" + collection            the _id tree: AppendKey(_id) -> BSON bytes
//   "i:" + collection + '\0' + field
//                                a secondary index:
//                                unique:     AppendKey(value)        -> pk
//                                not unique: AppendKey(value) + pk   -> pk
//                                (pk = AppendKey(_id); arrays give one entry
//                                per distinct element; missing -> null)
// The catalog metadata of "c:" + collection is the CollectionMeta encoding
// below; index trees carry no metadata of their own. Every collection and
// index tree stores its keys through TreeKeyCodec() (key_codec.cc: a
// canonical GUID string key is stored in 19 bytes); the engine only ever
// sees keys in the ordinary AppendKey form.
//
// The log payload of a write transaction is the list of logical operations
// it did, replayed in order by DBImpl::Replay after a crash:
//   op (u8) | collection length (u32) | collection | arg length (u32) | arg
// with the lengths little-endian (storage/coding.h)
// where op is one of LogOp and arg is the document (insert, replace: the
// complete new document, so updates replay exactly), the pk (delete), the
// index name (index create/drop; a create's first arg byte holds the
// kUniqueFlag and kSpecFlag bits, and with kSpecFlag the index's spec
// follows instead of the name: engine/index_spec.h).
//
// Thread safety: DBImpl is thread-safe (the pager serializes writers);
// TransactionImpl and CursorImpl belong to one thread.
#ifndef MMDOC_ENGINE_DB_IMPL_H_
#define MMDOC_ENGINE_DB_IMPL_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <vector>

#include "engine/index_spec.h"
#include "engine/query.h"
#include "engine/shared_read.h"
#include "engine/update.h"
#include "index/btree.h"
#include "index/buffered_tree.h"
#include "index/catalog.h"
#include "index/write_buffer.h"
#include "mmdoc/db.h"
#include "storage/mutex.h"
#include "storage/pager.h"

namespace mmdoc {

// Do not renumber: stored in the log.
enum class LogOp : uint8_t {
  kInsert = 1,
  kReplace = 2,
  kDelete = 3,
  kCreateCollection = 4,
  kDropCollection = 5,
  kCreateIndex = 6,
  kDropIndex = 7,
  kDeleteAll = 8,  // every document of the collection (its trees freed whole)
};

// Catalog metadata of a collection: u64 count | u32 n | n x (u8 flags:
// 1 unique, 2 multikey, 4 spec | u32 length | name | with flag 4: the
// index's spec, engine/index_spec.h).
struct CollectionMeta {
  uint64_t count = 0;
  std::vector<IndexMeta> indexes;
  std::string Encode() const;
  static bool Decode(std::string_view in, CollectionMeta* out);
};

// What transactions learned about collections from the catalog, kept so
// the next transaction on the same catalog state skips the lookups (a
// read-your-last-commit point lookup would otherwise spend most of its time
// in the catalog). A catalog state is named by its root page and the txid
// written in that page's header: pages are never changed while reachable
// and a reused page carries a new txid, so equal keys mean equal catalogs.
// A run of one of a collection's trees (index/run.h): a frozen
// generation's changes to it, in a catalog tree of its own named by
// RunName, with metadata EncodeRunMeta.
struct CachedRun {
  std::string name;  // its catalog name
  storage::PageId root = 0;
  int64_t count_delta = 0;  // live keys it adds to the layers below
  uint64_t entries = 0;
  // One of the oldest runs of a tree whose merge into it is under way, in
  // slices: every key below merged_below is merged (engine/runs.cc).
  bool merging = false;
  std::string merged_below;
  // Built when the run was written; nullptr after a reopen (every key may
  // be in the run).
  std::shared_ptr<const index::KeyFilter> filter;
};
struct CachedColl {
  storage::PageId primary_root = 0;
  CollectionMeta meta;
  std::vector<storage::PageId> index_roots;  // parallel to meta.indexes
  // Each tree's runs, newest first: [0] the _id tree's, [1 + i] index i's.
  // Empty when the collection has none.
  std::vector<std::vector<CachedRun>> runs;
};
// A merge writes its changed pages out once they take this much memory.
inline constexpr uint64_t kMergePrivateBytes = 16ull << 20;
// A tree's runs are merged into it once it has this many
// (docs/write-path.md, "Sorted runs before the leaves").
inline constexpr size_t kRunsBeforeMerge = 4;
// MergeAll (close, Check, Checkpoint) merges runs in slices of at least
// this much, each followed by a checkpoint: a small buffer's slices would
// make a close sync every few pages.
inline constexpr uint64_t kMinCloseSliceBytes = 1ull << 20;

struct CatalogCache {
  storage::PageId catalog_root = 0;
  uint64_t catalog_txid = 0;
  std::map<std::string, CachedColl, std::less<>> colls;
};

// Whether the BSON document `doc` matches {field: "value"} in MongoDB's
// sense, for a plain field name (no dots): the field is that string, or an
// array with that string as an element (cursor.cc).
bool PointMatches(std::string_view doc, std::string_view field, std::string_view value);

std::string CollectionTreeName(std::string_view collection);
// How collection and index trees store keys (key_codec.cc).
const index::KeyCodec& TreeKeyCodec();
std::string IndexTreeName(std::string_view collection, std::string_view field);
// The catalog name of a run of tree `tree` (CollectionTreeName or
// IndexTreeName) of `collection`, written by the merge of the generation
// whose last commit is `seq`: "r:" COLL NUL seq (8 bytes, big-endian) TREE,
// so a collection's runs list oldest first under RunPrefix.
std::string RunName(std::string_view collection, uint64_t seq, std::string_view tree);
std::string RunPrefix(std::string_view collection);
// The tree name in a run's name; false when `name` is not one.
bool RunTree(std::string_view name, std::string_view* tree);
// A run's catalog metadata: i64 count delta | u64 entries, then for a run
// whose merge is under way (CachedRun::merging) 'm' | merged_below.
std::string EncodeRunMeta(const CachedRun& run);
bool DecodeRunMeta(std::string_view in, CachedRun* run);

struct WriteState;  // below
struct PointRead;   // transaction.cc

class DBImpl {
 public:
  // `new_db_id`: the id a new file gets (storage::PagerOptions::new_db_id).
  static Result<std::unique_ptr<DBImpl>> Open(const std::string& path, const Options& options,
                                              const uint64_t* new_db_id = nullptr);
  ~DBImpl();  // Close()
  // DB::Close: merges the write buffer and closes the pager (its clean
  // checkpoint); the first error either met. REQUIRES: no transaction open.
  Status Close();
  // Transactions the caller holds unfinished (see TransactionImpl::CountOpen):
  // DB::Close refuses while there are any.
  int OpenTransactions() const { return open_txns_.load(); }
  void CountTransactions(int delta) { open_txns_.fetch_add(delta); }
  // What every DB call returns after DB::Close.
  static Status ClosedError() { return Status::InvalidArgument("the database is closed"); }
  // Options::read_only: what every write, Checkpoint, Flush and Compact
  // returns (the pager refuses them too).
  bool read_only() const { return options_.read_only; }
  Status ReadOnlyError() const {
    return Status::NotSupported(path_, "the database is open read-only");
  }
  // Whether this process is a child forked after the open. The handle's
  // threads, locks, snapshots and file lock are the parent's: DB refuses
  // every call with ForkedError, and closes without touching the files.
  bool Forked() const { return forks_.load(std::memory_order_relaxed) != forks_at_open_; }
  Status ForkedError() const;
  // Forks of this process since the library first opened a database (a
  // pthread_atfork handler counts them in the child).
  static std::atomic<uint64_t> forks_;

  Result<std::unique_ptr<TransactionImpl>> Begin(const WriteOptions& wo, bool replaying = false);
  // A read transaction; a spare one EndRead kept is renewed when there is
  // one (with the collection state it had, if the catalog has not changed).
  Result<std::unique_ptr<TransactionImpl>> BeginRead();
  // Finishes a read transaction from BeginRead and keeps it as a spare
  // (up to kSpareReads), so a point read does not build and free a
  // transaction, a catalog and a collection's trees every time.
  void EndRead(std::unique_ptr<TransactionImpl> t);
  // DB::Get: a point read on its own snapshot. When the catalog cache is
  // current it reads the _id tree directly, without a TransactionImpl
  // (whose catalog and collection objects cost more than the lookup).
  Result<Document> Get(std::string_view coll, const Value& id);
  Result<Document> GetBy(std::string_view coll, std::string_view field, const Value& value);
  // The snapshot a point read (Get, GetBy) reads: the shared one, pinned
  // (shared_read.h), or one of its own when every reader slot is taken; and
  // a read transaction on a snapshot of its own, for the general path.
  Status BeginPointRead(PointRead* r);
  void EndPointRead(size_t slot) { reads_->Unpin(slot); }
  Status OwnPointRead(PointRead* r);
  Result<std::unique_ptr<TransactionImpl>> ReadOn(PointRead* r);

  Status Check(CheckReport* report);
  // Every buffered change merged into the pages, for a reader of the pages
  // alone (DB::Salvage). OK at once without a buffer.
  Status MergeBuffered(const char* what);
  Result<DBStats> Stats(const StatsOptions& options);

  // --- The write buffer (Options::write_buffer_size > 0; merger.cc) ---
  //
  // A buffered write transaction reads a snapshot of the pages and of the
  // buffer, writes into its trees' overlays, and commits by appending its
  // log record (Pager::AppendUnsynced) and publishing its changes into the
  // buffer: it writes no page. The merger thread writes each full
  // generation into the pages in key order, in one write txn committed
  // with Pager::CommitMerge, then checkpoints. A transaction that must
  // change pages itself (a definition, a new collection, an index turning
  // multikey, deleting everything) first has every generation merged, then
  // redoes its own operations in a page-writing txn (TransactionImpl::
  // ToPages).
  //
  // Lock order: the writer token (buffered writers, one at a time, from
  // Begin to Commit/Abort) -> merge_mu_ (merges, and checkpoints that may
  // restart the log) -> the pager's writer gate -> cache_mu_ (a snapshot
  // of the pages and the buffer is taken, and a merge published with its
  // generation dropped, under it, so the two always match).
  bool buffered() const { return buffer_budget_ > 0; }
  // The merger merges runs in slices, each a txn and a checkpoint of its
  // own, of about as many bytes of pages as the buffer's budget: a frozen
  // generation waits for one slice at most, and the next slices reuse the
  // pages a slice freed, so the file does not grow by a whole tree.
  uint64_t run_slice_bytes() const { return buffer_budget_; }
  // After a commit: retires the shared point-read snapshot if it is stale,
  // so that its read txn keeps no pages from reuse, and frees retired ones
  // no reader holds. Cheap when no point read ran since the last call.
  void DropStaleRead() MMDOC_EXCLUDES(cache_mu_);
  // A read snapshot: the pager, its read txn, the buffer's view and the
  // catalog cache, taken together.
  // `internal`: the library's own reader (Pager::BeginInternalRead).
  // `wb`, when given: the buffer the view is of.
  Status Snapshot(std::shared_ptr<storage::Pager>* p, std::unique_ptr<storage::Txn>* txn,
                  index::BufferView* view, std::shared_ptr<const CatalogCache>* cache,
                  bool internal = false, std::shared_ptr<index::WriteBuffer>* wb = nullptr)
      MMDOC_EXCLUDES(cache_mu_);
  // Publishes buffered commit `txid` into `wb`, the buffer its txn began on
  // (REQUIRES: the writer token, so no compaction has replaced it since).
  // `record_payload`: the size of the commit's log record's payload.
  void PublishBuffered(index::WriteBuffer* wb, uint64_t txid,
                       const std::vector<index::BufferChange>& changes, uint64_t record_payload)
      MMDOC_EXCLUDES(cache_mu_, merge_mu_);
  // Publishes a commit replayed from the log at open, before the merger
  // runs: the active generation takes every one (DBImpl::OpenPager).
  void PublishReplayed(uint64_t txid, const std::vector<index::BufferChange>& changes)
      MMDOC_EXCLUDES(cache_mu_) {
    buffer()->Publish(txid, changes);
  }
  // Merges every change in the buffer into the pages; with `checkpoint`,
  // then checkpoints (which may start the log over). The runs of
  // collection `keep_runs_of` (if named) are written but left unmerged, for
  // a DeleteAll that frees them with its trees. REQUIRES: the writer token,
  // so that nothing is published meanwhile.
  Status MergeAll(bool checkpoint, std::string_view keep_runs_of = {}) MMDOC_EXCLUDES(merge_mu_);
  // A commit found the log full and merged everything (DBStats).
  void NoteLogFullMerge() { log_full_merges_.fetch_add(1, std::memory_order_relaxed); }
  // Commits merge txn `txn` of generation `gen`, whose next record starts
  // at `next_record`, drops the generation and publishes `next`, the
  // catalog cache the merge leaves: at once for every new snapshot.
  Status PublishMerge(storage::Txn* txn, const index::BufferGeneration* gen,
                      storage::Pager::LogPosition next_record,
                      std::shared_ptr<const CatalogCache> next) MMDOC_EXCLUDES(cache_mu_);
  // Takes the writer token of a buffered DB, for a write transaction.
  void AcquireWriterToken() MMDOC_EXCLUDES(token_mu_);
  // Ends a write transaction's hold: the writer token of a buffered DB.
  void ReleaseWriterToken() MMDOC_EXCLUDES(token_mu_);
  // Holds the writer token for a scope; released on every way out of it,
  // an exception's (std::bad_alloc) too, so that Close cannot wait forever.
  class WriterTokenHold {
   public:
    explicit WriterTokenHold(DBImpl* db) : db_(db) { db_->AcquireWriterToken(); }
    ~WriterTokenHold() { db_->ReleaseWriterToken(); }
    WriterTokenHold(const WriterTokenHold&) = delete;
    WriterTokenHold& operator=(const WriterTokenHold&) = delete;

   private:
    DBImpl* const db_;
  };
  // After a merge failed (a full disk), merges everything now: OK when it
  // succeeds (the merger goes on), else its error, which fails the commit
  // that asked. REQUIRES: the writer token.
  Status RetryFailedMerge() MMDOC_EXCLUDES(gen_mu_, merge_mu_);
  // Runs (engine/runs.cc). The key filter of run `name`, built when the
  // merger wrote it; nullptr when there is none (after a reopen).
  std::shared_ptr<const index::KeyFilter> RunFilter(std::string_view name) MMDOC_EXCLUDES(run_mu_);
  void AddRunFilter(std::string name, std::shared_ptr<const index::KeyFilter> f)
      MMDOC_EXCLUDES(run_mu_);
  void DropRunFilters(const std::vector<std::string>& names) MMDOC_EXCLUDES(run_mu_);
  // Commits a MergeRuns txn and publishes `next` with it.
  Status PublishRewrite(storage::Txn* txn, std::shared_ptr<const CatalogCache> next)
      MMDOC_EXCLUDES(cache_mu_);
  // Tree `name`'s key filters (index/key_filter.h), as DB::Check sees them.
  index::TreeFilters KeyFilters(std::string_view name) MMDOC_EXCLUDES(cache_mu_) {
    return buffer()->Filters(name);
  }
  // Tree `name`'s key filters for a buffered write transaction, starting
  // one (for about `keys` keys) that the merger thread then builds
  // (BuildKeyFilters) when the tree has none. REQUIRES: the writer token.
  index::TreeFilters KeyFiltersForWrite(std::string_view name, uint64_t keys)
      MMDOC_EXCLUDES(cache_mu_, gen_mu_);
  // Forgets the key filters before a transaction writes pages itself (its
  // keys bypass them). REQUIRES: the writer token.
  void DropKeyFilters() MMDOC_EXCLUDES(cache_mu_) { buffer()->DropFilters(); }
  // Marks the database in use before its first buffered commit on `p`.
  Status PrepareCommits(storage::Pager* p);
  // Waits for the writer and keeps writers out while it copies; readers go
  // on, and a reader that began before the swap keeps reading the old file
  // until it ends. Busy when this thread has a write transaction open.
  Status Compact();
  Status Flush() { return read_only() ? ReadOnlyError() : pager()->Flush(); }
  // With a write buffer, merges it first.
  Status Checkpoint();
  const std::string& path() const { return path_; }
  const Options& options() const { return options_; }
  // The pager of the file open now. Compact replaces it; a transaction keeps
  // the one it began on alive until it ends.
  std::shared_ptr<storage::Pager> pager() MMDOC_EXCLUDES(cache_mu_) {
    storage::MutexLock l(&cache_mu_);
    return pager_;
  }
  bool paranoid() const { return paranoid_; }

  std::shared_ptr<const CatalogCache> cache() MMDOC_EXCLUDES(cache_mu_) {
    storage::MutexLock l(&cache_mu_);
    return cache_;
  }
  // The pager and the cache that describes it, read together.
  void PagerAndCache(std::shared_ptr<storage::Pager>* p, std::shared_ptr<const CatalogCache>* c)
      MMDOC_EXCLUDES(cache_mu_) {
    storage::MutexLock l(&cache_mu_);
    *p = pager_;
    *c = cache_;
  }
  // Publishes what a transaction on pager `from` learned, unless Compact
  // has replaced that pager since.
  void PublishCache(std::shared_ptr<const CatalogCache> c, const storage::Pager* from)
      MMDOC_EXCLUDES(cache_mu_) {
    storage::MutexLock l(&cache_mu_);
    if (from != pager_.get()) return;
    cache_ = std::move(c);
    SnapshotChanged();
  }
  // A write transaction of this thread began / finished (Begin refuses a
  // second one in the same thread instead of waiting for itself forever).
  void WriterDone() { writer_thread_.store(std::thread::id()); }
  // What a committed write transaction leaves for the next one (replacing
  // what an earlier one left), and taking it (nullptr when there is none).
  void KeepWriteState(std::unique_ptr<WriteState> s) MMDOC_EXCLUDES(cache_mu_);
  std::unique_ptr<WriteState> TakeWriteState() MMDOC_EXCLUDES(cache_mu_);

 private:
  DBImpl(std::string path, const Options& options);
  Status OpenPager();
  bool TryAcquireWriterToken() MMDOC_EXCLUDES(token_mu_);
  // Merges the oldest frozen generation, if any.
  Status MergeOldest() MMDOC_REQUIRES(merge_mu_) MMDOC_EXCLUDES(gen_mu_, cache_mu_);
  // Freezes the active generation for a merge. REQUIRES: the writer token.
  void FreezeActive() MMDOC_REQUIRES(gen_mu_) MMDOC_EXCLUDES(cache_mu_);
  std::shared_ptr<index::WriteBuffer> buffer() MMDOC_EXCLUDES(cache_mu_) {
    storage::MutexLock l(&cache_mu_);
    return wbuf_;
  }
  // Adds each tree's keys to its building key filter and makes it ready.
  // A generation frozen meanwhile pauses it (*paused): the merge a writer
  // may wait for comes first, and the next call resumes the scan where it
  // stopped, at a newer snapshot. REQUIRES: the merger thread.
  Status BuildKeyFilters(bool* paused) MMDOC_EXCLUDES(merge_mu_, gen_mu_, cache_mu_);
  // Merges runs into their trees in a write txn of its own
  // (TransactionImpl::MergeRuns): with `budget` 0 every run of each tree
  // that has `min_runs` or more; else a slice of about `budget` bytes, and
  // *more when runs are left to merge; the runs of collection `skip` stay
  // as they are. REQUIRES: merge_mu_, or Open before the merger.
  Status MergeRunsNow(size_t min_runs, uint64_t budget = 0, bool* more = nullptr,
                      std::string_view skip = {}) MMDOC_EXCLUDES(gen_mu_, cache_mu_);
  // Whether the file holds any run.
  Status HasRuns(bool* any);
  // The merger thread's loop.
  void MergerLoop() MMDOC_EXCLUDES(merge_mu_, gen_mu_);
  void StopMerger() MMDOC_EXCLUDES(gen_mu_);
  // Checkpoints after a merge when that cannot race a commit's append
  // (the log starts over only when every record is merged).
  Status CheckpointAfterMerge() MMDOC_REQUIRES(merge_mu_);
  // Recovery (rule 4 of storage/pager.h): Replay redoes a record in
  // pages. With a write buffer, ReplayIntoBuffer puts its changes in the
  // buffer instead and the record stays in the log until merged: reopening
  // writes no page. A record that must change pages (a definition, an
  // index turning multikey) makes it fail with NotSupported, and the whole
  // log is then replayed into pages.
  Status Replay(uint64_t txid, std::string_view payload);
  Status ReplayIntoBuffer(uint64_t txid, std::string_view payload);

  // OK unless this thread holds the write transaction (Busy naming `what`).
  Status NotWriting(const char* what);
  // Builds the compacted copy of the snapshot `src` at `tmp`.
  Status CopyInto(TransactionImpl* src, const std::string& tmp,
                  std::shared_ptr<storage::Pager>* copy);
  // Check and Compact of the pages alone (the buffer merged first).
  Status CheckPages(CheckReport* report);
  Status CompactPages();
  // Removes the copy (path + ".compact" and its log) a compaction left when
  // it was killed or failed: files that carry this database's copy id
  // (CopyId), or a data file with nothing written yet. A database of its
  // own that happens to have that name is left alone. REQUIRES: the
  // database open (its lock held).
  void RemoveCompactionCopy();
  // Options::file_system, or the default.
  static storage::FileSystem* FileSystemOf(const Options& o) {
    return o.file_system ? o.file_system : storage::FileSystem::Default();
  }
  storage::FileSystem* FileSystem() const { return FileSystemOf(options_); }
  // The id a compaction's copy of the file of `p` gets.
  static void CopyId(storage::Pager* p, uint64_t id[2]);

  // Set by Open, read-only afterwards.
  std::string path_;
  Options options_;
  uint64_t new_db_id_[2] = {0, 0};
  uint64_t forks_at_open_ = 0;  // Forked() compares it with the process's count
  bool paranoid_ = false;
  storage::Mutex cache_mu_;
  std::shared_ptr<storage::Pager> pager_ MMDOC_GUARDED_BY(cache_mu_);
  std::shared_ptr<const CatalogCache> cache_ MMDOC_GUARDED_BY(cache_mu_);
  // Bumped under cache_mu_ whenever pager_, cache_ or wbuf_ changes: a
  // shared point-read snapshot taken at another count is stale.
  std::atomic<uint64_t> read_version_{0};
  void SnapshotChanged() MMDOC_REQUIRES(cache_mu_) {
    read_version_.fetch_add(1, std::memory_order_release);
  }
  // The point reads' shared snapshot and reader slots (shared_read.h), on
  // a block of their own: the slots' 4 KiB of cache lines stay out of the
  // way of the fields the writer and the merger use.
  const std::unique_ptr<SharedReads> reads_ = std::make_unique<SharedReads>();
  // Whether `s` is still what a new snapshot would read.
  bool Current(const SharedRead& s) const;
  // A shared snapshot of the state now. Lock order: reads_->mu() ->
  // cache_mu_ -> the pager's.
  Result<std::unique_ptr<SharedRead>> BuildSharedRead() MMDOC_EXCLUDES(cache_mu_);
  // Installs `next` (nullptr: none) and frees what it replaced, unless a
  // reader holds it.
  void InstallSharedRead(std::unique_ptr<SharedRead> next) MMDOC_EXCLUDES(cache_mu_);
  // The thread holding the write transaction, if any.
  std::atomic<std::thread::id> writer_thread_{};
  std::atomic<int> open_txns_{0};  // OpenTransactions
  // Writers that asked for the write transaction and writers whose turn
  // came (they got it, or an error): Compact lets the writers already
  // waiting go first, so that back-to-back compactions cannot starve them
  // (each swap would otherwise hand the new file to the next Compact).
  // Atomics, so that a writer's Begin takes no lock: a writer signals
  // turn_cv_ only while a Compact waits on it (compact_waiting_), and the
  // sequentially consistent store-then-load on each side means one of the
  // two sees the other.
  storage::Mutex turn_mu_;
  storage::CondVar turn_cv_{&turn_mu_};
  std::atomic<uint64_t> writers_asked_{0};
  std::atomic<uint64_t> writers_served_{0};
  std::atomic<int> compact_waiting_{0};
  // Finished read transactions (EndRead); declared after pager_, so they
  // go first. Each holds no snapshot.
  static constexpr size_t kSpareReads = 8;
  std::vector<std::unique_ptr<TransactionImpl>> spare_reads_ MMDOC_GUARDED_BY(cache_mu_);
  std::unique_ptr<WriteState> kept_write_ MMDOC_GUARDED_BY(cache_mu_);

  // The write buffer, when on; replaced (empty) by Compact, whose copy
  // counts txids afresh.
  std::shared_ptr<index::WriteBuffer> wbuf_ MMDOC_GUARDED_BY(cache_mu_);
  uint64_t buffer_budget_ = 0;  // Options::write_buffer_size; set by Open
  // The log's bytes of the active generation's records (the writer's, or
  // Open's before the merger starts). Past half the log's budget the
  // generation is frozen as if full: the log then holds it and the next,
  // and a commit does not find it full of unmerged records, which would
  // merge everything on the writer's thread (CommitBuffered).
  uint64_t active_log_bytes_ = 0;
  std::atomic<uint64_t> log_full_merges_{0};  // DBStats::log_full_merges
  // DBStats::merge_waits, merge_wait_seconds (in ns), writer_checkpoints:
  // counted by PublishBuffered.
  std::atomic<uint64_t> merge_waits_{0};
  std::atomic<uint64_t> merge_wait_ns_{0};
  std::atomic<uint64_t> writer_checkpoints_{0};
  storage::Mutex token_mu_;
  storage::CondVar token_cv_{&token_mu_};
  bool token_held_ MMDOC_GUARDED_BY(token_mu_) = false;
  uint64_t token_next_ MMDOC_GUARDED_BY(token_mu_) = 0;     // the next ticket
  uint64_t token_serving_ MMDOC_GUARDED_BY(token_mu_) = 0;  // whose turn it is
  // Merges and the checkpoints after them, one at a time.
  storage::Mutex merge_mu_;
  // The frozen generations' bookkeeping, and the merger's wake-ups.
  storage::Mutex gen_mu_;
  storage::CondVar merge_cv_{&gen_mu_};   // a generation froze, filters are due, or stop
  storage::CondVar merged_cv_{&gen_mu_};  // a generation merged, or failed to
  // Where the records after each frozen generation start (the log's head
  // when it froze, with the writer token held), for CommitMerge.
  std::map<const index::BufferGeneration*, storage::Pager::LogPosition> next_record_
      MMDOC_GUARDED_BY(gen_mu_);
  bool stop_merger_ MMDOC_GUARDED_BY(gen_mu_) = false;
  // The merger has taken a frozen generation and not yet checkpointed after
  // merging it: the log still holds its records (PublishBuffered).
  bool merge_checkpoint_pending_ MMDOC_GUARDED_BY(gen_mu_) = false;
  // The merger's last checkpoint was skipped: the writer held the token
  // (CheckpointAfterMerge), so the log may still hold merged records.
  bool merge_checkpoint_skipped_ MMDOC_GUARDED_BY(gen_mu_) = false;
  bool filters_due_ MMDOC_GUARDED_BY(gen_mu_) = false;  // a key filter was started
  // Runs to merge: a tree has kRunsBeforeMerge (runs_min_ then says so), or
  // the file was reopened with runs, whose filters are gone (runs_min_ 1).
  bool runs_due_ MMDOC_GUARDED_BY(gen_mu_) = false;
  size_t runs_min_ MMDOC_GUARDED_BY(gen_mu_) = kRunsBeforeMerge;
  // Recovery into pages merges the runs before the first record.
  bool runs_merged_for_replay_ = false;
  storage::Mutex run_mu_;
  std::map<std::string, std::shared_ptr<const index::KeyFilter>, std::less<>> run_filters_
      MMDOC_GUARDED_BY(run_mu_);
  // A paused build (merger thread only): the filter, and the key its scan
  // goes on from. Held, so a filter dropped and made anew is not taken
  // for it.
  std::shared_ptr<index::KeyFilter> paused_filter_;
  std::string paused_at_;
  // A merge that failed: the merger stops; writes fail on the pager's
  // sticky error.
  Status merge_error_ MMDOC_GUARDED_BY(gen_mu_);
  std::atomic<bool> merge_failed_{false};  // !merge_error_.ok(), read without the lock
  void MergeFailed(const Status& s) MMDOC_REQUIRES(gen_mu_) {
    merge_error_ = s;
    merge_failed_.store(true, std::memory_order_release);
  }
  const storage::Pager* prepared_ = nullptr;  // PrepareCommits ran on it (writer token)
  std::thread merger_;
};

// The state of one collection inside a transaction.
struct CollState {
  std::string name;
  bool exists = false;  // false: reads see an empty collection
  // Each tree is read and written through a BufferedTree over its BTree
  // (owned by the catalog or by `owned`): straight through when the
  // transaction writes pages, over the write buffer when it does not.
  std::unique_ptr<index::BufferedTree> primary;
  CollectionMeta meta;
  std::vector<std::unique_ptr<index::BufferedTree>> index_trees;  // parallel to meta.indexes
  bool meta_dirty = false;
  // What the buffer added to meta.count when the state was loaded (its
  // net change at the snapshot): meta.count counts every layer, the
  // catalog only the pages.
  int64_t buffered_count = 0;
  // A read-only transaction's trees from the catalog cache: owned here, as
  // nothing is flushed back to the catalog (cheaper than Catalog::Adopt).
  // The runs' trees too, in every transaction that reads through them.
  std::vector<std::unique_ptr<index::BTree>> owned;
  // Each tree's runs at the snapshot, as CachedColl::runs (empty when there
  // are none); a merge changes them and NextCache publishes them.
  std::vector<std::vector<CachedRun>> runs;
};

// A write transaction's reused buffers, kept whole for their capacity.
struct WriteBuffers {
  std::string log;             // the commit's logical log record
  std::string doc, pk, entry;  // a document, its _id key, an index entry
  std::vector<std::vector<std::string>> old_keys, new_keys;  // per index
  std::vector<index::BufferChange> changes;                  // a buffered commit's
  std::unique_ptr<engine::Update> update;                    // UpdateOne/Many's, parsed
};

// A committed write transaction's catalog (with the trees it opened) and
// collection states, kept so that the next write transaction does not build
// and free them again (a tenth of a single-write commit). They are right for
// the next write txn exactly when it starts from the catalog state `cache`
// names: the trees' roots are the ones that txn committed (a buffered txn:
// began on) and nothing has changed the pages since.
struct WriteState {
  std::shared_ptr<const CatalogCache> cache;  // published (buffered: begun on)
  std::unique_ptr<index::Catalog> catalog;
  std::map<std::string, std::unique_ptr<CollState>, std::less<>> colls;
  std::unique_ptr<WriteBuffers> buffers;  // a pointer, so that keeping it costs no moves
};

class TransactionImpl {
 public:
  // `txn` is a transaction of `pager`, which this keeps alive.
  // `cache`: the catalog cache DBImpl::Snapshot took with `txn`, or
  // nullptr to look the current one up.
  TransactionImpl(DBImpl* db, std::shared_ptr<storage::Pager> pager,
                  std::unique_ptr<storage::Txn> txn, bool read_only, Durability durability,
                  bool replaying, std::shared_ptr<const CatalogCache>* cache = nullptr);
  ~TransactionImpl();

  bool read_only() const { return read_only_; }
  bool finished() const { return finished_; }
  storage::Txn* txn() { return txn_.get(); }
  storage::Pager* pager() const { return pager_.get(); }
  // Drops the reference to the pager. REQUIRES: finished.
  void ReleasePager() { pager_.reset(); }
  // A Transaction the caller holds (DB::Begin, DB::BeginRead) counts in
  // DBImpl::OpenTransactions from CountOpen until it finishes or goes.
  void CountOpen() {
    counted_ = true;
    db_->CountTransactions(1);
  }
  void Uncount() {
    if (!counted_) return;
    counted_ = false;
    db_->CountTransactions(-1);
  }

  Result<Document> Get(std::string_view coll, const Value& id);
  Result<Document> GetBy(std::string_view coll, std::string_view field, const Value& value);
  Result<std::unique_ptr<CursorImpl>> Find(std::string_view coll, const Document& filter,
                                           const FindOptions& options);
  Result<uint64_t> Count(std::string_view coll, const Document& filter);
  Result<std::vector<Value>> Distinct(std::string_view coll, std::string_view field,
                                      const Document& filter);
  Result<std::vector<std::string>> ListCollections();
  Result<std::vector<IndexInfo>> ListIndexes(std::string_view coll);

  Status Insert(std::string_view coll, const Document& doc, Value* id);
  Status Replace(std::string_view coll, const Value& id, const Document& doc);
  Result<UpdateResult> Update(std::string_view coll, const Document& filter, const Document& update,
                              bool many, const UpdateOptions& options);
  Status Update(std::string_view coll, const Value& id, const Document& update);
  Status Delete(std::string_view coll, const Value& id);
  // Transaction::FindOneAndUpdate (update != nullptr) / FindOneAndDelete.
  Result<std::optional<Document>> FindOneAndModify(std::string_view coll, const Document& filter,
                                                   const Document* update,
                                                   const FindAndModifyOptions& options);
  Result<uint64_t> DeleteMany(std::string_view coll, const Document& filter, bool many);
  Status CreateCollection(std::string_view coll);
  Status DropCollection(std::string_view coll);
  Status CreateIndex(std::string_view coll, std::string_view field, const IndexOptions& o);
  Status CreateIndex(std::string_view coll, const std::vector<IndexKey>& keys,
                     const IndexOptions& o);
  Status DropIndex(std::string_view coll, std::string_view field);

  Status Commit();
  void Abort();

  // Redoes one logged transaction (DBImpl::Replay); with `own`, this
  // transaction's own operations (ToPages), whose errors are returned as
  // they are rather than as a damaged log.
  Status ApplyLog(std::string_view payload, bool own = false);
  // Commits a replayed record's changes into the write buffer as commit
  // `txid` (DBImpl::ReplayIntoBuffer); appends nothing to the log.
  // NotSupported when the record must change pages. REQUIRES: a buffered
  // write txn begun replaying.
  Status CommitIntoBuffer(uint64_t txid);

  // Reads (and, for a write txn, writes) through the buffer at `view`:
  // set before the first collection is loaded.
  void SetView(index::BufferView view);
  // A buffered write txn, right after SetView: takes the collection states
  // the writer's last commit kept (KeepBufferedState) when they describe
  // this txn's starting pages, and starts their trees over at this txn's
  // view (a fifth of a one-document commit is building and freeing them).
  // `wb`: the buffer the view is of (DBImpl::Snapshot), kept for the commit.
  void ReuseBufferedState(std::unique_ptr<WriteState> s, std::shared_ptr<index::WriteBuffer> wb);
  bool buffered() const { return has_view_ && !read_only_; }
  // A merge txn: writes every change of `gen` into the pages (each tree's
  // keys in order) and the collections' counts; Commit publishes it with
  // CommitMerge.
  Status MergeGeneration(const index::BufferGeneration* gen,
                         storage::Pager::LogPosition next_record);
  // A buffered DB's write txn holds the writer token until it ends.
  void HoldToken() { holds_token_ = true; }
  // A write txn of the merger's own, not of the thread that runs it
  // (Begin's one writer per thread does not apply).
  void SetBackground() { background_ = true; }
  // After MergeGeneration: a tree now holds kRunsBeforeMerge runs or more.
  bool runs_due() const { return runs_due_; }

  // Runs (engine/runs.cc). A page-writing txn: merges runs into their
  // trees, adjusts the counts and drops the merged runs, appending their
  // names to *dropped. With `budget` 0: every run of each tree that has at
  // least `min_runs` (1: all). Else about `budget` bytes of pages: first
  // the merge under way, else a new one of all the runs of a tree that has
  // `min_runs`; the runs of a merge that stops there record where it
  // stopped, and *more says so. The runs of collection `skip` are left.
  Status MergeRuns(size_t min_runs, uint64_t budget, std::vector<std::string>* dropped, bool* more,
                   std::string_view skip = {});
  // Commits a MergeRuns txn with Pager::CommitRewrite and publishes its
  // catalog cache.
  Status CommitRewrite();

  // Loads (and caches) the collection's state; with create, creates it when
  // missing (write transactions only).
  Status Collection(std::string_view coll, bool create, CollState** out);
  // Collection() for a name ListCollections() returned: the catalog listed
  // it, so not finding it means the catalog tree is damaged (Corruption),
  // never a missing collection with no trees.
  Status ListedCollection(std::string_view coll, CollState** out);
  index::Catalog* catalog() { return Cat(); }
  DBImpl* db() const { return db_; }

  // What an open cursor of this transaction checks before each step
  // (CursorImpl::Revalidate). writes(): the writes begun so far; a write
  // invalidates the tree cursors, which seek again. states(): bumped when
  // the CollStates or trees cursors point at may have gone (ToPages, a
  // drop); a cursor then looks its collection and index up again by name,
  // unless DroppedSince says that one was dropped after it looked.
  uint64_t writes() const { return writes_; }
  uint64_t states() const { return states_; }
  // Whether tree `name` (CollectionTreeName, IndexTreeName) was dropped in
  // this txn after states() was `states`.
  bool DroppedSince(std::string_view name, uint64_t states) const {
    auto it = dropped_.find(name);
    return it != dropped_.end() && it->second > states;
  }

  // Starts a finished read transaction again on snapshot `txn` of its own
  // pager, keeping the collections it loaded when `cache` is the cache they
  // came from and describes txn's catalog, and dropping them otherwise.
  // REQUIRES: read_only() and finished.
  void Renew(std::unique_ptr<storage::Txn> txn, std::shared_ptr<const CatalogCache> cache);

 private:
  // The write buffers, made on first use (a kept state brings its own).
  WriteBuffers& Buf() {
    if (__builtin_expect(bufs_ == nullptr, 0)) NewBuffers();
    return *bufs_;
  }
  void NewBuffers();
  Status Writable();
  // A buffered write txn that must change pages: merges the buffer, begins
  // a page-writing txn and redoes its own operations so far in it (from
  // its log record). The CollState pointers it held are gone. The runs of
  // collection `keep_runs_of` stay unmerged (DeleteAll frees them).
  Status ToPages(std::string_view keep_runs_of = {});
  Status CommitBuffered();
  // Every change of this buffered txn, for the buffer.
  void AppendChanges(std::vector<index::BufferChange>* changes);
  // Publishes logged commit `txid` into the buffer; out of memory midway,
  // fails the pager (the log has the commit whole) and says so.
  Status PublishLogged(uint64_t txid, const std::vector<index::BufferChange>& changes);
  // Adds the buffer's and the runs' net change at the snapshot to a loaded
  // collection's count (CollState::buffered_count).
  void CountBuffered(CollState* c);
  // Loads c's runs (CollState::runs) from `cached`, or from the catalog when
  // null, and has c's trees read through them unless this txn writes pages.
  Status LoadRuns(CollState* c, const CachedColl* cached);
  // 0 for c's _id tree, 1 + i for index i, -1 for another name.
  int TreeSlot(const CollState* c, std::string_view tree) const;
  Status CommitPages();
  // Writes the changed collections' metadata into the catalog and flushes
  // it (every tree's root), before a commit.
  Status FlushCatalog();
  // Ends a merge txn (MergeGeneration, CommitRewrite) whose publication
  // returned `s`, aborting it on failure; returns s.
  Status FinishMerge(Status s);
  void ReleaseToken();
  // Whether Abort may keep the collection state for a later Renew:
  // everything it loaded came from the catalog cache, so it owns its trees
  // and names the cache's state.
  bool Reusable() const;
  // Takes `c` as cache_ when it describes this txn's catalog state.
  void AdoptCache(std::shared_ptr<const CatalogCache> c);
  // A write txn: takes the catalog and collection states of the last
  // commit when they describe this txn's starting state (see WriteState).
  void ReuseWriteState(std::unique_ptr<WriteState> s);
  // After a buffered commit: keeps the collection states (their trees,
  // runs and overlays' memory) for the writer's next transaction.
  void KeepBufferedState();
  // The catalog, made on first use (a read served from the cache never
  // needs one).
  index::Catalog* Cat();
  // The catalog cache describing the state this txn is about to commit.
  std::shared_ptr<CatalogCache> NextCache();
  // Marks the transaction unusable after a failure that may have left its
  // trees half-changed (an I/O error mid-operation).
  Status Poison(Status s);
  void Log(LogOp op, std::string_view coll, std::string_view arg);
  // The tree `t` (catalog name `name`) as this transaction reads and
  // writes it (CollState).
  // `keys`: about how many keys the tree holds (a key filter's size).
  std::unique_ptr<index::BufferedTree> Layer(index::BTree* t, std::string_view name, uint64_t keys);

  // Internal writes shared by the public calls and by replay. Each checks
  // every constraint before it changes anything, so a failed call leaves
  // the transaction as it was.
  Status InsertPrepared(CollState* c, std::string_view bson, std::string_view pk);
  // With `update`, indexes on fields it cannot change are left alone (their
  // keys are neither computed nor checked); without, every index is.
  // ReplaceAt and DeleteAt read old_doc only for its keys, before they write
  // anything, so it may point at the stored document in its page.
  // REQUIRES: old_doc is pk's document as this transaction reads it.
  Status ReplaceAt(CollState* c, std::string_view pk, std::string_view old_doc,
                   std::string_view new_doc, const engine::Update* update = nullptr);
  Status DeleteAt(CollState* c, std::string_view pk, std::string_view old_doc);
  // Parses `update` into the writer's kept Update (*own for a large one);
  // *u is the one parsed.
  Status ParseUpdate(const Document& update, std::unique_ptr<engine::Update>* own,
                     engine::Update** u);
  // Applies u to pk's document `doc` (REQUIRES as ReplaceAt's old_doc) and
  // logs the result when it changed; counts it in *r.
  Status UpdateAt(CollState* c, std::string_view coll, std::string_view pk, std::string_view doc,
                  const engine::Update& u, UpdateResult* r);
  // DeleteMany with a filter that matches everything: empties the trees.
  Result<uint64_t> DeleteAll(std::string_view coll);
  // Notes that index i saw a document with `nkeys` keys.
  void NoteKeyCount(CollState* c, size_t i, size_t nkeys);
  // The index keys of `doc` (none for an empty doc), per index of c.
  using KeySets = std::vector<std::vector<std::string>>;
  // Indexes i with (*skip)[i] set get no keys.
  // InvalidArgument for a document an index cannot take (parallel arrays).
  Status ComputeKeys(CollState* c, std::string_view doc, KeySets* out,
                     const std::vector<char>* skip = nullptr);
  // InvalidArgument when a key of new_keys is over index::kMaxKeySize.
  Status CheckKeySizes(CollState* c, std::string_view pk, const KeySets& new_keys);
  // Takes back what InsertPrepared wrote before it found a duplicate in
  // index `index`: the primary entry, the entries of the indexes before it
  // and the first `keys` keys of its own (Buf().new_keys).
  Status UndoInsert(CollState* c, std::string_view pk, size_t index, size_t keys);
  // Key sizes, and unique indexes against entries of other documents
  // (keys in *old_keys, the document's own, are not conflicts).
  Status CheckKeys(CollState* c, std::string_view pk, std::string_view new_doc,
                   const KeySets& new_keys, const KeySets* old_keys);
  Status DropCollectionState(CollState* c);
  // Calls fn(pk, document) -> Status for what `filter` matches (the first
  // only unless many), stopping at the first error; fn may change the
  // collection's trees. A filter {_id: v} names at most one document, which
  // fn gets as its bytes in the page (pk in Buf().pk); other matches are
  // copied first, since changing trees under a cursor would invalidate it.
  // *c is the collection (it may not exist). Defined in transaction.cc.
  template <typename Fn>
  Status ForEachMatch(std::string_view coll, const Document& filter, bool many, CollState** c,
                      Fn fn);
  // The collection, pk and stored bytes of the document with this _id;
  // NotFound (naming the _id) when there is none.
  Status FindById(std::string_view coll, const Value& id, CollState** c, std::string* pk,
                  std::string_view* doc);

  // Finishes a write transaction's hold on the writer (DBImpl::WriterDone)
  // before the pager lets the next writer in.
  void EndWrite();

  DBImpl* db_;
  std::shared_ptr<storage::Pager> pager_;  // outlives txn_
  std::unique_ptr<storage::Txn> txn_;
  std::unique_ptr<index::Catalog> catalog_;  // see Cat()
  // The catalog cache, when it describes this txn's starting state.
  std::shared_ptr<const CatalogCache> cache_;
  bool ddl_ = false;                     // created or dropped a collection or index
  std::vector<std::string> freed_runs_;  // DeleteAll's: their filters go at commit
  bool cache_miss_ = false;              // looked an existing collection up in the catalog
  bool read_only_;
  Durability durability_;
  bool replaying_;
  bool finished_ = false;
  bool counted_ = false;  // see CountOpen
  Status poisoned_;
  std::map<std::string, std::unique_ptr<CollState>, std::less<>> colls_;
  std::unique_ptr<WriteBuffers> bufs_;        // log record, scratch strings, index keys (Buf)
  std::shared_ptr<index::WriteBuffer> wbuf_;  // a buffered write txn's buffer
  std::unique_ptr<WriteState> state_shell_;   // the kept state taken, emptied: KeepBufferedState's
  std::vector<char> skip_index_;              // ReplaceAt: indexes the update cannot change
  // The buffer at this txn's snapshot (SetView); BufferedTrees point at it.
  index::BufferView view_;
  bool has_view_ = false;
  bool holds_token_ = false;                          // a buffered DB's write txn: the writer token
  bool shape_changed_ = false;                        // an index turned multikey (needs pages)
  const index::BufferGeneration* merging_ = nullptr;  // a merge txn's generation
  bool background_ = false;                           // SetBackground
  bool runs_due_ = false;                             // runs_due()
  uint64_t writes_ = 0;                               // writes()
  uint64_t states_ = 0;                               // states()
  // Each tree dropped in this txn: states() right after its last drop.
  std::map<std::string, uint64_t, std::less<>> dropped_;
};

// Executes one query over a transaction's trees.
class CursorImpl {
 public:
  // Plans the query (IDHACK / IXSCAN / COLLSCAN).
  static Result<std::unique_ptr<CursorImpl>> Create(TransactionImpl* t, CollState* c,
                                                    engine::Filter filter,
                                                    const FindOptions& options);
  // The point plan of a filter {field: "string"} on a plain field name
  // (no dots), without sort or projection: no filter tree, no index bounds,
  // one key looked up in the _id tree (IDHACK) or the field's index
  // (IXSCAN), each fetched document checked by PointMatches. Returns null
  // when no such plan exists (no index on the field), for Create to plan.
  static std::unique_ptr<CursorImpl> CreatePoint(TransactionImpl* t, CollState* c,
                                                 std::string_view field, std::string_view value,
                                                 const FindOptions& options);
  bool Next();
  std::string_view raw() const { return current_; }
  Status status() const { return status_; }
  // Describes the bounds (ExplainInfo::bounds) on first use: planning
  // does not pay for it.
  const ExplainInfo& explain() const;

 private:
  CursorImpl() = default;
  // Produces the next matching document before skip/limit/projection.
  bool NextMatch(std::string_view* doc);
  bool NextFromScan(std::string_view* doc);
  bool NextFromIndex(std::string_view* doc);
  bool NextFromPoint(std::string_view* doc);
  // The document an index entry's pk names; false (status_ set, Corruption
  // when it is missing) on failure.
  bool FetchByPk(std::string_view pk, std::string_view* doc);
  Status StartInterval();
  Status Materialize();
  // The tree cursor over index_tree_ (an index walk) or c_'s _id tree (a
  // scan).
  void OpenTreeCursor();
  // Sets up Revalidate for a cursor of a write transaction.
  void Track();
  // Before a step of a write transaction's cursor: InvalidArgument when
  // the transaction dropped the collection or the index it reads; after
  // other changes of its state, looks c_ and index_tree_ up again; after a
  // write, seeks the tree cursor again (Reposition).
  Status Revalidate();
  // Puts the tree cursor back where it stood, on last_key_, or when that
  // key is gone, on the next entry in the walk's direction (stay_).
  Status Reposition();
  // Whether the plan can give the sort's order by walking an index (the
  // plan's own, or, for a COLLSCAN, the sort field's); if so, sets the walk
  // up (direction, the null key split) and returns true.
  bool PlanIndexSort();
  // PlanIndexSort for an index that is not simple (index_plan.h): the
  // plan's own, or for a COLLSCAN one whose key pattern gives the sort.
  bool PlanSpecSort();

  TransactionImpl* t_ = nullptr;
  CollState* c_ = nullptr;
  engine::Filter filter_;
  FindOptions options_;
  // The sort: options_.sort, or options_.sort_field as its one key.
  std::vector<SortSpec> sort_;
  engine::Projection projection_;
  mutable ExplainInfo explain_;
  // The plan's index fields and value intervals, for explain().
  std::vector<IndexKey> explain_keys_;
  std::vector<std::optional<std::vector<engine::KeyInterval>>> explain_bounds_;
  Status status_;

  // kPoint: CreatePoint on _id or a unique index, one key (point_key_).
  enum class Mode { kEmpty, kScan, kIndex, kPoint, kMaterialized } mode_ = Mode::kEmpty;
  std::optional<index::BufferedTree::Cursor> cursor_;  // scan or index
  // A scan: the leaf whose bytes hold the filter's needle (or that has
  // values elsewhere), so its documents are read one by one.
  const char* checked_leaf_ = nullptr;
  index::BufferedTree* index_tree_ = nullptr;
  // The plan's index in c_->meta.indexes when it is not simple, else -1;
  // and how many of its leading fields the bounds pin to one value.
  int spec_index_ = -1;
  size_t spec_pinned_ = 0;
  bool index_unique_ = false;
  bool index_is_primary_ = false;
  std::vector<engine::KeyInterval> intervals_;
  // An index walk for a sort: -1 walks the intervals (last first) and each
  // interval backward. 1 otherwise.
  int walk_dir_ = 1;
  // Parallel to intervals_ when a secondary index gives a sort's order:
  // the index keys [] as null while a sort puts [] below null, so the
  // null key is walked twice, a pass per kind (kNullPassEmptyArrays: only
  // documents whose sort value is [], kNullPassOthers: the rest).
  enum NullPass : char { kNullPassAll, kNullPassEmptyArrays, kNullPassOthers };
  std::vector<NullPass> null_pass_;
  std::string sort_path_;  // the index-backed sort's field
  size_t interval_ = 0;
  bool interval_started_ = false;
  // CreatePoint with a secondary index: documents are checked against
  // {point_field_: point_value_} instead of filter_.
  bool point_check_ = false;
  std::string point_field_;
  std::string point_value_;
  std::string point_key_;  // kPoint: the key looked up
  bool point_done_ = false;
  std::unordered_set<std::string> seen_;
  bool dedup_ = false;
  // kIndex on a secondary index whose bounds match exactly the filter's
  // documents (ExactBounds in cursor.cc): no re-check per document.
  bool exact_ = false;

  std::vector<std::string> materialized_;
  size_t mat_pos_ = 0;
  uint64_t skipped_ = 0;
  uint64_t returned_ = 0;
  std::string current_storage_;
  std::string_view current_;
  bool started_ = false;

  // A write transaction's cursor (Revalidate): the collection and the
  // secondary index it reads, by name; t_'s writes() and states() it has
  // seen; the tree cursor's key after the last step (positioned_: it
  // stands on an entry), and whether the next step stays where Reposition
  // put it.
  bool tracked_ = false;
  std::string coll_name_;
  std::string index_name_;
  uint64_t writes_seen_ = 0;
  uint64_t states_seen_ = 0;
  std::string last_key_;
  bool positioned_ = false;
  bool stay_ = false;
  bool exhausted_ = false;
};

}  // namespace mmdoc

#endif  // MMDOC_ENGINE_DB_IMPL_H_
