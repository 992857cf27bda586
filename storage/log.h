// storage::Log: the write-ahead log <db>-log (format: storage/format.h, LOG
// FILE). It appends the one record a commit writes (rule 2 of
// storage/pager.h), makes records durable as a Durability says (the one place
// that turns a mode into syscalls on the log), and reads them back for
// recovery (rule 4). Group commit's leader and the periodic flusher live here.
//
// Offsets are bytes into the log file; LSNs count the bytes appended over
// the life of the Log, so a sync can tell whether an earlier one covered it.
//
// Thread safety: Open, Append, Restart, SetUsed and StartFlusher are called
// by the pager's single writer; Sync, SyncRange and Flush from any thread
// (group commit syncs outside the writer gate); Scan, used() and capacity()
// from any thread.
#ifndef MMDOC_STORAGE_LOG_H_
#define MMDOC_STORAGE_LOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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

  // I/O errors are also kept in *error (rule 8). Not owned.
  Log(FileSystem* fs, std::string path, StickyError* error);
  ~Log();  // stops the flusher, unmaps
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // Opens the log file, creating it when missing, and maps it. With
  // `fresh`, or when the file is shorter than `size`, it is (re)filled with
  // zeros to `size` bytes and synced, so that a commit's sync never changes
  // the file's size.
  Status Open(uint64_t size, bool fresh);

  // Visits the valid records from offset 0, the first with txid
  // `first_txid` and each next one txid + 1, all of epoch `epoch`, ending at
  // or before `limit`. Returns the offset after the last one visited;
  // *records counts them.
  uint64_t Scan(uint64_t first_txid, uint64_t epoch, uint64_t limit, const RecordFn& fn,
                uint64_t* records) const;

  // Appends the record of `txid` after the used part. kFsync and kGroup
  // write it with pwrite, the other modes through the log's map (kMsync's
  // contract is msync of what it wrote there). *fits is false, and nothing
  // is written, when the record does not fit in the space left.
  Status Append(uint64_t txid, uint64_t epoch, std::string_view payload, Durability d,
                Position* pos, bool* fits) MMDOC_EXCLUDES(sync_mu_);
  // Makes the record at `pos` durable as `d` says (rule 2).
  Status Sync(Durability d, const Position& pos) MMDOC_EXCLUDES(sync_mu_);
  // Sync of the bytes [offset, offset + length) appended since the last
  // Restart (for the sync micro-benchmark and tests).
  Status SyncRange(Durability d, uint64_t offset, uint64_t length) MMDOC_EXCLUDES(sync_mu_);
  // Makes everything appended so far durable.
  Status Flush() MMDOC_EXCLUDES(sync_mu_);

  // The background flush of Durability::kPeriodic, every `interval_ms`;
  // started once, stopped by the destructor.
  void StartFlusher(uint32_t interval_ms) MMDOC_EXCLUDES(sync_mu_);
  void StopFlusher() MMDOC_EXCLUDES(sync_mu_);

  // A checkpoint made everything appended so far durable in the data file:
  // appends restart at offset 0 and pending syncs are satisfied.
  void Restart() MMDOC_EXCLUDES(sync_mu_);
  // After recovery: appends continue at `offset`.
  void SetUsed(uint64_t offset) { used_.store(offset); }

  uint64_t used() const { return used_.load(); }
  uint64_t capacity() const { return capacity_; }
  const std::string& path() const { return path_; }

 private:
  Status SyncTo(Durability d, uint64_t offset, uint64_t length, uint64_t lsn_end)
      MMDOC_EXCLUDES(sync_mu_);
  Status ZeroFill(uint64_t from, uint64_t to);

  FileSystem* const fs_;
  const std::string path_;
  StickyError* const error_;

  // Set by Open, read-only afterwards.
  std::unique_ptr<File> file_;
  uint8_t* base_ = nullptr;
  uint64_t capacity_ = 0;

  std::atomic<uint64_t> used_{0};  // written by the writer
  std::vector<uint8_t> buf_;       // a record being written (writer-owned)

  Mutex sync_mu_;
  CondVar sync_cv_{&sync_mu_};
  uint64_t appended_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;
  uint64_t durable_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;
  uint64_t start_lsn_ MMDOC_GUARDED_BY(sync_mu_) = 0;  // lsn of offset 0
  bool leader_active_ MMDOC_GUARDED_BY(sync_mu_) = false;
  bool stop_flusher_ MMDOC_GUARDED_BY(sync_mu_) = false;
  CondVar flusher_cv_{&sync_mu_};
  std::thread flusher_;  // writer-owned; joined by the destructor
};

}  // namespace mmdoc::storage

#endif  // MMDOC_STORAGE_LOG_H_
