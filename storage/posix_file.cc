// The POSIX FileSystem: the only place in mmdoc that makes file syscalls
// (open, pread, pwrite, pwritev, ftruncate, posix_fallocate, mmap, munmap,
// msync, madvise, mincore, fdatasync, fsync, flock, link, linkat, rename,
// unlink). See storage/file_system.h.
//
// Thread safety: PosixFile methods may be called concurrently for disjoint
// ranges (pread/pwrite/fdatasync are thread-safe); Map/Unmap/Truncate/
// Allocate are serialized by the caller.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>

#include "storage/file_system.h"

namespace mmdoc::storage {
namespace {

Status ErrnoStatus(const std::string& path, int err, const char* what) {
  std::string msg = std::string(what) + ": " + std::strerror(err);
  if (err == ENOSPC) return Status::Full(path, msg);
  if (err == ENOENT) return Status::NotFound(path, msg);
  return Status::IOError(path, msg);
}

// pwrite of all n bytes at offset, across short writes and EINTR.
Status WriteFully(int fd, const std::string& path, uint64_t offset, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t r = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(path, errno, "pwrite");
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

uint64_t OsPageSize() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// The descriptors and maps of the files open in this process, for a
// forked child to let go of. A child may not use its parent's databases
// (the engine refuses every call and never closes them), and what it
// inherited would keep the files' flock until it exits (a map holds its
// file open too): neither the parent's next open nor the child's own could
// lock them. Each descriptor slot holds (tag << 32) | fd, 0 when free, the
// tag telling registrations apart, so that a file closes only the
// descriptor it registered; each map slot an address and a length.
constexpr size_t kForkSlots = 1024;
std::atomic<uint64_t> fork_fds[kForkSlots];
std::atomic<void*> fork_map_addr[kForkSlots];
std::atomic<uint64_t> fork_map_len[kForkSlots];
std::atomic<uint32_t> fork_tags{0};

// pthread_atfork's child handler: atomics, mmap and close only. Each map
// becomes anonymous memory at the same address (a stale view reads zeros
// rather than faulting); then the descriptors close.
void LetGoOfInheritedFiles() {
  for (size_t i = 0; i < kForkSlots; i++) {
    void* const addr = fork_map_addr[i].exchange(nullptr);
    const uint64_t len = fork_map_len[i].load();
    if (addr != nullptr && len != 0) {
      (void)::mmap(addr, len, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    }
  }
  for (std::atomic<uint64_t>& slot : fork_fds) {
    const uint64_t v = slot.exchange(0);
    if (v != 0) ::close(static_cast<int>(v & 0xffffffffu));
  }
}

void InstallForkHandler() {
  static std::once_flag handler;
  std::call_once(handler, [] { (void)pthread_atfork(nullptr, nullptr, LetGoOfInheritedFiles); });
}

// Registers fd; its slot, or -1 when the table is full (a child then keeps
// that descriptor, as it would without the table).
int RegisterFd(int fd, uint64_t* tagged) {
  InstallForkHandler();
  const uint32_t tag = fork_tags.fetch_add(1, std::memory_order_relaxed) | 1u;  // never 0
  *tagged = (uint64_t{tag} << 32) | static_cast<uint32_t>(fd);
  for (size_t i = 0; i < kForkSlots; i++) {
    const size_t at = (tag + i) % kForkSlots;
    uint64_t free = 0;
    if (fork_fds[at].compare_exchange_strong(free, *tagged)) return static_cast<int>(at);
  }
  return -1;
}

// A map's first slot to try.
size_t MapSlot(const void* addr) { return reinterpret_cast<uintptr_t>(addr) / 4096 % kForkSlots; }

void RegisterMap(void* addr, uint64_t len) {
  InstallForkHandler();
  for (size_t i = 0; i < kForkSlots; i++) {
    const size_t at = (MapSlot(addr) + i) % kForkSlots;
    void* free = nullptr;
    if (fork_map_addr[at].compare_exchange_strong(free, addr)) {
      fork_map_len[at].store(len);
      return;
    }
  }
}

// Only the map's owner clears its slot, so the length goes first: a slot
// freed before its length was cleared could be taken by another map, whose
// length this would then clear.
void UnregisterMap(void* addr) {
  for (size_t i = 0; i < kForkSlots; i++) {
    const size_t at = (MapSlot(addr) + i) % kForkSlots;
    if (fork_map_addr[at].load() == addr) {
      fork_map_len[at].store(0);
      fork_map_addr[at].store(nullptr);
      return;
    }
  }
}

class PosixFile final : public File {
 public:
  PosixFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd), fork_slot_(RegisterFd(fd, &tagged_)) {}
  ~PosixFile() override {
    if (fork_slot_ >= 0) {
      uint64_t mine = tagged_;
      // Already closed in a forked child (LetGoOfInheritedFiles).
      if (!fork_fds[fork_slot_].compare_exchange_strong(mine, 0)) return;
    }
    ::close(fd_);
  }

  Status ReadAt(uint64_t offset, void* buf, size_t n) override {
    auto* p = static_cast<uint8_t*>(buf);
    while (n > 0) {
      ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(path_, errno, "pread");
      }
      if (r == 0) {
        return Status::IOError(path_, "pread: short read at offset " + std::to_string(offset));
      }
      p += r;
      n -= static_cast<size_t>(r);
      offset += static_cast<uint64_t>(r);
    }
    return Status::OK();
  }

  Status WriteAt(uint64_t offset, const void* buf, size_t n) override {
    return WriteFully(fd_, path_, offset, buf, n);
  }

  Status WriteGather(uint64_t offset, const Buffer* bufs, size_t n) override {
    // bufs[i] from byte `skip` on is still to write; up to IOV_MAX a call.
    size_t i = 0;
    size_t skip = 0;
    iovec iov[128];
    while (i < n) {
      const int count = static_cast<int>(std::min<size_t>({n - i, std::size(iov), IOV_MAX}));
      for (int k = 0; k < count; k++) {
        const size_t off = k == 0 ? skip : 0;
        iov[k].iov_base = const_cast<uint8_t*>(static_cast<const uint8_t*>(bufs[i + k].data) + off);
        iov[k].iov_len = bufs[i + k].size - off;
      }
      ssize_t r = ::pwritev(fd_, iov, count, static_cast<off_t>(offset));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(path_, errno, "pwritev");
      }
      if (r == 0) return Status::IOError(path_, "pwritev: wrote nothing");
      offset += static_cast<uint64_t>(r);
      // Past the buffers written whole; a short write resumes inside one.
      auto left = static_cast<size_t>(r);
      while (i < n && left >= bufs[i].size - skip) {
        left -= bufs[i].size - skip;
        skip = 0;
        i++;
      }
      skip += left;
    }
    return Status::OK();
  }

