#include "tests/support/fault_fs.h"

#include <algorithm>
#include <cstring>

namespace mmdoc::test {

using storage::File;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kSector = 512;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status ReadAll(File* f, std::string* out) {
  Result<uint64_t> size = f->Size();
  if (!size.ok()) return size.status();
  out->assign(*size, '\0');
  if (*size == 0) return Status::OK();
  return f->ReadAt(0, out->data(), *size);
}

}  // namespace

class FaultFileSystem::FaultFile final : public File {
 public:
  FaultFile(FaultFileSystem* fs, std::unique_ptr<File> real)
      : fs_(fs), real_(std::move(real)) {}

  Status ReadAt(uint64_t offset, void* buf, size_t n) override {
    return real_->ReadAt(offset, buf, n);
  }
  Status WriteAt(uint64_t offset, const void* buf, size_t n) override {
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kWrite, path()));
    return real_->WriteAt(offset, buf, n);
  }
  Result<uint64_t> Size() override { return real_->Size(); }
  Status Truncate(uint64_t size) override { return real_->Truncate(size); }
  Status Allocate(uint64_t size) override {
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kAllocate, path()));
    return real_->Allocate(size);
  }
  Status Sync() override {
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kSync, path()));
    MMDOC_RETURN_IF_ERROR(real_->Sync());
    fs_->Capture(real_.get(), 0, UINT64_MAX);
    return Status::OK();
  }
  Status SyncAll() override {
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kSync, path()));
    MMDOC_RETURN_IF_ERROR(real_->SyncAll());
    fs_->Capture(real_.get(), 0, UINT64_MAX);
    return Status::OK();
  }
  Result<uint8_t*> Map(uint64_t length, bool writable) override {
    return real_->Map(length, writable);
  }
  Status Unmap(uint8_t* addr, uint64_t length) override {
    return real_->Unmap(addr, length);
  }
  Status DropMappedPages(uint8_t* addr, uint64_t length) override {
    return real_->DropMappedPages(addr, length);
  }
  Status AdviseRandomAccess(uint8_t* addr, uint64_t length) override {
    return real_->AdviseRandomAccess(addr, length);
  }
  Status MapSync(uint8_t* addr, uint64_t offset, uint64_t length) override {
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kMapSync, path()));
    MMDOC_RETURN_IF_ERROR(real_->MapSync(addr, offset, length));
    fs_->Capture(real_.get(), offset / kPage * kPage,
                 (offset + length + kPage - 1) / kPage * kPage);
    return Status::OK();
  }
  const std::string& path() const override { return real_->path(); }

 private:
  FaultFileSystem* const fs_;
  const std::unique_ptr<File> real_;
};

FaultFileSystem::FaultFileSystem(storage::FileSystem* base) : base_(base) {}
FaultFileSystem::~FaultFileSystem() = default;

void FaultFileSystem::FailNth(Op op, uint64_t n, int err,
                              const std::string& path_suffix) {
  std::lock_guard<std::mutex> l(mu_);
  rules_.push_back(Rule{op, n == 0 ? 1 : n, err, path_suffix});
}

void FaultFileSystem::FailAll(int err) {
  std::lock_guard<std::mutex> l(mu_);
  fail_all_ = true;
  fail_all_err_ = err;
}

void FaultFileSystem::ClearFaults() {
  std::lock_guard<std::mutex> l(mu_);
  rules_.clear();
  fail_all_ = false;
}

uint64_t FaultFileSystem::Count(Op op, const std::string& path_suffix) const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t n = 0;
  for (const auto& [key, count] : counts_) {
    if (key.first == static_cast<int>(op) &&
        EndsWith(key.second, path_suffix)) {
      n += count;
    }
  }
  return n;
}

uint64_t FaultFileSystem::injected() const {
  std::lock_guard<std::mutex> l(mu_);
  return injected_;
}

Status FaultFileSystem::MaybeFail(Op op, const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  counts_[{static_cast<int>(op), path}]++;
  int err = 0;
  if (fail_all_) {
    err = fail_all_err_;
  } else {
    for (auto it = rules_.begin(); it != rules_.end(); ++it) {
      if (it->op != op || !EndsWith(path, it->suffix)) continue;
      if (--it->remaining == 0) {
        err = it->err;
        rules_.erase(it);
        break;
      }
    }
  }
  if (err == 0) return Status::OK();
  injected_++;
  static const char* kNames[] = {"write", "sync", "msync", "allocate"};
  std::string what = std::string("injected ") + kNames[static_cast<int>(op)] +
                     " failure: " + std::strerror(err);
  if (err == ENOSPC) return Status::Full(path, what);
  return Status::IOError(path, what);
}

