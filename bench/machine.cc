#include "bench/machine.h"

#include <stdlib.h>
#include <sys/utsname.h>

#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace mmdoc::bench {

MachineInfo DescribeMachine(const std::string& dir) {
  MachineInfo m;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) m.cpu = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  m.cores = static_cast<int>(std::thread::hardware_concurrency());
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemTotal:", 0) == 0) {
      m.memory_bytes = std::stoull(line.substr(9)) * 1024;
      break;
    }
  }
  struct utsname u;
  if (uname(&u) == 0) m.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;

  // The longest mount point that is a prefix of the data directory.
  char resolved[PATH_MAX];
  std::string path = realpath(dir.c_str(), resolved) != nullptr ? resolved : dir;
  std::ifstream mounts("/proc/self/mounts");
  size_t best = 0;
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream in(line);
    std::string dev, point, type, options;
    if (!(in >> dev >> point >> type >> options)) continue;
    bool prefix = path.compare(0, point.size(), point) == 0 &&
                  (point == "/" || path.size() == point.size() || path[point.size()] == '/');
    if (prefix && point.size() >= best) {
      best = point.size();
      m.mount_device = dev;
      m.mount_point = point;
      m.filesystem = type;
      m.mount_options = options;
    }
  }
  return m;
}

double MeasureMemoryReadBandwidth(uint64_t bytes) {
  size_t words = bytes / sizeof(uint64_t);
  std::vector<uint64_t> buf(words);
  for (size_t i = 0; i < words; ++i) buf[i] = i;
  double best = 0;
  volatile uint64_t sink = 0;
  for (int round = 0; round < 3; ++round) {
    auto start = std::chrono::steady_clock::now();
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= words; i += 4) {
      a += buf[i];
      b += buf[i + 1];
      c += buf[i + 2];
      d += buf[i + 3];
    }
    sink = sink + a + b + c + d;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (secs > 0) best = std::max(best, static_cast<double>(bytes) / secs / 1e9);
  }
  return best;
}

namespace {

// A "Key:   123 kB" line of /proc/self/status, in bytes.
uint64_t StatusBytes(const char* key) {
  std::ifstream status("/proc/self/status");
  const size_t n = std::strlen(key);
  for (std::string line; std::getline(status, line);) {
    if (line.compare(0, n, key) == 0 && line.size() > n && line[n] == ':')
      return std::strtoull(line.c_str() + n + 1, nullptr, 10) * 1024;
  }
  return 0;
}

}  // namespace

uint64_t ResidentBytes() { return StatusBytes("VmRSS"); }
uint64_t PeakResidentBytes() { return StatusBytes("VmHWM"); }

namespace {

// /proc/<pid>/io's two counters; false when unreadable.
bool ReadProcIo(const std::string& path, IoCounters* out) {
  std::ifstream io(path);
  bool write = false, cancelled = false;
  for (std::string line; std::getline(io, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    const uint64_t value = std::strtoull(line.c_str() + colon + 1, nullptr, 10);
    if (key == "write_bytes") {
      out->write_bytes = value;
      write = true;
    } else if (key == "cancelled_write_bytes") {
      out->cancelled_write_bytes = value;
      cancelled = true;
    }
  }
  return write && cancelled;
}

// The trees WatchIo watches, and every process of them seen so far.
struct Watched {
  std::mutex mu;
  std::set<int> roots;
  std::map<int, IoCounters> last;  // pid -> counters as last read
  IoCounters retired;              // of pids since reused by another process
};
Watched& watched() {
  static Watched* w = new Watched;
  return *w;
}

// root and its descendants, from /proc/<pid>/task/<pid>/children.
void AddTree(int root, std::vector<int>* out) {
  out->push_back(root);
  std::ifstream children("/proc/" + std::to_string(root) + "/task/" + std::to_string(root) +
                         "/children");
  for (int child; children >> child;) AddTree(child, out);
}

// Reads every watched process now; the sum of all processes ever seen.
// REQUIRES: w.mu held.
IoCounters ReadWatchedLocked(Watched& w) {
  std::vector<int> pids;
  for (int root : w.roots) AddTree(root, &pids);
  for (int pid : pids) {
    IoCounters now;
    if (!ReadProcIo("/proc/" + std::to_string(pid) + "/io", &now)) continue;
    auto [it, fresh] = w.last.emplace(pid, now);
    if (fresh) continue;
    if (now.write_bytes < it->second.write_bytes ||
        now.cancelled_write_bytes < it->second.cancelled_write_bytes) {
      // The pid belongs to another process now.
      w.retired.write_bytes += it->second.write_bytes;
      w.retired.cancelled_write_bytes += it->second.cancelled_write_bytes;
    }
    it->second = now;
  }
  IoCounters sum = w.retired;
  for (const auto& [pid, c] : w.last) {
    sum.write_bytes += c.write_bytes;
    sum.cancelled_write_bytes += c.cancelled_write_bytes;
  }
  return sum;
}

}  // namespace

bool ReadIoCounters(IoCounters* out) {
  if (!ReadProcIo("/proc/self/io", out)) return false;
  Watched& w = watched();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.roots.empty() && w.last.empty()) return true;
  const IoCounters others = ReadWatchedLocked(w);
  out->write_bytes += others.write_bytes;
  out->cancelled_write_bytes += others.cancelled_write_bytes;
  return true;
}

void WatchIo(int root) {
  Watched& w = watched();
  std::lock_guard<std::mutex> lock(w.mu);
  w.roots.insert(root);
  (void)ReadWatchedLocked(w);
}

void UnwatchIo(int root) {
  Watched& w = watched();
  std::lock_guard<std::mutex> lock(w.mu);
  (void)ReadWatchedLocked(w);
  w.roots.erase(root);
}

bool ResetPeakResident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

}  // namespace mmdoc::bench