  Result<uint64_t> Size() override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return ErrnoStatus(path_, errno, "fstat");
    return static_cast<uint64_t>(st.st_size);
  }

  Status Truncate(uint64_t size) override {
    while (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      if (errno != EINTR) return ErrnoStatus(path_, errno, "ftruncate");
    }
    return Status::OK();
  }

  Status Allocate(uint64_t offset, uint64_t length) override {
    if (length == 0) return Status::OK();
    Result<uint64_t> before = Size();
    if (!before.ok()) return before.status();
    int err;
    do {
      err = ::posix_fallocate(fd_, static_cast<off_t>(offset), static_cast<off_t>(length));
    } while (err == EINTR);
    if (err != 0) {
      // A partly successful allocation may have grown the file.
      Result<uint64_t> after = Size();
      if (after.ok() && *after > *before) (void)Truncate(*before);
      return ErrnoStatus(path_, err, "posix_fallocate");
    }
    return Status::OK();
  }

  Status Sync() override {
    while (::fdatasync(fd_) != 0) {
      if (errno != EINTR) return ErrnoStatus(path_, errno, "fdatasync");
    }
    return Status::OK();
  }

  Status SyncAll() override {
    while (::fsync(fd_) != 0) {
      if (errno != EINTR) return ErrnoStatus(path_, errno, "fsync");
    }
    return Status::OK();
  }

