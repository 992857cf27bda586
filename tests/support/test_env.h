// Test helpers shared by every test folder: temporary directories, the size
// of randomized tests and their seeds.
//
//   MMDOC_TEST_SCALE  multiplies the size of randomized, crash and fault
//                     tests. Default 1 (the CI size, which still finds
//                     bugs); use 10 or more for deep runs.
//   MMDOC_TEST_SEED   fixes the seed of randomized tests (they print the seed
//                     they used, so a failure replays).
//   MMDOC_WRITE_BUFFER read by the library itself: the write buffer of every
//                     database opened with the default size (0: none).
#ifndef MMDOC_TESTS_SUPPORT_TEST_ENV_H_
#define MMDOC_TESTS_SUPPORT_TEST_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mmdoc::test {

// Whether this build runs under ASan, or TSan; tests that need more time,
// memory or address space than a sanitizer leaves shrink or skip.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif
#else
constexpr bool kTsan = false;
#endif
constexpr bool kSanitized = kAsan || kTsan;

// MMDOC_TEST_SCALE, at least 1.
uint64_t Scale();
// MMDOC_TEST_SEED when set, else a fresh random seed. Prints
// "seed for <what>: N (replay with MMDOC_TEST_SEED=N)" to stderr.
uint64_t Seed(const std::string& what);
// The write buffer a database opened with the default Options gets:
// Options::write_buffer_size's default, or MMDOC_WRITE_BUFFER's size.
uint64_t DefaultWriteBuffer();

// A fresh empty directory under $TMPDIR (or /tmp), removed with everything in
// it when the object is destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path() + "/" + name
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A fresh empty directory in /dev/shm (tmpfs) when there is one, else a
// TempDir; removed when destroyed. For tests that simulate the disk with
// FaultFileSystem: their real files need no real syncs, so each run costs
// microseconds instead of the disk's fdatasync latency.
class RamDir {
 public:
  RamDir();
  ~RamDir();
  RamDir(const RamDir&) = delete;
  RamDir& operator=(const RamDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  std::unique_ptr<TempDir> fallback_;
};

// Directory holding the built binaries (MMDOC_BUILD_DIR, set by CTest).
std::string BuildDir();

// Starts the built `mmdoc` tool with `args`, stdin from file `in`, stdout
// and stderr to files `out` and `err` (created or truncated); returns its
// pid (waitpid it), or -1 when fork fails.
int StartTool(const std::vector<std::string>& args, const std::string& in, const std::string& out,
              const std::string& err);

}  // namespace mmdoc::test

#endif  // MMDOC_TESTS_SUPPORT_TEST_ENV_H_
