// storage::Pager: pages of one database file, shadow paging, the write-ahead
// log, checkpoints, the free list, snapshots. Knows nothing of keys or
// documents; the B+tree (index/) and the engine build on it.
//
// ---------------------------------------------------------------------------
// THE COMMIT PROTOCOL (tests and asserts cite these rules by number)
// ---------------------------------------------------------------------------
// Two files: the data file <db> (pages; format in storage/format.h) and the
// log <db>-log (records; format in storage/format.h). The data file is
// mapped MAP_SHARED read-write; the writer writes new pages through the map.
//
// Why these choices (the design decisions, for the next engineer):
//  - Shadow paging (LMDB, bbolt) keeps the data file consistent whatever the
//    OS writes back and whenever: no page a durable meta reaches changes.
//  - A *logical* log (the engine's operations, not page images) makes a
//    durable commit one small sequential sync instead of LMDB's two syncs
//    (data pages, then meta), lets many commits share one sync (group
//    commit), and keeps the data file's syncs to checkpoints.
//  - Writing pages through a writable map (LMDB's MDB_WRITEMAP) instead of
//    a read-only map + pwrite (LMDB's default, immune to stray writes): it saves a copy per
//    page on the write path. The risks are handled, not ignored: a stray
//    write into the map is caught by page checksums (rule 7), and the file
//    is grown (and a sparse copy's holes filled) with posix_fallocate, so a
//    full disk is Status::Full, never SIGBUS.
//  - Log records are written with pwrite for kFsync/kGroup (an fdatasync
//    after stores through a map costs several times more on ext4), through
//    the log's map for kMsync, whose contract is msync, and for kNone and
//    kPeriodic with pwrite when they span two pages or more (each page
//    stored through a shared map costs a TLB-shootdown interrupt to every
//    core running the process at the next sync), else through the map (a
//    system call per small commit cost more).
//  (The figures behind these choices are in docs/performance.md.)
//
// (1) A page reachable from the durable meta page (the last checkpoint) is
//     never written. A transaction that changes a page writes a copy to a
//     free page (copy-on-write) and frees the old one.
// (2) A commit appends one log record (txid, payload) to the log, then makes
//     it durable as its Durability says (SyncForCommit). It does not write a
//     meta page: readers in this process see the commit through the
//     in-memory meta, and after a crash the log is replayed on top of the
//     last checkpoint. A durable commit therefore costs one sync, of the
//     log only, into space that was allocated and zero-filled when the log
//     was created or grown (no file-size change, so fdatasync writes no
//     metadata). The log starts small and grows to its budget (log_size).
// (3) A checkpoint makes the current state the durable base: fdatasync the
//     data file (every page written since the last checkpoint), write the
//     free list pages, write the meta page into slot (txid % 2) with a new
//     log epoch, fdatasync again. Only then may the log be reused from
//     offset 0: its old records carry the old epoch and are never replayed.
//     A commit whose record does not fit in the log is committed by a
//     checkpoint instead (no record). Checkpoints also run at Close.
// (4) Open reads both meta pages and uses the valid one (magic, version,
//     checksum) with the larger txid; a torn or corrupt newer meta falls
//     back to the older one. It then replays log records with the meta's
//     epoch and txids meta.txid+1, +2, ... until a record is missing, torn
//     or fails its checksum, then checkpoints when it replayed any.
// (5) A page freed by transaction T is reused only when (a) no read
//     snapshot older than T is open, and (b) if the page was written before
//     the last checkpoint (its header txid <= checkpoint txid), a checkpoint
//     with txid >= T has completed. Pages born after the last checkpoint are
//     not reachable from any durable meta, so (b) does not apply to them.
// (6) Every page >= 2 is, exactly once: reachable from the current roots
//     (walked by the layers above), a free-list page, free, or pending (freed
//     but waiting for rule 5). Pager::AccountedPages reports the last three;
//     DB::Check adds the first and proves the union is [2, page_count).
// (7) Every page carries an XXH3-64 checksum (seeded with its page number,
//     so a page written to the wrong place fails too), computed when the
//     page becomes durable: at the checkpoint after it was written (rule
//     3), at commit with paranoid_checks, or, for a PageWrites::kWriteAt
//     txn, when it writes the page to the file. A page written and freed again
//     between two checkpoints is never summed; the log carries its commit. A page is verified
//     the first time this process reads it from the file (and on every read
//     with paranoid_checks); pages this process wrote are known good.
// (8) An I/O error during commit or checkpoint is sticky: every later write
//     transaction fails with the same status until the database is reopened;
//     read transactions keep working on the last good state. A file that
//     cannot grow (Full) fails the write transaction only: nothing was
//     published, and later writes succeed once the disk has room.
// (10) Log-only commits (a write buffer in front of the pages): a commit may
//     only append its record (AppendCommit); its changes reach pages later,
//     through a write txn committed with CommitMerge, which says up to
//     which record the pages now hold. A checkpoint then keeps the log from
//     the first record the pages lack (meta: log txid and log offset)
//     instead of starting it over, and the log is a ring (storage/log.h) so
//     that commits go on while older records wait for their merge. Replay
//     redoes the records after the meta's log txid; RecoverIntoMemory hands
//     them to the caller and keeps them in the log. A write txn that logs a
//     record (Commit) must not follow log-only commits the pages lack.
// (9) A database knows whether it needs its log. The meta page carries a
//     database id, which the log's header repeats, and a clean flag: the
//     checkpoint at Close writes it clean; before the first commit of a
//     session a checkpoint writes it not clean (StartWriting). After each
//     sync that makes log records durable, the newest meta page's stamp
//     records the last of them. Open refuses, with Corruption naming the
//     log, a database not closed cleanly whose log is missing, damaged,
//     another database's, shorter than its header says, or ends before the
//     stamp (an older copy of itself); PagerOptions::accept_log_loss opens
//     it anyway. A clean database's log holds nothing it needs: it is made
//     anew before the next write. Open of a clean database writes nothing.
//     A new database is created whole (FileSystem::CreateExclusive): after
//     a crash its path either does not exist or holds a valid meta page, and
//     a new one whose log cannot be made is removed again.
//
// Growing: the file grows by posix_fallocate in steps (ENOSPC -> Full, never
// SIGBUS). The map reserves address space beyond the file (at least 1 GiB,
// doubling); when the file outgrows it, a larger map is made and the old one
// is kept until Close, so page pointers a reader holds stay valid for the
// life of its snapshot. The old map's page-table entries are dropped
// (File::DropMappedPages): its pages stay in the page cache and a reader
// still on it faults them back in, but the process does not hold the same
// page twice.
//
// Every data map is advised random access (File::AdviseRandomAccess,
// MADV_RANDOM; LMDB's MDB_NORDAHEAD). The kernel tracks dirtiness per page
// cache folio, and readahead on a fault fills the cache with large folios,
// so one written 4 KiB page would mark its whole folio dirty and be written
// back with it. With the advice a fault reads one page and a copy-on-write
// dirties what it writes. The cost: a cold full scan reads the file a page
// per fault instead of in readahead batches (several times slower; warm
// scans are unaffected).
//
// Implementation notes (added by the storage implementation):
//  - Meta slots never overwrite the newest durable meta: a checkpoint whose
//    txid has the same parity as the previous checkpoint's first advances the
//    txid by one (an empty transaction that changes nothing), so consecutive
//    checkpoints always alternate between pages 0 and 1 and a torn meta write
//    always falls back to the previous checkpoint. Txids are therefore
//    increasing but not necessarily dense across checkpoints (Recover and a
//    log-full commit may each consume one).
//  - Rule 3 ordering: the free-list pages are written BEFORE the first
//    fdatasync (data pages + free-list pages), then the meta page, then the
//    second fdatasync; so a durable meta never points at an unsynced free
//    list page.
//  - The first write of a session checkpoints (with a new epoch) before it
//    appends, so stale records of an old epoch can never follow new ones.
//  - The checkpoint runs on the writer's thread and blocks it while it
//    syncs the data file (docs/performance.md has what that costs).
//  - In kGroup mode the commit is published to readers before its log sync
//    completes (the writer lock is released first, so the next writer can
//    append); the other modes publish after SyncForCommit succeeds.
//  - Write Txns must be finished (committed, aborted or destroyed) and read
//    Txns destroyed before the Pager is destroyed.
//  - AccountedPages, Verify and Stats describe the last committed state when
//    no write Txn is open (pages an open write Txn took are in neither set).
//  - Recover must run before BeginWrite when the log holds records to
//    replay (BeginWrite then returns InvalidArgument).
//  - The data file is locked (flock) through the descriptor it is read
//    from, and Open checks that the path still names that file after
//    locking: a database renamed over the path (a compaction in another
//    process) is opened again rather than written behind the new file.
//
// States: Closed --Open()--> Open --BeginWrite()--> Writing --Commit/Abort-->
// Open; Open --I/O error in Commit/Checkpoint--> Failed (reads only) --Close.
//
// Thread safety: Pager methods are thread-safe. One write Txn at a time
// (BeginWrite blocks until the current writer finishes); any number of read
// Txns in any threads. A Txn object itself is not thread-safe.
#ifndef MMDOC_STORAGE_PAGER_H_
#define MMDOC_STORAGE_PAGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/durability.h"
#include "mmdoc/status.h"
#include "storage/file_system.h"
#include "storage/format.h"