  Result<uint8_t*> Map(uint64_t length, MapMode mode) override {
    int prot = PROT_READ | (mode == MapMode::kReadWrite ? PROT_WRITE : 0);
    void* p = ::mmap(nullptr, length, prot, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return ErrnoStatus(path_, errno, "mmap");
    RegisterMap(p, length);
    return static_cast<uint8_t*>(p);
  }

  Status Unmap(uint8_t* addr, uint64_t length) override {
    UnregisterMap(addr);
    if (::munmap(addr, length) != 0) return ErrnoStatus(path_, errno, "munmap");
    return Status::OK();
  }

  Status MapSync(uint8_t* addr, uint64_t offset, uint64_t length) override {
    const uint64_t kOsPage = OsPageSize();
    uint64_t begin = offset / kOsPage * kOsPage;
    uint64_t end = offset + length;
    if (end == begin) return Status::OK();
    if (::msync(addr + begin, end - begin, MS_SYNC) != 0) {
      return ErrnoStatus(path_, errno, "msync");
    }
    return Status::OK();
  }

  Status DropMappedPages(uint8_t* addr, uint64_t length) override {
    return Advise(addr, length, MADV_DONTNEED);
  }

  Status PrepareMappedWrite(uint8_t* addr, uint64_t length) override {
#ifdef MADV_POPULATE_WRITE
    return Advise(addr, length, MADV_POPULATE_WRITE);
#else
    (void)addr;
    (void)length;
    return Status::OK();
#endif
  }

  Status ResidentPages(uint8_t* addr, uint64_t length, uint64_t unit,
                       std::vector<bool>* resident) override {
    const uint64_t os = OsPageSize();
    // From the OS page that holds addr: `lead` bytes before it.
    const uint64_t lead = reinterpret_cast<uintptr_t>(addr) % os;
    std::vector<unsigned char> vec(static_cast<size_t>((lead + length + os - 1) / os));
    if (::mincore(addr - lead, lead + length, vec.data()) != 0) {
      return ErrnoStatus(path_, errno, "mincore");
    }
    resident->assign(static_cast<size_t>((length + unit - 1) / unit), true);
    for (size_t k = 0; k < vec.size(); k++) {
      if (vec[k] & 1) continue;
      // OS page k holds [from, to) of the range; every piece it touches is out.
      const uint64_t from = k * os > lead ? k * os - lead : 0;
      const uint64_t to = std::min<uint64_t>((k + 1) * os - lead, length);
      for (uint64_t i = from / unit; i * unit < to; i++) (*resident)[i] = false;
    }
    return Status::OK();
  }

  Status PrepareMappedRead(uint8_t* addr, uint64_t length) override {
#ifdef MADV_POPULATE_READ
    return Advise(addr, length, MADV_POPULATE_READ);
#else
    (void)addr;
    (void)length;
    return Status::OK();
#endif
  }

  Status AdviseRandomAccess(uint8_t* addr, uint64_t length) override {
    MMDOC_RETURN_IF_ERROR(Advise(addr, length, MADV_RANDOM));
    // ReadAt's readahead would make large folios too.
    int err = ::posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM);
    if (err != 0) return ErrnoStatus(path_, err, "posix_fadvise");
    return Status::OK();
  }

  Status StartWriteback(uint64_t offset, uint64_t length) override {
#ifdef SYNC_FILE_RANGE_WRITE
    if (::sync_file_range(fd_, static_cast<off_t>(offset), static_cast<off_t>(length),
                          SYNC_FILE_RANGE_WRITE) != 0) {
      return ErrnoStatus(path_, errno, "sync_file_range");
    }
#else
    (void)offset;
    (void)length;
#endif
    return Status::OK();
  }

  Status TryLock() override { return Lock(LOCK_EX); }
  Status TryLockShared() override { return Lock(LOCK_SH); }

  Status Lock(int how) {
    int r;
    do {
      r = ::flock(fd_, how | LOCK_NB);
    } while (r != 0 && errno == EINTR);
    if (r == 0) return Status::OK();
    if (errno == EWOULDBLOCK) {
      return Status::Busy(path_, "locked by another process or handle");
    }
    return ErrnoStatus(path_, errno, "flock");
  }

  Result<bool> IsAt(const std::string& path) override {
    struct stat mine, there;
    if (::fstat(fd_, &mine) != 0) return ErrnoStatus(path_, errno, "fstat");
    if (::stat(path.c_str(), &there) != 0) {
      if (errno == ENOENT) return false;
      return ErrnoStatus(path, errno, "stat");
    }
    return mine.st_dev == there.st_dev && mine.st_ino == there.st_ino;
  }

  const std::string& path() const override { return path_; }

 private:
  // madvise of the OS pages [addr, addr + length) touches.
  Status Advise(uint8_t* addr, uint64_t length, int advice) {
    const uint64_t lead = reinterpret_cast<uintptr_t>(addr) % OsPageSize();
    if (::madvise(addr - lead, lead + length, advice) != 0) {
      return ErrnoStatus(path_, errno, "madvise");
    }
    return Status::OK();
  }

