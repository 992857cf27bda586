// mmdoc::test::FaultFileSystem: a storage::FileSystem for crash and fault
// tests. It wraps the POSIX file system (real files, usually in a
// test::TempDir) and adds two things:
//
// 1. Power-loss simulation. For every file it has opened it keeps the
//    "durable image": a copy of the file's content as of its last successful
//    Sync/SyncAll (the whole file) or MapSync (just the synced byte range,
//    rounded out to 4096-byte pages). Writes that were never synced -- with
//    WriteAt or through a writable map -- are only in the OS page cache.
//    SimulatePowerLoss(rng) then rewrites every file as a disk might leave
//    it after the power fails: each 4096-byte page that differs from the
//    durable image is, at random, kept as written, reverted to the durable
//    image, or torn (a random prefix of its 512-byte sectors new, the rest
//    old). When the size changed since the last sync, the file ends up with
//    either size. A file never synced since it was created ends up empty,
//    or at its size holding only zeros (a journal commit can make a new
//    file's size durable without its data, as ext4 does), or with some of
//    its pages. A file that already existed when this object first opened
//    it starts with its content as durable.
//    Directory entries follow ext4's ordered journal: creates, renames and
//    removes not yet made durable by SyncDir (or CreateExclusive, which
//    syncs) survive as a random prefix, in the order they were made; the
//    rest are undone.
//
//    Typical use:
//      test::FaultFileSystem fs;
//      opts.fs = &fs;
//      { auto p = Pager::Open(path, opts); ...commit...;
//        p->TEST_CrashOnClose(); }          // no checkpoint, no sync
//      std::mt19937_64 rng(seed);
//      fs.SimulatePowerLoss(rng);           // REQUIRES: all files closed
//      reopen (with fs or the default file system) and check.
//
// 2. Fault injection. FailNth(op, n, err, suffix) makes the n-th following
//    call of `op` (WriteAt, Sync/SyncAll, MapSync or Allocate) on a file
//    whose path ends with `suffix` ("" = any file) fail once with EIO
//    (Status::IOError) or ENOSPC (Status::Full); the failing call does
//    nothing (a failed Sync does not update the durable image). FailAll(err)
//    makes every later call of those four fail until ClearFaults().
//    Count(op, suffix) reports how many calls were made, failed or not.
//
// Reads, Size, Truncate, Map/Unmap, locks and Exists pass straight through.
//
// Thread safety: all methods are thread-safe (one internal mutex), so the
// group-commit and periodic-flush threads of a Pager may use it.
#ifndef MMDOC_TESTS_SUPPORT_FAULT_FS_H_
#define MMDOC_TESTS_SUPPORT_FAULT_FS_H_

#include <cerrno>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "storage/file_system.h"
#include "tests/support/fs_wrapper.h"

namespace mmdoc::test {

class FaultFileSystem final : public FileSystemWrapper {
 public:
  enum class Op { kWrite = 0, kSync = 1, kMapSync = 2, kAllocate = 3 };

  // `base` does the real I/O; not owned. Default: the POSIX file system.
  explicit FaultFileSystem(storage::FileSystem* base = storage::FileSystem::Default());
  ~FaultFileSystem() override;
  FaultFileSystem(const FaultFileSystem&) = delete;
  FaultFileSystem& operator=(const FaultFileSystem&) = delete;

  // --- fault injection ---
  // The n-th matching call from now (n = 1: the next one) fails once with
  // `err` (EIO or ENOSPC). Several rules may be armed at once.
  void FailNth(Op op, uint64_t n, int err = EIO, const std::string& path_suffix = "");
  // Every later WriteAt/Sync/MapSync/Allocate fails with `err`.
  void FailAll(int err = EIO);
  // Disarms FailNth rules and FailAll.
  void ClearFaults();
  // Calls of `op` on files whose path ends with `path_suffix` so far.
  uint64_t Count(Op op, const std::string& path_suffix = "") const;
  // Faults injected so far.
  uint64_t injected() const;

  // --- power loss ---
  // Rewrites every tracked file as described above; afterwards the result
  // is the durable image. REQUIRES: every File opened through this object
  // has been destroyed (and its maps unmapped).
  void SimulatePowerLoss(std::mt19937_64& rng);

  // --- storage::FileSystem ---
  Result<std::unique_ptr<storage::File>> Open(const std::string& path, OpenMode mode) override;
  Status CreateExclusive(const std::string& path, const void* data, size_t n) override;
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status SyncDir(const std::string& path) override;

 private:
  class FaultFile;
  struct FileState {
    std::string durable;  // content as of the last sync
    bool synced = false;  // synced (or pre-existing) at least once
  };
  // A directory change not yet durable, and what undoing it restores.
  struct DirOp {
    enum Kind { kCreate, kRename, kRemove } kind;
    std::string from, to;   // kCreate/kRemove: `to` only
    bool replaced = false;  // kRename: `to` existed and was replaced
    FileState old_to;       // kRename (replaced) and kRemove: what `to` held
  };
  // Undoes `op` on the real files and in files_. REQUIRES: mu_ held.
  void Undo(const DirOp& op);
  // The durable state of `path`, tracked or read now. REQUIRES: mu_ not held.
  FileState DurableState(const std::string& path);
  struct Rule {
    Op op;
    uint64_t remaining;
    int err;
    std::string suffix;
  };

  // Counts the call and returns the injected error, if any.
  Status MaybeFail(Op op, const std::string& path);
  // After a successful sync of [begin, end) of `f` (end = UINT64_MAX: the
  // whole file), copies that range of the real file into the durable image.
  void Capture(storage::File* f, uint64_t begin, uint64_t end);

  // Held across a sync and its Capture: syncs from two threads (a group
  // commit's and a writer's) would otherwise capture out of order, and an
  // image read before a newer sync could replace it (a disk never forgets
  // a completed sync).
  std::mutex sync_mu_;

  mutable std::mutex mu_;
  std::map<std::string, FileState> files_;
  std::vector<DirOp> dir_ops_;  // oldest first
  std::vector<Rule> rules_;
  bool fail_all_ = false;
  int fail_all_err_ = EIO;
  uint64_t injected_ = 0;
  std::map<std::pair<int, std::string>, uint64_t> counts_;
};

}  // namespace mmdoc::test

#endif  // MMDOC_TESTS_SUPPORT_FAULT_FS_H_
