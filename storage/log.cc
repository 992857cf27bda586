#include "storage/log.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

#include "storage/checksum.h"
#include "storage/coding.h"
#include "storage/format.h"

namespace mmdoc::storage {

namespace {

constexpr uint64_t kZeroFillChunk = 4096;
// Records at least this long are written with pwrite in every mode but
// kMsync (Append).
constexpr uint64_t kLogWriteMinBytes = 8192;
// In kNone and kPeriodic, Append starts the writeback of whole pages behind
// the head every this many bytes, so that a wrap's sync waits for the last
// stretch, not a whole lap.
constexpr uint64_t kLogWritebackBytes = 1 << 20;
constexpr uint64_t kLogWritebackAlign = 4096;
// In kNone and kPeriodic, a small record stored past the stretch of the map
// made writable last makes this many bytes from it writable (Append). Small,
// so that the bytes the kernel counts as written when their page turns dirty
// are counted no earlier than a few commits ahead (mmdoc-bench's written/op).
constexpr uint64_t kLogPrefaultBytes = 64 << 10;

uint64_t Align8(uint64_t x) { return (x + 7) & ~uint64_t{7}; }

}  // namespace

Log::Log(FileSystem* fs, std::string path, StickyError* error)
    : fs_(fs), path_(std::move(path)), error_(error) {}

Log::~Log() {
  StopFlusher();
  if (base_ != nullptr) (void)file_->Unmap(base_, map_len_);
}

// One OS page per write: the page cache sizes a folio by the write that
// makes it, and a commit that dirties one byte of a large folio through the
// map gets the whole folio written back (1 MiB per msync commit, measured).
Status Log::ZeroFill(uint64_t from, uint64_t to) {
  static const uint8_t kZeros[kZeroFillChunk] = {};
  while (from < to) {
    const uint64_t n = std::min<uint64_t>(kZeroFillChunk - from % kZeroFillChunk, to - from);
    MMDOC_RETURN_IF_ERROR(file_->WriteAt(from, kZeros, n));
    from += n;
  }
  return Status::OK();
}

Status Log::Map() {
  max_capacity_ = std::max(max_capacity_, capacity_.load());
  map_len_ = std::max<uint64_t>(max_capacity_, 8);
  Result<uint8_t*> m = file_->Map(map_len_, read_only_ ? MapMode::kReadOnly : MapMode::kReadWrite);
  if (!m.ok()) return m.status();
  base_ = *m;
  prefault_from_ = prefault_to_ = 0;
  // Faults read one page, not a readahead window into a large folio (see
  // ZeroFill). A failure only costs speed.
  (void)file_->AdviseRandomAccess(base_, map_len_);
  used_.store(start_);
  tail_.store(start_);
  writeback_from_ = start_;
  MutexLock l(&sync_mu_);
  start_offset_ = start_;
  return Status::OK();
}

Status Log::Open(const uint64_t db_id[2], bool legacy, uint64_t max_size, bool keep_truncated,
                 bool read_only) {
  read_only_ = read_only;
  Result<std::unique_ptr<File>> f =
      fs_->Open(path_, read_only ? OpenMode::kReadOnly : OpenMode::kExisting);
  if (!f.ok()) return f.status();
  file_ = std::move(f.value());
  Result<uint64_t> size = file_->Size();
  if (!size.ok()) return size.status();
  if (legacy) {
    start_ = 0;
    capacity_.store(*size / 8 * 8);
    max_capacity_ = 0;
    return Map();
  }
  auto bad = [&](const std::string& why) {
    file_.reset();
    return Status::Corruption(path_, why);
  };
  if (*size < kLogRecordsOffset) {
    return bad(*size == 0 ? "the log is empty" : "the log is too short to have a header");
  }
  uint8_t h[kLogHeaderUsed];
  MMDOC_RETURN_IF_ERROR(file_->ReadAt(0, h, sizeof h));
  if (DecodeFixed64(h + kLogHeaderMagicOffset) != kLogMagic ||
      DecodeFixed64(h + kLogHeaderChecksumOffset) != Checksum(h + 8, sizeof h - 8, 0)) {
    return bad("not an mmdoc log (bad header)");
  }
  if (DecodeFixed32(h + kLogHeaderVersionOffset) != kFormatVersion) {
    return bad("unsupported log version " +
               std::to_string(DecodeFixed32(h + kLogHeaderVersionOffset)));
  }
  if (DecodeFixed64(h + kLogHeaderDbIdOffset) != db_id[0] ||
      DecodeFixed64(h + kLogHeaderDbIdOffset + 8) != db_id[1]) {
    return bad("the log belongs to another database");
  }
  uint64_t records = DecodeFixed64(h + kLogHeaderRecordsSizeOffset);
  if (*size < kLogRecordsOffset + records) {
    if (!keep_truncated || *size < kLogRecordsOffset + kLogHeaderSize) {
      return bad("the log is truncated: " + std::to_string(*size) + " bytes, its header says " +
                 std::to_string(kLogRecordsOffset + records));
    }
    records = (*size - kLogRecordsOffset) / 8 * 8;
    Status s = read_only ? Status::OK() : WriteHeader(db_id, records);
    if (s.ok() && !read_only) s = file_->Sync();
    if (!s.ok()) {
      file_.reset();
      return s;
    }
  }
  start_ = kLogRecordsOffset;
  capacity_.store(kLogRecordsOffset + records);
  max_capacity_ = kLogRecordsOffset + Align8(max_size);
  db_id_[0] = db_id[0];
  db_id_[1] = db_id[1];
  return Map();
}

Status Log::WriteHeader(const uint64_t db_id[2], uint64_t records) {
  uint8_t h[kLogHeaderUsed] = {};
  EncodeFixed64(h + kLogHeaderMagicOffset, kLogMagic);
  EncodeFixed32(h + kLogHeaderVersionOffset, kFormatVersion);
  EncodeFixed64(h + kLogHeaderDbIdOffset, db_id[0]);
  EncodeFixed64(h + kLogHeaderDbIdOffset + 8, db_id[1]);
  EncodeFixed64(h + kLogHeaderRecordsSizeOffset, records);
  EncodeFixed64(h + kLogHeaderChecksumOffset, Checksum(h + 8, sizeof h - 8, 0));
  return file_->WriteAt(0, h, sizeof h);
}

Status Log::Create(const uint64_t db_id[2], uint64_t size, uint64_t max_size) {
  read_only_ = false;
  const uint64_t records = Align8(size);
  Status s;
  if (base_ != nullptr) {  // a log made anew over an open one: its map goes first
    (void)file_->Unmap(base_, map_len_);
    base_ = nullptr;
    map_len_ = 0;
  }
  {
    Result<std::unique_ptr<File>> f = fs_->Open(path_, OpenMode::kCreate);
    if (!f.ok()) return f.status();
    file_ = std::move(f.value());
  }
  // Zeros written, not just allocated: an fdatasync after a write into an
  // unwritten extent must also write the extent's metadata.
  s = file_->Truncate(0);
  if (s.ok()) s = ZeroFill(0, kLogRecordsOffset + records);
  if (s.ok()) s = WriteHeader(db_id, records);
  if (s.ok()) s = file_->Sync();
  if (s.ok()) s = fs_->SyncDir(path_);
  if (!s.ok()) {
    file_.reset();
    (void)fs_->Remove(path_);
    return s;
  }
  start_ = kLogRecordsOffset;
  capacity_.store(kLogRecordsOffset + records);
  max_capacity_ = kLogRecordsOffset + Align8(std::max(size, max_size));
  db_id_[0] = db_id[0];
  db_id_[1] = db_id[1];
  return Map();
}

Status Log::Grow(uint64_t need) {
  const uint64_t cap = capacity_.load(), head = used_.load();
  assert(head >= tail_.load());
  const uint64_t want = std::max(2 * (cap - start_), head + need - start_);
  const uint64_t grown = std::min(max_capacity_, start_ + Align8(want));
  if (grown <= cap) return Status::OK();
  // Zeros first, synced (the size change with them): until the header
  // claims them, a failure or crash here loses nothing, so it is not sticky.
  Status s = ZeroFill(cap, grown);
  if (s.ok()) s = file_->Sync();
  if (!s.ok()) {
    // A disk that filled midway keeps the zeros written so far: given
    // back, or a full disk would stay full of log no record uses.
    (void)file_->Truncate(cap);
    return s;
  }
  // A torn or unsynced header would lose the log: that is sticky (rule 8).
  s = WriteHeader(db_id_, grown - start_);
  if (s.ok()) s = file_->Sync();
  if (!s.ok()) {
    error_->Set(s);
    return s;
  }
  capacity_.store(grown);
  return Status::OK();
}

Status Log::Rename(const std::string& path) {
  MMDOC_RETURN_IF_ERROR(fs_->Rename(path_, path));
  path_ = path;
  return Status::OK();
}

Status Log::Remove() {
  if (!fs_->Exists(path_)) return Status::OK();
  return fs_->Remove(path_);
}

int64_t Log::ValidAt(uint64_t off, uint64_t epoch, uint64_t after, bool* wrap,
                     uint64_t* txid) const {
  const uint64_t capacity = capacity_.load();
  if (off + kLogHeaderSize > capacity) return -1;
  const uint8_t* r = base_ + off;
  const uint32_t magic = DecodeFixed32(r + kLogMagicOffset);
  const uint32_t len = DecodeFixed32(r + kLogLengthOffset);
  *wrap = magic == kLogWrapMagic;
  *txid = DecodeFixed64(r + kLogTxidOffset);
  if ((magic != kLogRecordMagic && !*wrap) || DecodeFixed64(r + kLogEpochOffset) != epoch ||
      len > capacity - off - kLogHeaderSize || (*wrap && len != 0) ||
      DecodeFixed64(r + kLogChecksumOffset) !=
          Checksum(r + 8, kLogHeaderSize - 8 + uint64_t{len}, epoch)) {
    return -1;
  }
  // A wrap marker repeats the last txid before it; a record comes after it.
  if (*wrap ? *txid < after : *txid <= after) return -1;
  return len;
}

Log::ScanEnd Log::Scan(Cursor from, uint64_t after_txid, const RecordFn& fn,
                       const Cursor* stop) const {
  ScanEnd e;
  e.end = from;
  e.last_txid = after_txid;
  if (base_ == nullptr) return e;
  uint64_t off = from.offset, epoch = from.epoch;
  int wraps = 0;
  while (stop == nullptr || off != stop->offset || epoch != stop->epoch) {
    bool wrap;
    uint64_t txid;
    int64_t len = ValidAt(off, epoch, e.last_txid, &wrap, &txid);
    if (len < 0) {
      // A session that began after a crash appended under the next epoch.
      len = ValidAt(off, epoch + 1, e.last_txid, &wrap, &txid);
      if (len >= 0) epoch++;
    }
    // Too near the end for a header: the writer wrapped without a marker.
    const bool implicit_wrap = off + kLogHeaderSize > capacity_.load();
    if ((len >= 0 && wrap) || (len < 0 && implicit_wrap)) {
      if (++wraps > 2) break;  // a ring is not followed round twice
      const uint64_t next_epoch = epoch + 1;
      bool w2;
      uint64_t t2;
      if (ValidAt(start_, next_epoch, e.last_txid, &w2, &t2) < 0 || w2) break;
      off = start_;
      epoch = next_epoch;
      continue;
    }
    if (len < 0) break;
    if (fn &&
        !fn(txid, std::string_view(reinterpret_cast<const char*>(base_ + off + kLogHeaderSize),
                                   static_cast<size_t>(len)))) {
      break;
    }
    off += LogRecordSize(static_cast<uint64_t>(len));
    e.last_txid = txid;
    e.records++;
    e.end = Cursor{off, epoch};
  }
  if (e.records == 0) e.end = from;
  return e;
}

bool Log::RecordAtStart(uint64_t* epoch, uint64_t* txid) const {
  if (base_ == nullptr || start_ + kLogHeaderSize > capacity_.load()) return false;
  *epoch = DecodeFixed64(base_ + start_ + kLogEpochOffset);
  bool wrap;
  return ValidAt(start_, *epoch, 0, &wrap, txid) >= 0 && !wrap;
}

uint64_t Log::InUse() const {
  const uint64_t head = used_.load(), tail = tail_.load();
  return head >= tail ? head - tail : (capacity_.load() - tail) + (head - start_);
}

uint64_t Log::last_txid() const {
  MutexLock l(&sync_mu_);
  return appended_txid_;
}

void Log::SetPosition(Cursor tail, Cursor head, uint64_t last_txid) {
  tail_.store(tail.offset);
  used_.store(head.offset);
  writeback_from_ = head.offset;
  MutexLock l(&sync_mu_);
  appended_txid_ = last_txid;
  epoch_.store(head.epoch);
  durable_lsn_ = appended_lsn_;
  start_lsn_ = appended_lsn_;
  start_offset_ = head.offset;
}

Status Log::Wrap(uint64_t last_txid) {
  const uint64_t off = used_.load(), epoch = epoch_.load();
  if (off + kLogHeaderSize <= capacity_.load()) {
    uint8_t r[kLogHeaderSize];
    EncodeFixed32(r + kLogLengthOffset, 0);
    EncodeFixed32(r + kLogMagicOffset, kLogWrapMagic);
    EncodeFixed64(r + kLogTxidOffset, last_txid);
    EncodeFixed64(r + kLogEpochOffset, epoch);
    EncodeFixed64(r + kLogChecksumOffset, Checksum(r + 8, kLogHeaderSize - 8, epoch));
    Status s = file_->WriteAt(off, r, sizeof r);
    if (!s.ok()) {
      error_->Set(s);
      return s;
    }
  }
  // What precedes the wrap is durable before anything after it can be.
  Status s = file_->Sync();
  if (!s.ok()) {
    error_->Set(s);
    return s;
  }
  used_.store(start_);
  writeback_from_ = start_;
  MutexLock l(&sync_mu_);
  MarkDurable(appended_lsn_, appended_txid_, epoch);
  epoch_.store(epoch + 1);
  start_lsn_ = appended_lsn_;
  start_offset_ = start_;
  return Status::OK();
}

Status Log::Append(uint64_t txid, std::string_view payload, Durability d, Position* pos,
                   bool* fits) {
  const uint64_t len = LogRecordSize(payload.size());
  uint64_t off = used_.load();
  const uint64_t tail = tail_.load();
  // Room before the end (or, once wrapped, before the tail: a gap is left,
  // so that a full ring never looks empty); else at the start, up to the
  // tail (the whole area when nothing is needed), after a wrap.
  const bool wrapped = off < tail;
  *fits = wrapped ? len < tail - off : len <= capacity_.load() - off;
  if (!*fits && !wrapped && capacity_.load() < max_capacity_) {
    Status s = Grow(len);
    if (!s.ok() && error_->Has()) return s;  // else the log stays as it was
    *fits = len <= capacity_.load() - off;
  }
  if (!*fits) {
    const uint64_t capacity = capacity_.load();
    const uint64_t room = off == tail ? capacity - start_ : tail - start_;
    *fits = !wrapped && len < room;
    if (!*fits) return Status::OK();
    uint64_t last;
    {
      MutexLock l(&sync_mu_);
      last = appended_txid_;
    }
    MMDOC_RETURN_IF_ERROR(Wrap(last));
    off = start_;
  }
  const uint64_t epoch = epoch_.load();
  // kFsync and kGroup write with pwrite: an fdatasync after stores through
  // a shared map took ~10x longer on Linux/ext4 than after pwrite of the
  // same bytes. So do the other modes (but kMsync, whose contract is msync)
  // for a record of two pages or more: each page stored through the map
  // takes a fault once per lap (its writeback unmaps it or write-protects
  // it), which costs more than the system call. A smaller record is stored:
  // at one small commit per transaction the system call was a third of its
  // time, and a fault per page is one per many commits (docs/write-path.md).
  const bool via_write = d == Durability::kFsync || d == Durability::kGroup ||
                         (d != Durability::kMsync && len >= kLogWriteMinBytes);
  uint8_t* r = base_ + off;
  if (via_write) {
    buf_.resize(len);
    r = buf_.data();
  } else if ((d == Durability::kNone || d == Durability::kPeriodic) &&
             (off < prefault_from_ || off + len > prefault_to_)) {
    // The next stretch mapped writable in one call, not by a fault at the
    // first store to each page (a hint; a page past it still faults).
    prefault_from_ = off / kLogWritebackAlign * kLogWritebackAlign;
    prefault_to_ =
        std::max(off + len, std::min(prefault_from_ + kLogPrefaultBytes, capacity_.load()));
    (void)file_->PrepareMappedWrite(base_ + prefault_from_, prefault_to_ - prefault_from_);
  }
  EncodeFixed32(r + kLogLengthOffset, static_cast<uint32_t>(payload.size()));
  EncodeFixed32(r + kLogMagicOffset, kLogRecordMagic);
  EncodeFixed64(r + kLogTxidOffset, txid);
  EncodeFixed64(r + kLogEpochOffset, epoch);
  if (!payload.empty()) std::memcpy(r + kLogHeaderSize, payload.data(), payload.size());
  std::memset(r + kLogHeaderSize + payload.size(), 0, len - kLogHeaderSize - payload.size());
  EncodeFixed64(r + kLogChecksumOffset,
                Checksum(r + 8, kLogHeaderSize - 8 + payload.size(), epoch));
  if (via_write) {
    Status s = file_->WriteAt(off, r, len);
    if (!s.ok()) {
      error_->Set(s);
      return s;
    }
  }
  used_.store(off + len);
  if ((d == Durability::kNone || d == Durability::kPeriodic) &&
      off + len >= writeback_from_ + kLogWritebackBytes) {
    const uint64_t to = (off + len) / kLogWritebackAlign * kLogWritebackAlign;
    // Unmapped first, in one call: the writeback then finds no page-table
    // entry to write-protect, each a TLB shootdown to every core running the
    // process. Both are hints; the data stay in the page cache.
    (void)file_->DropMappedPages(base_ + writeback_from_, to - writeback_from_);
    (void)file_->StartWriteback(writeback_from_, to - writeback_from_);
    writeback_from_ = to;
  }
  MutexLock l(&sync_mu_);
  appended_lsn_ += len;
  appended_txid_ = txid;
  *pos = Position{off, len, appended_lsn_};
  return Status::OK();
}

Status Log::Sync(Durability d, const Position& pos) {
  return SyncTo(d, pos.offset, pos.length, pos.lsn_end);
}

Status Log::SyncRange(Durability d, uint64_t offset, uint64_t length) {
  uint64_t lsn_end;
  {
    MutexLock l(&sync_mu_);
    lsn_end = start_lsn_ + (offset + length - std::min(offset + length, start_offset_));
  }
  return SyncTo(d, offset, length, lsn_end);
}

void Log::MarkDurable(uint64_t lsn, uint64_t txid, uint64_t epoch) {
  sync_mu_.AssertHeld();
  if (lsn <= durable_lsn_) return;
  durable_lsn_ = lsn;
  if (on_durable_ && txid != 0 && epoch == epoch_.load() && lsn > start_lsn_) {
    on_durable_(epoch, txid);
  }
}

// The one place that turns a Durability into syscalls on the log (rule 2).
Status Log::SyncTo(Durability d, uint64_t off, uint64_t len, uint64_t lsn_end) {
  if (error_->Has()) return error_->Get();
  switch (d) {
    case Durability::kNone:
    case Durability::kPeriodic:  // the flusher thread syncs later
      return Status::OK();
    case Durability::kMsync: {
      if (off > capacity_.load() || len > capacity_.load() - off) {
        return Status::InvalidArgument("SyncForCommit: range outside the log");
      }
      // From the first record not yet durable: a durable record after one
      // that is lost would never be replayed. (A wrap syncs what precedes
      // it, so that first record is after the last wrap.)
      uint64_t from, txid, epoch;
      {
        MutexLock l(&sync_mu_);
        from = std::min(off, start_offset_ + (durable_lsn_ - start_lsn_));
        txid = lsn_end == appended_lsn_ ? appended_txid_ : 0;
        epoch = epoch_.load();
      }
      Status s = file_->MapSync(base_, from, off + len - from);
      if (!s.ok()) {
        error_->Set(s);
        return s;
      }
      MutexLock l(&sync_mu_);
      MarkDurable(lsn_end, txid, epoch);
      return s;
    }
    case Durability::kFsync:
      return Flush();
    case Durability::kGroup: {
      MutexLock l(&sync_mu_);
      for (;;) {
        if (durable_lsn_ >= lsn_end) return Status::OK();
        if (error_->Has()) return error_->Get();
        if (!leader_active_) {
          // Leader: one fdatasync covers every record appended so far.
          leader_active_ = true;
          const uint64_t target = appended_lsn_, txid = appended_txid_;
          const uint64_t epoch = epoch_.load();
          sync_mu_.Unlock();
          Status s = file_->Sync();
          if (!s.ok()) error_->Set(s);
          sync_mu_.Lock();
          leader_active_ = false;
          if (s.ok()) MarkDurable(target, txid, epoch);
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

Status Log::Flush() {
  if (error_->Has()) return error_->Get();
  uint64_t target, txid, epoch;
  {
    MutexLock l(&sync_mu_);
    target = appended_lsn_;
    txid = appended_txid_;
    epoch = epoch_.load();
    if (durable_lsn_ >= target) return Status::OK();
  }
  Status s = file_->Sync();
  if (!s.ok()) {
    error_->Set(s);
    return s;
  }
  MutexLock l(&sync_mu_);
  MarkDurable(target, txid, epoch);
  sync_cv_.SignalAll();
  return s;
}

void Log::StartFlusher(uint32_t interval_ms) {
  // Once: both a write txn's commit and a log-only commit may ask. A thread
  // that cannot start (no memory or threads left) leaves the flag unset, so
  // the next commit asks again; until then the records wait for a sync.
  try {
    StartFlusherOnce(interval_ms);
  } catch (const std::system_error&) {
  }
}

void Log::StartFlusherOnce(uint32_t interval_ms) {
  std::call_once(flusher_once_, [this, interval_ms] {
    flusher_ = std::thread([this, interval_ms] {
      MutexLock l(&sync_mu_);
      while (!stop_flusher_) {
        // Sleeps the interval; StopFlusher cuts it short.
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(interval_ms);
        while (!stop_flusher_ && flusher_cv_.WaitFor(deadline - std::chrono::steady_clock::now())) {
        }
        if (stop_flusher_) break;
        if (appended_lsn_ > durable_lsn_ && !error_->Has()) {
          sync_mu_.Unlock();
          (void)Flush();
          sync_mu_.Lock();
        }
      }
    });
  });
}

void Log::StopFlusher() {
  {
    MutexLock l(&sync_mu_);
    stop_flusher_ = true;
  }
  flusher_cv_.SignalAll();
  if (flusher_.joinable()) flusher_.join();
}

void Log::Restart(uint64_t epoch) {
  used_.store(start_);
  writeback_from_ = start_;
  tail_.store(start_);
  {
    MutexLock l(&sync_mu_);
    epoch_.store(epoch);
    durable_lsn_ = appended_lsn_;
    start_lsn_ = appended_lsn_;
    start_offset_ = start_;
  }
  sync_cv_.SignalAll();
}

}  // namespace mmdoc::storage
