// storage::Log: the write-ahead log <db>-log (format: storage/format.h, LOG
// FILE). It appends the one record a commit writes (rule 2 of
// storage/pager.h), makes records durable as a Durability says (the one place
// that turns a mode into syscalls on the log), and reads them back for
// recovery (rule 4). Group commit's leader and the periodic flusher live here.
//
// A log belongs to one database: its header carries the database id, and
// Open refuses a log that is missing, foreign, damaged or cut short, so the
// pager can tell "nothing to replay" from "the records are gone".
//
// The records area is a ring. Appends go forward from the head; the tail is
// the oldest record still needed (a checkpoint releases records, moving the
// tail). When a record does not fit before the end of the area, a wrap
// marker is written there, the log is synced, and appends go on at the
// start under the next epoch, as long as they stay behind the tail. A
// checkpoint that covers every record restarts the log empty (Restart).
// Replay (Scan) follows the records from a position: txids increase; at a
// wrap marker it goes on at the start under the next epoch; and the epoch
// may also step up by one at any record (a session that began after a
// crash appends after the last intact record under a new epoch).
//
// Offsets are bytes into the log file; LSNs count the bytes appended over
// the life of the Log, so a sync can tell whether an earlier one covered it.
//
// Thread safety: Open, Create, Append, Restart, SetUsed and StartFlusher are
// called by the pager's single writer; Sync, SyncRange and Flush from any
// thread (group commit syncs outside the writer gate); Scan, used() and
// capacity() from any thread.
#ifndef MMDOC_STORAGE_LOG_H_
#define MMDOC_STORAGE_LOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "mmdoc/durability.h"
#include "mmdoc/status.h"
#include "storage/file_system.h"
#include "storage/mutex.h"
#include "storage/sticky_error.h"

namespace mmdoc::storage {

class Log {
 public:
  // Where an appended record lies, for Sync.
  struct Position {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint64_t lsn_end = 0;
  };
  // Called for each record Scan visits; false stops the scan.
  using RecordFn = std::function<bool(uint64_t txid, std::string_view payload)>;
  // Called after a sync made every record of `epoch` up to `txid` durable.
  using DurableFn = std::function<void(uint64_t epoch, uint64_t txid)>;

  // I/O errors are also kept in *error (rule 8). Not owned.
  Log(FileSystem* fs, std::string path, StickyError* error);
  ~Log();  // stops the flusher, unmaps
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // Opens the existing log of database `db_id` and maps it, reserving
  // address space for `max_size` bytes of records (the log may grow to
  // that; see Append). NotFound when the file does not exist; Corruption,
  // naming the log, when its header is damaged, names another database, or
  // the file is shorter than the header says (a longer file is a growth cut
  // short: the header's size counts). `legacy`: a version 1 or 2 log, which
  // has no header, whose records start at 0, and which never grows.
  // `keep_truncated` (PagerOptions::accept_log_loss): a file shorter than
  // its header says is opened at its length instead, the header rewritten
  // to say so, so that the records it still holds replay. `read_only`: the
  // file opened and mapped for reading (a truncated header is not
  // rewritten); nothing may be appended.
  Status Open(const uint64_t db_id[2], bool legacy, uint64_t max_size, bool keep_truncated = false,
              bool read_only = false);
  // Creates (or truncates) the log of database `db_id` with `size` bytes of
  // records, zero-filled, header written, file and directory synced, then
  // maps it with room to grow to `max_size` (>= size). On failure (Full on
  // a full disk) the file is removed, so a half-made log never takes the
  // disk. A log already open is unmapped first (not ready() on failure).
  Status Create(const uint64_t db_id[2], uint64_t size, uint64_t max_size);
  // Makes sure every byte of the log is backed by disk blocks (a sparse
  // copy's holes would make a store through the map SIGBUS on a full disk).
  Status AllocateAll() { return file_->Allocate(0, capacity_.load()); }
  // Whether Open or Create succeeded.
  bool ready() const { return base_ != nullptr; }
  // Removes the log file. REQUIRES: !ready().
  Status Remove();
  // Renames the log file to `path` (replacing what is there). REQUIRES: the
  // log is not shared with another thread.
  Status Rename(const std::string& path);

