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

class FaultFileSystem::FaultFile final : public FileWrapper {
 public:
  FaultFile(FaultFileSystem* fs, std::unique_ptr<File> real)
      : FileWrapper(std::move(real)), fs_(fs) {}

  Status WriteAt(uint64_t offset, const void* buf, size_t n) override {
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kWrite, path()));
    return real()->WriteAt(offset, buf, n);
  }
  Status Allocate(uint64_t offset, uint64_t length) override {
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kAllocate, path()));
    return real()->Allocate(offset, length);
  }
  Status Sync() override {
    std::lock_guard<std::mutex> l(fs_->sync_mu_);
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kSync, path()));
    MMDOC_RETURN_IF_ERROR(real()->Sync());
    fs_->Capture(real(), 0, UINT64_MAX);
    return Status::OK();
  }
  Status SyncAll() override {
    std::lock_guard<std::mutex> l(fs_->sync_mu_);
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kSync, path()));
    MMDOC_RETURN_IF_ERROR(real()->SyncAll());
    fs_->Capture(real(), 0, UINT64_MAX);
    return Status::OK();
  }
  Status MapSync(uint8_t* addr, uint64_t offset, uint64_t length) override {
    std::lock_guard<std::mutex> l(fs_->sync_mu_);
    MMDOC_RETURN_IF_ERROR(fs_->MaybeFail(Op::kMapSync, path()));
    MMDOC_RETURN_IF_ERROR(real()->MapSync(addr, offset, length));
    fs_->Capture(real(), offset / kPage * kPage, (offset + length + kPage - 1) / kPage * kPage);
    return Status::OK();
  }

 private:
  FaultFileSystem* const fs_;
};

FaultFileSystem::FaultFileSystem(storage::FileSystem* base) : FileSystemWrapper(base) {}
FaultFileSystem::~FaultFileSystem() = default;

void FaultFileSystem::FailNth(Op op, uint64_t n, int err, const std::string& path_suffix) {
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
    if (key.first == static_cast<int>(op) && EndsWith(key.second, path_suffix)) {
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
  std::string what =
      std::string("injected ") + kNames[static_cast<int>(op)] + " failure: " + std::strerror(err);
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
  // Directory changes not synced: a prefix survives, the rest is undone,
  // newest first.
  const size_t keep = dir_ops_.empty() ? 0 : rng() % (dir_ops_.size() + 1);
  for (size_t i = dir_ops_.size(); i > keep; i--) Undo(dir_ops_[i - 1]);
  dir_ops_.clear();
  for (auto& [path, st] : files_) {
    auto opened = base()->Open(path, OpenMode::kExisting);
    if (!opened.ok()) continue;
    File* f = opened.value().get();
    std::string cur;
    if (!ReadAll(f, &cur).ok()) continue;
    std::string result;
    const int never_synced = st.synced ? -1 : static_cast<int>(rng() % 3);
    if (never_synced == 0) {
      result.clear();  // nothing of it reached the disk
    } else if (never_synced == 1) {
      result.assign(cur.size(), '\0');  // its size did, its data did not
    } else {
      const std::string& old = st.durable;  // empty when never synced
      uint64_t size = cur.size();
      if (cur.size() != old.size() && rng() % 2 == 0) size = old.size();
      result.assign(size, '\0');
      for (uint64_t p = 0; p < size; p += kPage) {
        const uint64_t n = std::min(kPage, size - p);
        auto byte_new = [&](uint64_t i) { return i < cur.size() ? cur[i] : '\0'; };
        auto byte_old = [&](uint64_t i) { return i < old.size() ? old[i] : '\0'; };
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
              new_bytes = std::min(n, kSector * (1 + rng() % (kPage / kSector - 1)));
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

Result<std::unique_ptr<File>> FaultFileSystem::Open(const std::string& path, OpenMode mode) {
  const bool existed = base()->Exists(path);
  auto real = base()->Open(path, mode);
  if (!real.ok()) return real.status();
  std::lock_guard<std::mutex> l(mu_);
  if (files_.find(path) == files_.end()) {
    FileState& st = files_[path];
    if (existed) {
      (void)ReadAll(real.value().get(), &st.durable);
      st.synced = true;
    }
  }
  if (!existed) dir_ops_.push_back(DirOp{DirOp::kCreate, "", path});
  return std::unique_ptr<File>(new FaultFile(this, std::move(real.value())));
}

Status FaultFileSystem::CreateExclusive(const std::string& path, const void* data, size_t n) {
  MMDOC_RETURN_IF_ERROR(MaybeFail(Op::kWrite, path));
  MMDOC_RETURN_IF_ERROR(base()->CreateExclusive(path, data, n));
  std::lock_guard<std::mutex> l(mu_);
  FileState& st = files_[path];
  st.durable.assign(static_cast<const char*>(data), n);
  st.synced = true;
  return Status::OK();
}

// What a file holds durably: its tracked image, or (never opened here) its
// content as it is now.
FaultFileSystem::FileState FaultFileSystem::DurableState(const std::string& path) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(path);
    if (it != files_.end()) return it->second;
  }
  FileState st;
  auto f = base()->Open(path, OpenMode::kExisting);
  if (f.ok()) (void)ReadAll(f.value().get(), &st.durable);
  st.synced = true;
  return st;
}

Status FaultFileSystem::Remove(const std::string& path) {
  FileState old = DurableState(path);
  MMDOC_RETURN_IF_ERROR(base()->Remove(path));
  std::lock_guard<std::mutex> l(mu_);
  files_.erase(path);
  DirOp op{DirOp::kRemove, "", path};
  op.old_to = std::move(old);
  dir_ops_.push_back(std::move(op));
  return Status::OK();
}

Status FaultFileSystem::Rename(const std::string& from, const std::string& to) {
  const bool replaced = base()->Exists(to);
  FileState old_to;
  if (replaced) old_to = DurableState(to);
  MMDOC_RETURN_IF_ERROR(base()->Rename(from, to));
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(from);
  if (it != files_.end()) {
    files_[to] = std::move(it->second);
    files_.erase(it);
  }
  DirOp op{DirOp::kRename, from, to};
  op.replaced = replaced;
  op.old_to = std::move(old_to);
  dir_ops_.push_back(std::move(op));
  return Status::OK();
}

Status FaultFileSystem::SyncDir(const std::string& path) {
  MMDOC_RETURN_IF_ERROR(base()->SyncDir(path));
  std::lock_guard<std::mutex> l(mu_);
  dir_ops_.clear();  // tests keep their files in one directory
  return Status::OK();
}

void FaultFileSystem::Undo(const DirOp& op) {
  auto write_back = [this](const std::string& path, const FileState& st) {
    auto f = base()->Open(path, OpenMode::kCreate);
    if (!f.ok()) return;
    (void)f.value()->Truncate(0);
    if (!st.durable.empty()) (void)f.value()->WriteAt(0, st.durable.data(), st.durable.size());
    files_[path] = st;
    files_[path].synced = true;
  };
  switch (op.kind) {
    case DirOp::kCreate:
      (void)base()->Remove(op.to);
      files_.erase(op.to);
      break;
    case DirOp::kRemove:
      write_back(op.to, op.old_to);
      break;
    case DirOp::kRename: {
      if (base()->Exists(op.to)) (void)base()->Rename(op.to, op.from);
      auto it = files_.find(op.to);
      if (it != files_.end()) {
        files_[op.from] = std::move(it->second);
        files_.erase(op.to);
      }
      if (op.replaced) write_back(op.to, op.old_to);
      break;
    }
  }
}

}  // namespace mmdoc::test