  const std::string path_;
  const int fd_;
  uint64_t tagged_ = 0;
  const int fork_slot_;  // in fork_fds, or -1
};

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// A database's files never take descriptor 0, 1 or 2 (SQLite's rule too):
// in a program started with one of them closed, its printf or perror would
// write into the database. Moves such a descriptor above them.
int AboveStdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int err = errno;
  ::close(fd);
  errno = err;
  return high;
}

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    // O_NONBLOCK: a FIFO at the path would block the open until a writer
    // came; it is refused below instead. A regular file ignores the flag.
    int flags = (mode == OpenMode::kReadOnly ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK |
                (mode == OpenMode::kCreate ? O_CREAT : 0);
    int fd;
    do {
      fd = ::open(path.c_str(), flags, 0644);
    } while (fd < 0 && errno == EINTR);
    fd = AboveStdio(fd);
    if (fd < 0) {
      int err = errno;
      if (err == EISDIR) return Status::InvalidArgument(path, "is a directory");
      return ErrnoStatus(path, err, "open");
    }
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(path, err, "fstat");
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument(
          path, S_ISDIR(st.st_mode) ? "is a directory"
                                    : "is not a regular file (a device, FIFO or socket)");
    }
    if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0) {
      int err = errno;
      ::close(fd);
      return ErrnoStatus(path, err, "fcntl");
    }
    return std::unique_ptr<File>(new PosixFile(path, fd));
  }

  Status CreateExclusive(const std::string& path, const void* data, size_t n) override {
    const std::string dir = DirName(path);
    // An unnamed file (O_TMPFILE) leaves nothing behind after a crash; where
    // the file system has none, a uniquely named one is used instead.
    std::string tmp;
    int fd = AboveStdio(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
    if (fd < 0) {
      if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
        return ErrnoStatus(path, errno,
                           errno == ENOENT ? "create (its directory does not exist)" : "create");
      }
      std::random_device rd;
      tmp = path + ".creating-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
      fd = AboveStdio(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
      if (fd < 0) return ErrnoStatus(tmp, errno, "open");
    }
    Status s = WriteFully(fd, path, 0, data, n);
    if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus(path, errno, "fsync");
    if (s.ok()) {
      int r;
      if (tmp.empty()) {
        // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc works without it.
        r = ::linkat(fd, "", AT_FDCWD, path.c_str(), AT_EMPTY_PATH);
        if (r != 0 && errno != EEXIST) {
          const std::string self = "/proc/self/fd/" + std::to_string(fd);
          r = ::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW);
        }
      } else {
        r = ::link(tmp.c_str(), path.c_str());
      }
      if (r != 0) {
        s = errno == EEXIST ? Status::AlreadyExists(path, "exists")
                            : ErrnoStatus(path, errno, "link");
      }
    }
    ::close(fd);
    if (!tmp.empty()) (void)::unlink(tmp.c_str());
    if (!s.ok()) return s;
    return SyncDir(path);
  }

  bool Exists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  Result<std::string> Resolve(const std::string& path) override {
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      if (path.empty() || path[0] == '/') return path;
      // Absolute, so that the process changing its directory later does
      // not look like the database moving (nor compact beside another).
      std::error_code ec;
      std::filesystem::path abs = std::filesystem::absolute(path, ec);
      if (ec) return ErrnoStatus(path, ec.value(), "getcwd");
      return abs.string();
    }
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) {
      if (errno == ENOENT) {
        return Status::NotFound(path, "a symbolic link to a file that does not exist");
      }
      return ErrnoStatus(path, errno, "realpath");
    }
    std::string resolved(real);
    std::free(real);
    return resolved;
  }

  Status MatchAccess(const std::string& like, const std::string& path) override {
    struct stat st;
    if (::stat(like.c_str(), &st) != 0) {
      if (errno == ENOENT) return Status::OK();
      return ErrnoStatus(like, errno, "stat");
    }
    // The owner first: chown may clear set-id bits that chmod then restores.
    if (::chown(path.c_str(), st.st_uid, st.st_gid) != 0 && errno != EPERM)
      return ErrnoStatus(path, errno, "chown");
    if (::chmod(path.c_str(), st.st_mode & 07777) != 0) return ErrnoStatus(path, errno, "chmod");
    return Status::OK();
  }

  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus(path, errno, "unlink");
    return Status::OK();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(from, errno, ("rename to " + to).c_str());
    }
    return Status::OK();
  }

  Status SyncDir(const std::string& path) override {
    std::string dir = DirName(path);
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(dir, errno, "open directory");
    Status s;
    while (::fsync(fd) != 0) {
      if (errno != EINTR) {
        s = ErrnoStatus(dir, errno, "fsync directory");
        break;
      }
    }
    ::close(fd);
    return s;
  }
};

}  // namespace
}  // namespace mmdoc::storage

namespace mmdoc {

FileSystem* FileSystem::Default() {
  static FileSystem* fs = new storage::PosixFileSystem();
  return fs;
}

}  // namespace mmdoc