namespace mmdoc::storage {

class PagerImpl;
class Pager;

struct PagerOptions {
  // --- Parameters that affect behavior ---
  // Creates the files when missing. Default: true.
  bool create_if_missing = true;
  // Page size for a new file (power of two, 4096..65536); an existing
  // file's own page size wins. Default: 4096.
  uint32_t page_size = 4096;
  // Verify the checksum of every page on every read, not just the first.
  // Default: false.
  bool paranoid_checks = false;
  // Open even when the log is missing, foreign, damaged, cut short or an
  // older copy of itself although the database was not closed cleanly
  // (rule 9): at the last checkpoint plus what the log still holds. The
  // commits it lost are gone. Default: false (Open fails with Corruption).
  bool accept_log_loss = false;
  // How long Open waits for another process or handle to let go of the
  // data file's lock before it fails with Busy; 0: at once. Default: 0.
  uint32_t lock_timeout_ms = 0;
  // Opens an existing database for reading only, under a shared lock:
  // readers in several processes at once, none while one writes. Nothing
  // is written: not the files, not the log's replay (RecoverIntoMemory
  // only; Recover, BeginWrite, PrepareCommits and Checkpoint fail with
  // NotSupported), not the close. Default: false.
  bool read_only = false;
  // File system seam; nullptr means FileSystem::Default(). Not owned.
  FileSystem* fs = nullptr;
  // A new file's database id (format.h, META PAGE); zero: a random one. A
  // compaction names its copy's after the database it copies, so that an
  // open can tell the copy's leftover from a database of the same name.
  uint64_t new_db_id[2] = {0, 0};

