#include "tests/support/small_disk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mmdoc::test {

SmallDisk::SmallDisk(uint64_t bytes) {
  char tmpl[] = "/tmp/mmdoc-disk-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return;
  path_ = tmpl;
  const std::string opts = "size=" + std::to_string(bytes);
  mounted_ = mount("tmpfs", path_.c_str(), "tmpfs", 0, opts.c_str()) == 0;
}

SmallDisk::~SmallDisk() {
  if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  if (!path_.empty()) rmdir(path_.c_str());
}

std::vector<std::string> SmallDisk::List() const {
  std::vector<std::string> names;
  if (DIR* d = opendir(path_.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  return names;
}

void SmallDisk::Fill(uint64_t leave) {
  const std::string filler = File("filler");
  int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  std::string block(1 << 16, 'f');
  off_t size = 0;
  for (;;) {
    ssize_t n = write(fd, block.data(), block.size());
    if (n <= 0) break;
    size += n;
  }
  const off_t keep = size > static_cast<off_t>(leave) ? size - static_cast<off_t>(leave) : 0;
  if (ftruncate(fd, keep) != 0) FAIL("ftruncate filler");
  close(fd);
}

void SmallDisk::Unfill() { std::remove(File("filler").c_str()); }

}  // namespace mmdoc::test