void FaultFileSystem::Capture(File* f, uint64_t begin, uint64_t end) {
  std::string content;
  if (!ReadAll(f, &content).ok()) return;
  std::lock_guard<std::mutex> l(mu_);
  FileState& st = files_[f->path()];
  st.synced = true;
  if (end == UINT64_MAX) {
    st.durable = std::move(content);
    return;
  }
  end = std::min<uint64_t>(end, content.size());
  if (begin >= end) return;
  if (st.durable.size() < end) st.durable.resize(end, '\0');
  std::memcpy(&st.durable[begin], content.data() + begin, end - begin);
}

void FaultFileSystem::SimulatePowerLoss(std::mt19937_64& rng) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [path, st] : files_) {
    auto opened = base_->Open(path, /*create=*/false);
    if (!opened.ok()) continue;
    File* f = opened.value().get();
    std::string cur;
    if (!ReadAll(f, &cur).ok()) continue;
    std::string result;
    if (!st.synced) {
      result = st.durable;
    } else {
      const std::string& old = st.durable;
      uint64_t size = cur.size();
      if (cur.size() != old.size() && rng() % 2 == 0) size = old.size();
      result.assign(size, '\0');
      for (uint64_t p = 0; p < size; p += kPage) {
        const uint64_t n = std::min(kPage, size - p);
        auto byte_new = [&](uint64_t i) {
          return i < cur.size() ? cur[i] : '\0';
        };
        auto byte_old = [&](uint64_t i) {
          return i < old.size() ? old[i] : '\0';
        };
        bool differs = false;
        for (uint64_t i = p; i < p + n && !differs; i++) {
          differs = byte_new(i) != byte_old(i);
        }
        uint64_t new_bytes;  // prefix of the page taken from the new content
        if (!differs) {
          new_bytes = n;
        } else {
          switch (rng() % 3) {
            case 0:
              new_bytes = n;
              break;  // written
            case 1:
              new_bytes = 0;
              break;  // reverted
            default:  // torn at a sector boundary
              new_bytes =
                  std::min(n, kSector * (1 + rng() % (kPage / kSector - 1)));
          }
        }
        for (uint64_t i = p; i < p + n; i++) {
          result[i] = i - p < new_bytes ? byte_new(i) : byte_old(i);
        }
      }
    }
    (void)f->Truncate(result.size());
    if (!result.empty()) (void)f->WriteAt(0, result.data(), result.size());
    (void)f->Sync();
    st.durable = std::move(result);
    st.synced = true;
  }
}

Result<std::unique_ptr<File>> FaultFileSystem::Open(const std::string& path,
                                                    bool create) {
  const bool existed = base_->Exists(path);
  auto real = base_->Open(path, create);
  if (!real.ok()) return real.status();
  std::lock_guard<std::mutex> l(mu_);
  if (files_.find(path) == files_.end()) {
    FileState& st = files_[path];
    if (existed) {
      (void)ReadAll(real.value().get(), &st.durable);
      st.synced = true;
    }
  }
  return std::unique_ptr<File>(new FaultFile(this, std::move(real.value())));
}

bool FaultFileSystem::Exists(const std::string& path) {
  return base_->Exists(path);
}

Status FaultFileSystem::Remove(const std::string& path) {
  MMDOC_RETURN_IF_ERROR(base_->Remove(path));
  std::lock_guard<std::mutex> l(mu_);
  files_.erase(path);
  return Status::OK();
}

Status FaultFileSystem::Rename(const std::string& from, const std::string& to) {
  MMDOC_RETURN_IF_ERROR(base_->Rename(from, to));
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(from);
  if (it != files_.end()) {
    files_[to] = std::move(it->second);
    files_.erase(it);
  }
  return Status::OK();
}

Status FaultFileSystem::SyncDir(const std::string& path) {
  return base_->SyncDir(path);
}

Result<std::unique_ptr<storage::FileSystem::Lock>> FaultFileSystem::LockFile(
    const std::string& path) {
  return base_->LockFile(path);
}

}  // namespace mmdoc::test