  // --- Parameters that affect performance ---
  // The log's budget. A new log holds a sixteenth of it (4 KiB to 1 MiB of
  // records) and doubles, written with zeros and synced, as commits need
  // until it reaches log_size; a commit whose record does not fit then
  // triggers a checkpoint. Default: 64 MiB.
  uint64_t log_size = 64ull << 20;
  // Interval of the background log flush in kPeriodic mode. Default: 100.
  uint32_t sync_interval_ms = 100;
  // Address space the data file map reserves when the pager opens (rounded
  // up to a power-of-two multiple of the file size when the file is larger).
  // Only address space: a page is resident once touched, and the part of
  // the map past the file's end holds nothing. When the file outgrows the
  // map, a map twice as large is made and the old one stays for readers
  // that still hold it, so a page touched through both counts twice in the
  // process's resident size: a large default keeps that rare. Where the
  // address space cannot hold it (a ulimit -v), the smallest map that
  // covers the file is made instead. Tests use small values to exercise
  // remapping. Default: 64 GiB.
  uint64_t initial_map_size = 64ull << 30;
};

struct PagerStats {
  uint64_t page_count = 0;          // pages in the file (high-water mark)
  uint64_t free_pages = 0;          // reusable now
  uint64_t pending_pages = 0;       // freed, waiting for rule 5
  uint64_t freelist_pages = 0;      // pages holding the persisted free list
  uint64_t txid = 0;                // last committed transaction
  uint64_t checkpoint_txid = 0;     // last checkpoint
  uint64_t log_used = 0;            // bytes of log records since the checkpoint
  uint64_t oldest_reader_txid = 0;  // 0 when no reader is open
  uint64_t readers = 0;             // open read txns but BeginInternalRead's
  uint64_t file_size = 0;
  uint64_t log_file_size = 0;  // the log as it is now (it grows to its budget)
};

// How a write txn's changed pages reach the file.
enum class PageWrites {
  // Stores through the shared writable map: cheapest when pages are
  // changed again and again between checkpoints. The checkpoint's
  // writeback then write-protects each page again, which on x86 is a TLB
  // shootdown interrupt to every core running the process.
  kThroughMap,
  // Private copies, written with File::WriteAt when the txn commits (or at
  // Txn::WriteBack): the map's page-table entries stay clean, so writing
  // the pages back costs other threads nothing. For large background
  // writes that change each page about once: merges (docs/write-path.md).
  kWriteAt,
};

// A transaction: a read snapshot, or the single writer's working state.
// Page pointers it returns stay valid until the Txn ends (in a kWriteAt
// txn, until it ends or calls WriteBack).
class Txn {
 public:
  virtual ~Txn() = default;  // an unfinished write Txn is aborted