  // A place in the log: where a record starts (or the next one will), and
  // the epoch the record there has (or will have).
  struct Cursor {
    uint64_t offset = 0;
    uint64_t epoch = 0;
  };
  // What Scan found: where the records it visited end (the next record
  // would go there, under `end.epoch`), the last txid it visited, and how
  // many.
  struct ScanEnd {
    Cursor end;
    uint64_t last_txid = 0;
    uint64_t records = 0;
  };
  // Visits the valid records from `from`, each with a txid greater than the
  // one before (the first greater than `after_txid`), following wrap
  // markers and epoch steps as the class comment says, until a record is
  // missing, torn, stale or fails its checksum, or `stop` is reached (when
  // given). `fn` may be null.
  ScanEnd Scan(Cursor from, uint64_t after_txid, const RecordFn& fn,
               const Cursor* stop = nullptr) const;

  // The txid of the record at the start of the records area, read under
  // the epoch its own header names: a restart and every wrap write there
  // first, so it is the newest epoch's first record. False when no valid
  // record (or a wrap marker) is there.
  bool RecordAtStart(uint64_t* epoch, uint64_t* txid) const;

  // Appends the record of `txid` at the head. When it does not fit before
  // the end and the log is below its maximum size and not wrapped, the log
  // grows first (doubling, up to the maximum): the new bytes are written as
  // zeros and synced, and only then does the header claim them, so a
  // commit's later fdatasync still writes no file metadata and a crash
  // mid-growth leaves the old size. Otherwise it wraps to the start when
  // the start is free up to the tail.
  // kFsync and kGroup write it with pwrite; kMsync through the log's map
  // (its contract is msync of what it wrote there); kNone and kPeriodic
  // with pwrite when it spans two pages or more, else through the map; these
  // two also start the writeback of the whole pages behind the head every
  // MiB (File::StartWriteback), so that a wrap's sync has little left to do,
  // after dropping them from the map (File::DropMappedPages), so that the
  // writeback has no page-table entry to write-protect; and they make the
  // 64 KiB ahead of the head writable in one call (File::PrepareMappedWrite)
  // when a stored record leaves the last such stretch.
  // *fits is
  // false, and nothing is written, when the ring has no room for it.
  // REQUIRES: ready(); `txid` greater than every txid appended before.
  Status Append(uint64_t txid, std::string_view payload, Durability d, Position* pos, bool* fits)
      MMDOC_EXCLUDES(sync_mu_);
  // Makes the record at `pos`, and every record before it, durable as `d`
  // says (rule 2).
  Status Sync(Durability d, const Position& pos) MMDOC_EXCLUDES(sync_mu_);
  // Sync of the bytes up to offset + length appended since the last
  // Restart (for the sync micro-benchmark and tests).
  Status SyncRange(Durability d, uint64_t offset, uint64_t length) MMDOC_EXCLUDES(sync_mu_);
  // Makes everything appended so far durable.
  Status Flush() MMDOC_EXCLUDES(sync_mu_);
  // Called (under the log's lock: keep it short) after each sync that made
  // records durable. Set before the log is shared.
  void SetDurableHook(DurableFn fn) { on_durable_ = std::move(fn); }

  // The background flush of Durability::kPeriodic, every `interval_ms`;
  // started once, stopped by StopFlusher or the destructor.
  void StartFlusher(uint32_t interval_ms) MMDOC_EXCLUDES(sync_mu_);
  void StopFlusher() MMDOC_EXCLUDES(sync_mu_);

  // A checkpoint made everything appended so far durable in the data file:
  // the log is empty again, appends restart at the start under `epoch`, and
  // pending syncs are satisfied.
  void Restart(uint64_t epoch) MMDOC_EXCLUDES(sync_mu_);
  // A checkpoint made the records before `tail` unnecessary: appends may
  // now wrap up to it.
  void Release(Cursor tail) { tail_.store(tail.offset); }
  // After recovery: the records from `tail` are still needed, the last of
  // them is `last_txid`, and appends go on at `head` under `head.epoch`.
  void SetPosition(Cursor tail, Cursor head, uint64_t last_txid) MMDOC_EXCLUDES(sync_mu_);
  // The txid of the last record appended (or, after SetPosition, found):
  // 0 when the log holds none since it was opened or restarted.
  uint64_t last_txid() const MMDOC_EXCLUDES(sync_mu_);
  // Where the next record will go.
  Cursor head() const { return Cursor{used_.load(), epoch_.load()}; }
  // Where the oldest needed record starts (the head when none is).
  uint64_t tail() const { return tail_.load(); }
  // Bytes of records from the tail to the head.
  uint64_t InUse() const;

