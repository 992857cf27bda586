// SmallDisk: a real full disk for tests, a small tmpfs mounted on a fresh
// directory. Mounting needs root, as CI runs; elsewhere ok() is false and
// MMDOC_NEED_DISK skips the test, saying so.
#ifndef MMDOC_TESTS_SUPPORT_SMALL_DISK_H_
#define MMDOC_TESTS_SUPPORT_SMALL_DISK_H_

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace mmdoc::test {

class SmallDisk {
 public:
  explicit SmallDisk(uint64_t bytes);  // a tmpfs of `bytes`
  ~SmallDisk();                        // unmounts and removes it
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  bool ok() const { return mounted_; }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Names in the directory.
  std::vector<std::string> List() const;
  // Writes a file until the disk is full, then frees `leave` bytes of it.
  void Fill(uint64_t leave = 0);
  void Unfill();  // removes that file

 private:
  std::string path_;
  bool mounted_ = false;
};

}  // namespace mmdoc::test

#define MMDOC_NEED_DISK(disk)                                      \
  if (!(disk).ok()) {                                              \
    WARN("skipped: cannot mount a small tmpfs here (needs root)"); \
    return;                                                        \
  }

#endif  // MMDOC_TESTS_SUPPORT_SMALL_DISK_H_