  virtual bool writable() const = 0;
  // Read txn: the snapshot's txid. Write txn: the txid it will commit as.
  virtual uint64_t txid() const = 0;
  virtual uint32_t page_size() const = 0;
  virtual uint64_t page_count() const = 0;

  // Root slots (kMetaRoots of them) persisted in the meta page; the layers
  // above give them meaning (index/ uses slot 0 for its catalog tree).
  virtual PageId root(int slot) const = 0;
  // REQUIRES: writable()
  virtual void set_root(int slot, PageId id) = 0;

  // Returns the page (the first page of a run) in *page. Corruption (naming
  // the page) when id is out of range or its checksum fails.
  virtual Status Get(PageId id, const uint8_t** page) = 0;
  // What a page that Get returned but that is not what its reader expects
  // (`s`, a Corruption) says: when the file is no longer this database (one
  // copied over it while open, whose pages passed their checksums), that
  // error, made sticky; else `s`.
  virtual Status Explain(Status s) = 0;

  // --- write transactions only ---
  // A new run of n contiguous pages, zeroed except the page header (type,
  // txid and run length set). *page points to the first page; all n pages
  // are writable through it. Full/IOError when the file cannot grow.
  virtual Status Allocate(PageType type, uint32_t n, PageId* id, uint8_t** page) = 0;
  // Copy-on-write: a writable version of page `id` (a run keeps its
  // length). If this txn already wrote `id`, returns it in place
  // (*new_id == id); otherwise copies it to a new page, frees `id`, and
  // returns the copy.
  virtual Status Modify(PageId id, PageId* new_id, uint8_t** page) = 0;
  // Modify of a one-page node whose bytes [gap_begin, gap_end) hold nothing
  // the caller needs (a B+tree node's free space): the copy may skip them,
  // leaving them unspecified. A gap outside [page header, page size) or a
  // run of several pages is copied whole. Default: Modify.
  virtual Status ModifySkipping(PageId id, uint32_t gap_begin, uint32_t gap_end, PageId* new_id,
                                uint8_t** page) {
    (void)gap_begin;
    (void)gap_end;
    return Modify(id, new_id, page);
  }
  // Frees page (or run) `id`, subject to rule 5.
  virtual Status Free(PageId id) = 0;
  // True when this txn allocated or copied `id` (so it may be changed in
  // place).
  virtual bool IsDirty(PageId id) const = 0;

  // Commits: appends `log_payload` as this txn's log record and syncs as
  // `durability` says (rule 2), or checkpoints (rule 3). An empty payload
  // is allowed. After Commit the Txn is finished (only destroy it).
  virtual Status Commit(std::string_view log_payload, Durability durability) = 0;
  // Discards everything the txn did. Idempotent.
  virtual void Abort() = 0;