  // The offset where the records area starts and where it ends now.
  uint64_t start() const { return start_; }
  uint64_t capacity() const { return capacity_.load(); }
  // Where it may end at most (the records area grows up to there).
  uint64_t max_capacity() const { return max_capacity_; }
  const std::string& path() const { return path_; }

 private:
  void StartFlusherOnce(uint32_t interval_ms) MMDOC_EXCLUDES(sync_mu_);  // may throw
  Status SyncTo(Durability d, uint64_t offset, uint64_t length, uint64_t lsn_end)
      MMDOC_EXCLUDES(sync_mu_);
  // After a sync of everything appended up to `lsn` (captured with its txid
  // and epoch before the sync): records it durable and calls the hook.
  void MarkDurable(uint64_t lsn, uint64_t txid, uint64_t epoch) MMDOC_REQUIRES(sync_mu_);
  Status ZeroFill(uint64_t from, uint64_t to);
  // Writes the header claiming `records` bytes of records.
  Status WriteHeader(const uint64_t db_id[2], uint64_t records);
  // Grows the records area to hold at least `need` more bytes after the
  // head (see Append). REQUIRES: the head is not behind the tail.
  Status Grow(uint64_t need);
  // Writes the wrap marker at the head (when there is room for one), syncs
  // the log so that nothing after the wrap is durable before what precedes
  // it, and moves the head to the start under the next epoch.
  Status Wrap(uint64_t last_txid) MMDOC_EXCLUDES(sync_mu_);
  // The record header at `off` as Scan reads it: its payload length when it
  // is a valid record (or, with *wrap, a wrap marker) of `epoch` with a txid
  // greater than `after`; -1 otherwise.
  int64_t ValidAt(uint64_t off, uint64_t epoch, uint64_t after, bool* wrap, uint64_t* txid) const;
  Status Map();

  FileSystem* const fs_;
  std::string path_;  // changed only by Rename, while the log is not shared
  StickyError* const error_;
  DurableFn on_durable_;

  // Set by Open or Create, read-only while the log is shared.
  std::unique_ptr<File> file_;
  bool read_only_ = false;  // Open's; Create makes a writable log
  uint8_t* base_ = nullptr;
  uint64_t map_len_ = 0;
  uint64_t start_ = 0;
  uint64_t max_capacity_ = 0;          // where the records area may end at most
  uint64_t db_id_[2] = {0, 0};         // repeated in the header by Grow
  std::atomic<uint64_t> capacity_{0};  // where it ends; grown by the writer

  std::atomic<uint64_t> used_{0};  // the head; written by the writer
  std::atomic<uint64_t> tail_{0};  // the oldest needed record; by the writer
  std::vector<uint8_t> buf_;       // a record being written (writer-owned)
  uint64_t writeback_from_ = 0;    // where Append's next writeback starts (writer-owned)
  // The stretch Append last made writable in the map (writer-owned).
  uint64_t prefault_from_ = 0, prefault_to_ = 0;

  mutable Mutex sync_mu_;
  CondVar sync_cv_{&sync_mu_};
  // The epoch of new records: written by the writer under sync_mu_ (so a
  // sync can tell whether a restart came between), read by Append without.
  std::atomic<uint64_t> epoch_{0};
  uint64_t appended_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;
  uint64_t appended_txid_ MMDOC_GUARDED_BY(sync_mu_) = 0;  // its last record
  uint64_t durable_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;
  uint64_t start_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;  // lsn of start_offset_
  // Where appends began at the last Restart, SetPosition or wrap: records
  // from there on are contiguous in the file.
  uint64_t start_offset_ MMDOC_GUARDED_BY(sync_mu_) = 0;
  bool leader_active_ MMDOC_GUARDED_BY(sync_mu_) = false;
  bool stop_flusher_ MMDOC_GUARDED_BY(sync_mu_) = false;
  CondVar flusher_cv_{&sync_mu_};
  std::once_flag flusher_once_;
  std::thread flusher_;  // started once (StartFlusher); joined by StopFlusher
};

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_LOG_H_
