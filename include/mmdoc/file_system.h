// mmdoc::FileSystem and mmdoc::File: the one seam between mmdoc and the OS,
// as LevelDB's Env is. Options::file_system takes one; the default is POSIX.
//
// Every syscall that touches a database file (open, pread/pwrite/pwritev,
// ftruncate, fallocate, mmap/munmap/msync/madvise/mincore, fdatasync, flock,
// link, rename, unlink, directory fsync) goes through this interface; the
// POSIX implementation (storage/posix_file.cc) is the only code that makes
// them. Wrap it to observe or break I/O: mmdoc's own tests substitute one
// that drops unsynced writes, tears pages, or fails the Nth write or sync
// with EIO or ENOSPC.
// An implementation must keep the contracts below (in particular Sync and
// MapSync must mean durable, and CreateExclusive must be atomic), or the
// guarantees of durability.h do not hold.
//
// Errors: IOError with the path and errno text; Full for ENOSPC; Busy when a
// lock is held elsewhere; NotFound when a file to open does not exist;
// AlreadyExists when a file to create does.
//
// Thread safety: a File may be used from several threads at once for ReadAt,
// WriteAt and Sync calls on disjoint ranges; Map/Unmap/Truncate/Allocate must
// be externally serialized (the pager's writer lock does this).
#ifndef MMDOC_FILE_SYSTEM_H_
#define MMDOC_FILE_SYSTEM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mmdoc/status.h"

namespace mmdoc {

// What File::Map allows.
enum class MapMode { kReadOnly, kReadWrite };
// What FileSystem::Open does: kExisting and kCreate open read-write (kCreate
// makes a missing file); kReadOnly opens an existing file for reading only.
enum class OpenMode { kExisting, kCreate, kReadOnly };

class File {
 public:
  virtual ~File() = default;

  // Reads exactly n bytes at offset into buf; Corruption-free: a short read
  // (offset + n past the end of file) is an IOError naming the file.
  virtual Status ReadAt(uint64_t offset, void* buf, size_t n) = 0;
  // Writes n bytes at offset (extending the file if needed).
  virtual Status WriteAt(uint64_t offset, const void* buf, size_t n) = 0;
  // Writes the n buffers one after another from offset, as WriteAt of
  // their concatenation would (pwritev: one system call for many pages,
  // where each call costs more than copying a page). Into a stretch the
  // page cache does not hold, a write of many pages makes large folios
  // (Linux 6.x), and a later one-page write then dirties the whole folio:
  // see PrepareMappedRead. The default calls WriteAt for each buffer, so a
  // wrapper that watches WriteAt sees every buffer.
  struct Buffer {
    const void* data;
    size_t size;
  };
  virtual Status WriteGather(uint64_t offset, const Buffer* bufs, size_t n) {
    for (size_t i = 0; i < n; i++) {
      MMDOC_RETURN_IF_ERROR(WriteAt(offset, bufs[i].data, bufs[i].size));
      offset += bufs[i].size;
    }
    return Status::OK();
  }
  virtual Result<uint64_t> Size() = 0;
  virtual Status Truncate(uint64_t size) = 0;
  // Makes sure [offset, offset + length) is backed by disk blocks
  // (posix_fallocate; the file grows when it ends before), so a later write
  // through the map cannot fail with SIGBUS on a full disk: a hole in a
  // sparse copy is allocated too. Returns Full when the disk is full; the
  // file's size is then unchanged. Never shrinks the file.
  virtual Status Allocate(uint64_t offset, uint64_t length) = 0;
  // fdatasync: data written with WriteAt or through a writable map, and the
  // file size, reach the disk before this returns.
  virtual Status Sync() = 0;
  // fsync: like Sync, and all of the file's metadata too (timestamps). Used
  // by the sync micro-benchmark to compare with Sync (fdatasync).
  virtual Status SyncAll() = 0;