  // A kWriteAt write txn: the bytes of its private page copies, and
  // WriteBack writes them to the file and frees them (page pointers it
  // returned before are invalid afterwards; a page changed again is copied
  // again). Other txns: 0, and nothing to do.
  virtual uint64_t private_bytes() const { return 0; }
  virtual Status WriteBack() { return Status::OK(); }
};

class Pager {
 public:
  // Opens or creates the database at `path` (and `path`-log), takes the
  // exclusive lock, picks the meta page (rule 4), checks the log (rule 9).
  // It does NOT replay the log: call Recover() next. Errors: Busy (locked),
  // NotFound (missing and !create_if_missing), Corruption (no valid meta,
  // an empty or all-zero file that may not be created over, bad page size,
  // file shorter than its meta says, the log missing or not this
  // database's when it is needed), Full (no room to create), IOError,
  // InvalidArgument (bad options, path is a directory).
  static Result<std::unique_ptr<Pager>> Open(const std::string& path, const PagerOptions& options);
  virtual ~Pager();  // Close(), then releases the files and the lock

  // Closes the database now, as the destructor would: a clean checkpoint
  // (rule 9) when there is anything to write. Returns what kept it from
  // closing cleanly (the sticky error, the checkpoint's error); the log
  // then keeps every commit for the next Open. Afterwards the destructor
  // writes nothing; a second Close returns the first one's status.
  // REQUIRES: no transaction is open.
  virtual Status Close() = 0;

  // Replays the log (rule 4): calls apply(txid, payload) for each intact
  // record after the checkpoint, in order. `apply` must redo the record's
  // changes in a write txn and commit it with CommitReplayed (the payload is
  // not logged again). Then checkpoints. Must be called once after Open and
  // before any BeginWrite. Returns the first error apply returns.
  using ReplayFn = std::function<Status(uint64_t txid, std::string_view payload)>;
  virtual Status Recover(const ReplayFn& apply) = 0;

  virtual Result<std::unique_ptr<Txn>> BeginRead() = 0;
  // BeginRead for the library's own background reads (a key filter's
  // build): it pins pages as any reader does, but PagerStats::readers
  // counts the application's readers only.
  virtual Result<std::unique_ptr<Txn>> BeginInternalRead() = 0;
  // A read txn of the last commit that keeps writers out until it ends
  // (it waits for the current writer), so that AccountedPages describes
  // exactly its state: for consistency checks, which must not write.
  virtual Result<std::unique_ptr<Txn>> BeginQuiescent() = 0;
  // Blocks while another write txn is open. Fails with the sticky error
  // (rule 8) once a commit has failed.
  virtual Result<std::unique_ptr<Txn>> BeginWrite() = 0;
  // BeginWrite of a txn whose pages reach the file as `how` says.
  virtual Result<std::unique_ptr<Txn>> BeginWrite(PageWrites how) = 0;
  // Commit for a record being replayed by Recover (no new log record).
  virtual Status CommitReplayed(Txn* txn) = 0;

  // --- log-only commits (rule 10) ---
  // Recover for a caller that keeps the replayed records in memory (a
  // write buffer) instead of redoing them in pages: calls apply(txid,
  // payload) for each, then leaves them in the log, which goes on after
  // them. No checkpoint.
  virtual Status RecoverIntoMemory(const ReplayFn& apply) = 0;
  // Marks the database in use (rule 9) before the first log-only commit of
  // a session; the first BeginWrite does it too. Not sticky on failure.
  virtual Status PrepareCommits() = 0;
  // A commit whose changes are not in pages: appends its record as the next
  // txid (*txid) and makes it durable as `durability` says (rule 2). Busy
  // when the log has no room until a merge (CommitMerge) and checkpoint
  // let go of older records; the sticky error; IOError/Full. REQUIRES:
  // PrepareCommits or a write txn ran this session; the caller serializes
  // these with its own write txns that log records.
  virtual Status AppendCommit(std::string_view payload, Durability durability, uint64_t* txid) = 0;
  // AppendCommit in two steps, so that a caller may let its next writer in
  // before the sync (group commit): AppendUnsynced appends the record as
  // `durability` writes it and fills *ticket; SyncCommit then makes it
  // durable as `durability` says. The record is not durable until then.
  struct CommitTicket {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t lsn_end = 0;
  };
  virtual Status AppendUnsynced(std::string_view payload, Durability durability, uint64_t* txid,
                                CommitTicket* ticket) = 0;
  virtual Status SyncCommit(Durability durability, const CommitTicket& ticket) = 0;
  // Where the next log record will go (for CommitMerge).
  struct LogPosition {
    uint64_t offset = 0;
    uint64_t epoch = 0;
  };
  virtual LogPosition LogHead() = 0;
  // Changes each time the state a new read txn would see changes (a
  // commit, a checkpoint's empty txn): a reader that keeps one snapshot for
  // many reads (DBImpl's shared point-read snapshot) compares it to tell
  // that its snapshot is no longer the newest. Any thread, no lock.
  virtual uint64_t published() const = 0;
  // Whether the data file was found overwritten in place while open (the
  // sticky error says so): the map then shows another file's pages, so
  // reads fail too. (A file moved, replaced or removed stops the commits
  // only: the map still holds this database's file.) Any thread, no lock.
  virtual bool file_lost() const = 0;
  // What a new read txn asks, and a point read on the shared snapshot one
  // time in 64: at most every 100 ms it looks whether the file was
  // overwritten (as commits do); the error once it was. Any thread.
  virtual Status CheckReadable() = 0;
  // Commits a write txn that put into pages the changes of every record up
  // to `through_txid`; the first record after it starts at `next` (LogHead
  // when the caller stopped taking records into this merge). No log
  // record. The next checkpoint lets go of the records it covers.
  virtual Status CommitMerge(Txn* txn, uint64_t through_txid, LogPosition next) = 0;
  // Commits a write txn that reorganised pages without changing what they
  // hold (runs merged into their trees): no log record, and the pages
  // cover the same records as before.
  virtual Status CommitRewrite(Txn* txn) = 0;

