// FileWrapper and FileSystemWrapper: a storage::File and a storage::FileSystem
// that forward every call to another one, so a test's file system overrides
// only the calls it watches or breaks (as LevelDB's EnvWrapper does).
// WriteGather, ResidentPages and PrepareMappedRead are left to File's
// defaults: every page then goes through WriteAt, where a wrapper sees it.
#ifndef MMDOC_TESTS_SUPPORT_FS_WRAPPER_H_
#define MMDOC_TESTS_SUPPORT_FS_WRAPPER_H_

#include <memory>
#include <string>
#include <utility>

#include "storage/file_system.h"

namespace mmdoc::test {

class FileWrapper : public storage::File {
 public:
  explicit FileWrapper(std::unique_ptr<storage::File> real) : real_(std::move(real)) {}

  Status ReadAt(uint64_t offset, void* buf, size_t n) override {
    return real_->ReadAt(offset, buf, n);
  }
  Status WriteAt(uint64_t offset, const void* buf, size_t n) override {
    return real_->WriteAt(offset, buf, n);
  }
  Result<uint64_t> Size() override { return real_->Size(); }
  Status Truncate(uint64_t size) override { return real_->Truncate(size); }
  Status Allocate(uint64_t offset, uint64_t length) override {
    return real_->Allocate(offset, length);
  }
  Status Sync() override { return real_->Sync(); }
  Status SyncAll() override { return real_->SyncAll(); }
  Result<uint8_t*> Map(uint64_t length, MapMode mode) override { return real_->Map(length, mode); }
  Status Unmap(uint8_t* addr, uint64_t length) override { return real_->Unmap(addr, length); }
  Status MapSync(uint8_t* addr, uint64_t offset, uint64_t length) override {
    return real_->MapSync(addr, offset, length);
  }
  Status DropMappedPages(uint8_t* addr, uint64_t length) override {
    return real_->DropMappedPages(addr, length);
  }
  Status PrepareMappedWrite(uint8_t* addr, uint64_t length) override {
    return real_->PrepareMappedWrite(addr, length);
  }
  Status AdviseRandomAccess(uint8_t* addr, uint64_t length) override {
    return real_->AdviseRandomAccess(addr, length);
  }
  Status StartWriteback(uint64_t offset, uint64_t length) override {
    return real_->StartWriteback(offset, length);
  }
  Status TryLock() override { return real_->TryLock(); }
  Status TryLockShared() override { return real_->TryLockShared(); }
  Result<bool> IsAt(const std::string& path) override { return real_->IsAt(path); }
  const std::string& path() const override { return real_->path(); }

 protected:
  storage::File* real() { return real_.get(); }

 private:
  const std::unique_ptr<storage::File> real_;
};

class FileSystemWrapper : public storage::FileSystem {
 public:
  explicit FileSystemWrapper(storage::FileSystem* base = storage::FileSystem::Default())
      : base_(base) {}

  Result<std::unique_ptr<storage::File>> Open(const std::string& path, OpenMode mode) override {
    return base_->Open(path, mode);
  }
  Status CreateExclusive(const std::string& path, const void* data, size_t n) override {
    return base_->CreateExclusive(path, data, n);
  }
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status Remove(const std::string& path) override { return base_->Remove(path); }
  Status Rename(const std::string& from, const std::string& to) override {
    return base_->Rename(from, to);
  }
  Status SyncDir(const std::string& path) override { return base_->SyncDir(path); }
  Result<std::string> Resolve(const std::string& path) override { return base_->Resolve(path); }
  Status MatchAccess(const std::string& like, const std::string& path) override {
    return base_->MatchAccess(like, path);
  }

 protected:
  storage::FileSystem* base() const { return base_; }

 private:
  storage::FileSystem* const base_;
};

}  // namespace mmdoc::test

#endif  // MMDOC_TESTS_SUPPORT_FS_WRAPPER_H_