  // Maps [0, length) of the file. length may exceed the file size (address
  // space is reserved; touching pages past end of file is the caller's bug).
  // kReadOnly gives PROT_READ, kReadWrite PROT_READ|PROT_WRITE; both
  // MAP_SHARED, so writes through the map land in the OS page cache.
  virtual Result<uint8_t*> Map(uint64_t length, MapMode mode) = 0;
  virtual Status Unmap(uint8_t* addr, uint64_t length) = 0;
  // msync(MS_SYNC) of [offset, offset+length) of a mapping made by Map.
  // addr is the base returned by Map; offset/length need no alignment.
  virtual Status MapSync(uint8_t* addr, uint64_t offset, uint64_t length) = 0;
  // Drops this process's page-table entries for a mapping made by Map
  // (madvise MADV_DONTNEED on a MAP_SHARED file mapping): the data stay in
  // the page cache, dirty pages stay dirty, and a later touch faults the
  // page back in. The pager calls it on a map it has replaced, so pages
  // reached through both the old and the new map are not resident twice in
  // the process (and not counted twice in its RSS); the log on the pages
  // behind its head before their writeback, which then has no entry to
  // write-protect (one TLB shootdown per page to every core running the
  // process). A hint: the default does nothing.
  virtual Status DropMappedPages(uint8_t* /*addr*/, uint64_t /*length*/) { return Status::OK(); }
  // Makes the pages of a writable mapping made by Map writable in this
  // process now, in one call (madvise MADV_POPULATE_WRITE, Linux 5.14+), so
  // that the stores that follow do not fault page by page. The data do not
  // change; the pages become dirty. The log calls it on the stretch ahead of
  // its head. A hint: the default, and a kernel without it, do nothing.
  virtual Status PrepareMappedWrite(uint8_t* /*addr*/, uint64_t /*length*/) { return Status::OK(); }
  // Which `unit`-byte pieces of [addr, addr + length) of a mapping made by
  // Map the page cache holds (mincore): (*resident)[i] for the i-th piece,
  // true when it holds every OS page the piece touches. A hint: the default
  // says none, and nothing may rely on a page staying resident.
  virtual Status ResidentPages(uint8_t* /*addr*/, uint64_t length, uint64_t unit,
                               std::vector<bool>* resident) {
    resident->assign(static_cast<size_t>((length + unit - 1) / unit), false);
    return Status::OK();
  }
  // Brings the pages of [addr, addr + length) of a mapping made by Map into
  // the page cache now (madvise MADV_POPULATE_READ, Linux 5.14+), reading
  // what the disk holds there. Under AdviseRandomAccess each page gets a
  // single-page folio, where a write of many pages into uncached file would
  // make large ones (see WriteGather). A hint: the default, and a kernel
  // without it, do nothing.
  virtual Status PrepareMappedRead(uint8_t* /*addr*/, uint64_t /*length*/) { return Status::OK(); }
  // Tells the OS that a mapping made by Map, and the file's reads, are at
  // random (madvise MADV_RANDOM, posix_fadvise POSIX_FADV_RANDOM): no
  // readahead, so the page cache holds the file in single pages instead of
  // large folios. The kernel tracks
  // dirtiness per folio: on Linux 6.18/ext4 here, writing one 4 KiB page
  // through a map of large folios marked 64 or more pages around it dirty
  // (the process's write_bytes; a dirty folio is written back whole). A hint: the default does
  // nothing.
  virtual Status AdviseRandomAccess(uint8_t* /*addr*/, uint64_t /*length*/) { return Status::OK(); }
  // Starts writing the dirty pages of [offset, offset + length) back to
  // disk and returns without waiting (sync_file_range with
  // SYNC_FILE_RANGE_WRITE): nothing becomes durable, but a later Sync has
  // less left to write. The log calls it behind its head so that the sync
  // at a wrap does not stall a commit on a whole lap of records. A hint:
  // the default does nothing.
  virtual Status StartWriteback(uint64_t /*offset*/, uint64_t /*length*/) { return Status::OK(); }

  // Takes an exclusive lock on the file (flock on this descriptor), held
  // until the File is destroyed. Busy, naming the path, when another holder
  // (another process, or another File of this one) has it.
  virtual Status TryLock() = 0;
  // Takes a shared lock (flock LOCK_SH): held with other shared holders,
  // never with an exclusive one. Busy when one holds the file exclusively.
  // A read-only open takes it. The default takes the exclusive lock, which
  // is safe, only not shared.
  virtual Status TryLockShared() { return TryLock(); }
  // Whether `path` names this file now (same device and inode): false when
  // it was renamed over, replaced or removed since it was opened.
  virtual Result<bool> IsAt(const std::string& path) = 0;

  virtual const std::string& path() const = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Opens path read-write; with kCreate, creates it (mode 0644) when it
  // does not exist; with kReadOnly, for reading only (its File's writes
  // fail, and only MapMode::kReadOnly maps it). NotFound when it does not
  // exist and mode is not kCreate; InvalidArgument when path is a
  // directory; IOError otherwise.
  virtual Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) = 0;
  // Creates `path` holding the n bytes at data, atomically and durably:
  // after a crash at any point the path either does not exist or holds all
  // of them (written and synced under another name, then linked, then the
  // directory synced). AlreadyExists when the path exists; Full on ENOSPC,
  // leaving nothing behind.
  virtual Status CreateExclusive(const std::string& path, const void* data, size_t n) = 0;
  virtual bool Exists(const std::string& path) = 0;
  virtual Status Remove(const std::string& path) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // fsync of the directory holding path, so a create or rename is durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // Where a database named `path` lives: the file a symbolic link at path
  // names (so that its log, and a compaction's rename, go beside that file,
  // not the link), else path itself, made absolute (a later chdir does not
  // move the database). NotFound naming the link when it names nothing.
  // The default takes every path as it is.
  virtual Result<std::string> Resolve(const std::string& path) { return path; }
  // Gives `path` the permission bits, owner and group of `like` (a
  // compaction's copy takes those of the file it replaces); the owner is
  // kept where the process may not give it away. OK when `like` does not
  // exist. The default does nothing.
  virtual Status MatchAccess(const std::string& /*like*/, const std::string& /*path*/) {
    return Status::OK();
  }

  // The process-wide POSIX file system. Never deleted.
  static FileSystem* Default();
};

}  // namespace mmdoc

#endif  // MMDOC_FILE_SYSTEM_H_