  // Writes a checkpoint now (rule 3). Also run at Close and when the log
  // fills up.
  virtual Status Checkpoint() = 0;
  // Makes everything committed so far durable (syncs the log).
  virtual Status Flush() = 0;

  // Pages accounted for by the pager itself (rule 6): free, pending and
  // free-list pages, each listed once, sorted.
  virtual Status AccountedPages(std::vector<PageId>* pages) = 0;
  // Verifies the pager's own structures: meta, free list (no duplicates, all
  // in range, not 0 or 1), log header. Corruption with a description.
  virtual Status Verify() = 0;

  virtual PagerStats Stats() = 0;
  virtual const std::string& path() const = 0;
  // The database id of the file (format.h, META PAGE).
  virtual void DatabaseId(uint64_t id[2]) const = 0;

  // Gives this database the name `path` (and `path`-log), replacing the
  // files there: a clean checkpoint (rule 9), then the data file renamed
  // over the old one, then the log, then the directory synced. The files
  // stay locked throughout, so no other process can open the old or the
  // new file in between. After a crash in between, the path holds the old
  // database or this one, and this one's log is not needed. For compaction.
  // REQUIRES: no other thread uses the pager, no transaction is open.
  virtual Status MoveTo(const std::string& path) = 0;
  // A compacted copy replaced this database: BeginWrite and Checkpoint
  // fail with Busy from now on, read transactions keep their snapshots, and
  // closing writes nothing. REQUIRES: the caller keeps writers out (holds
  // a BeginQuiescent txn) until it has retired the pager.
  virtual void Retire() = 0;
  // The sticky error (rule 8), OK when none.
  virtual Status BackgroundError() = 0;
  // Makes `s` the sticky error (unless one is kept already), for a caller
  // that can no longer match the log with what it holds in memory (out of
  // memory publishing a logged commit): every later write and checkpoint
  // fails, and Close leaves the log for the next Open to replay.
  virtual void Fail(const Status& s) = 0;

  // The only function that turns a durability mode into syscalls on the
  // log (rule 2). Exposed for the sync micro-benchmark and tests.
  virtual Status SyncForCommit(Durability d, uint64_t log_offset, uint64_t length) = 0;

  // Testing hook: the destructor will then close the files without a
  // checkpoint, a log flush or any sync, like a process killed at this
  // point (the OS page cache keeps what was written). Crash tests combine it
  // with tests/support/fault_fs.h to simulate power loss.
  virtual void TEST_CrashOnClose() = 0;
  // Testing hook: the next write txn takes serial `last` + 1 (the writer's
  // per-page marks wrap after 2^32 - 1 write txns; tests start near the end).
  virtual void TEST_SetLastWriteSerial(uint32_t last) = 0;

 protected:
  Pager() = default;
};

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_PAGER_H_
