// mmdoc-logprobe: what one small log append costs the committing thread,
// by how the record reaches the file (docs/write-path.md, "Batch 1: where
// the writer's time goes").
//
// A log of --mib MiB is preallocated and zero-filled as storage::Log does,
// then records of --record bytes are appended for --seconds; at the end of
// the file the log is synced and appends go on at the start (a wrap). The
// modes:
//
//   map         stores through the shared writable map, and every MiB the
//               appending thread starts the writeback of the whole pages
//               behind the head (File::StartWriteback): what Log::Append
//               did in kNone and kPeriodic before 2026-12-05;
//   map-zap     the same, but the pages are first dropped from the map
//               (File::DropMappedPages) so that the writeback has no
//               page-table entry to write-protect;
//   map-ahead   map-zap, and a store past the last stretch made writable
//               first makes the next 64 KiB writable in one call
//               (File::PrepareMappedWrite) instead of a fault per page:
//               what Log::Append does now;
//   map-nohint  the same stores, no writeback hint (the kernel's own
//               writeback, and the sync at each wrap);
//   map-helper  the same stores; a helper thread takes the hint every
//               256 KiB and keeps the next MiB ahead of the head writable
//               (File::PrepareMappedWrite), so the
//               appending thread neither makes the writeback's system call
//               nor takes a write fault on a page the writeback cleaned;
//   pwrite      File::WriteAt of each record, with the hint every MiB.
//
// A store to a page of a shared file map that the page cache holds clean
// (zero-filled, or written back) faults first; a writeback write-protects
// each page it cleans, a TLB shootdown to every core running the process.
// With --busy 1 a second thread spins meanwhile, as the merger runs beside
// the writer, so that the shootdowns have a core to reach.
//
// Reported per record: wall time, and the appending thread's user and
// system time and minor faults (getrusage RUSAGE_THREAD); per mode, the
// time of the syncs at wraps. Modes alternate for --rounds.
//
//   mmdoc-logprobe [--mib 64] [--record 256] [--seconds 3] [--rounds 3]
//                  [--busy 1] [--dir .]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/micro/proto_util.h"
#include "storage/file_system.h"

namespace {

using mmdoc::File;
using mmdoc::FileSystem;
using mmdoc::MapMode;
using mmdoc::OpenMode;

using Clock = std::chrono::steady_clock;
constexpr uint64_t kPage = 4096;
constexpr uint64_t kHintBytes = 1 << 20;          // Log's kLogWritebackBytes
constexpr uint64_t kHelperHintBytes = 256 << 10;  // map-helper's, finer
constexpr uint64_t kAheadBytes = 1 << 20;         // map-helper's window
constexpr uint64_t kAheadStoreBytes = 64 << 10;   // map-ahead's (Log's kLogPrefaultBytes)

struct Args {
  uint64_t mib = 64;
  uint64_t record = 256;
  double seconds = 3;
  int rounds = 3;
  bool busy = true;
  std::string dir = ".";
};

using mmdoc::proto::Check;

struct ThreadUsage {
  double user = 0, sys = 0;
  long minflt = 0;
};

ThreadUsage Usage() {
  rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return ThreadUsage{sec(ru.ru_utime), sec(ru.ru_stime), ru.ru_minflt};
}

// map-helper's thread: the writeback hint behind the head, and the pages
// ahead of it populated writable.
class Helper {
 public:
  Helper(File* file, uint8_t* base, uint64_t capacity)
      : file_(file), base_(base), capacity_(capacity), thread_([this] { Loop(); }) {}
  ~Helper() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  // Called by the appender: whole pages [from, to) are behind the head,
  // which is at `head`.
  void Kick(uint64_t from, uint64_t to, uint64_t head) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (pending_ && to_ == from) {
        to_ = to;
      } else {
        from_ = from;
        to_ = to;
      }
      head_ = head;
      pending_ = true;
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    uint64_t lo = 0, hi = 0;  // populated [lo, hi)
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return stop_ || pending_; });
      if (stop_) return;
      const uint64_t from = from_, to = to_, head = head_ / kPage * kPage;
      pending_ = false;
      l.unlock();
      if (to > from) (void)file_->StartWriteback(from, to - from);
      if (head < lo || head > hi) lo = hi = head;  // wrapped
      const uint64_t want = std::min(head + kAheadBytes, capacity_);
      if (want > hi) {
        (void)file_->PrepareMappedWrite(base_ + hi, want - hi);
        hi = want;
      }
      l.lock();
    }
  }

  File* const file_;
  uint8_t* const base_;
  const uint64_t capacity_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, pending_ = false;
  uint64_t from_ = 0, to_ = 0, head_ = 0;
  std::thread thread_;
};

struct Outcome {
  double records = 0;
  double wall_us = 0, user_us = 0, sys_us = 0, faults = 0;  // per record
  double wrap_sync_ms = 0;                                  // per wrap
};

Outcome RunMode(const std::string& mode, File* file, uint64_t capacity, const Args& a) {
  auto m = file->Map(capacity, MapMode::kReadWrite);
  Check(m.status(), "map the log");
  uint8_t* base = m.value();
  (void)file->AdviseRandomAccess(base, capacity);  // as Log::Map does
  // Every page clean in the page cache, as after a wrap's sync.
  Check(file->Sync(), "sync before the run");

  std::atomic<bool> stop{false};
  std::thread spinner;
  if (a.busy) {
    spinner = std::thread([&] {
      volatile uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
  }
  const bool via_map = mode != "pwrite";
  const bool hint = mode != "map-nohint";
  const bool ahead = mode == "map-ahead";
  const bool zap = mode == "map-zap" || ahead;
  std::unique_ptr<Helper> helper;
  if (mode == "map-helper") helper = std::make_unique<Helper>(file, base, capacity);
  const uint64_t hint_every = helper ? kHelperHintBytes : kHintBytes;

  std::vector<uint8_t> rec(a.record, 0x5a);
  uint64_t off = 0, hinted = 0, n = 0, wraps = 0, ahead_from = 0, ahead_to = 0;
  double wrap_us = 0;
  const ThreadUsage u0 = Usage();
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration<double>(a.seconds);
  while ((n & 255) != 0 || Clock::now() < until) {
    if (off + a.record > capacity) {
      const auto t0 = Clock::now();
      Check(file->Sync(), "sync at a wrap");
      wrap_us += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      off = hinted = 0;
      wraps++;
    }
    rec[0] = static_cast<uint8_t>(n);
    if (ahead && (off < ahead_from || off + a.record > ahead_to)) {
      ahead_from = off / kPage * kPage;
      ahead_to = std::max(off + a.record, std::min(ahead_from + kAheadStoreBytes, capacity));
      (void)file->PrepareMappedWrite(base + ahead_from, ahead_to - ahead_from);
    }
    if (via_map) {
      std::memcpy(base + off, rec.data(), rec.size());
    } else {
      Check(file->WriteAt(off, rec.data(), rec.size()), "pwrite");
    }
    off += a.record;
    n++;
    if (hint && off >= hinted + hint_every) {
      const uint64_t to = off / kPage * kPage;
      if (helper) {
        helper->Kick(hinted, to, off);
      } else if (zap) {
        (void)file->DropMappedPages(base + hinted, to - hinted);
        (void)file->StartWriteback(hinted, to - hinted);
      } else {
        (void)file->StartWriteback(hinted, to - hinted);
      }
      hinted = to;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const ThreadUsage u1 = Usage();
  helper.reset();
  stop.store(true);
  if (spinner.joinable()) spinner.join();
  Check(file->Unmap(base, capacity), "unmap");

  Outcome o;
  const double per = 1e6 / static_cast<double>(n);
  o.records = static_cast<double>(n);
  o.wall_us = secs * per;
  o.user_us = (u1.user - u0.user) * per;
  o.sys_us = (u1.sys - u0.sys) * per;
  o.faults = static_cast<double>(u1.minflt - u0.minflt) / static_cast<double>(n);
  o.wrap_sync_ms = wraps ? wrap_us / 1000.0 / static_cast<double>(wraps) : 0;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  mmdoc::proto::program = "mmdoc-logprobe";
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mib") {
      a.mib = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--record") {
      a.record = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--seconds") {
      a.seconds = std::atof(v.c_str());
    } else if (k == "--rounds") {
      a.rounds = std::atoi(v.c_str());
    } else if (k == "--busy") {
      a.busy = std::atoi(v.c_str()) != 0;
    } else if (k == "--dir") {
      a.dir = v;
    } else {
      std::fprintf(stderr, "mmdoc-logprobe: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.mib == 0 || a.record == 0 || a.record > (1u << 20) || a.seconds <= 0 || a.rounds <= 0) {
    std::fprintf(stderr, "mmdoc-logprobe: sizes must be positive (--record at most 1 MiB)\n");
    return 2;
  }
  const std::string path = a.dir + "/logprobe.log";
  FileSystem* fs = FileSystem::Default();
  if (fs->Exists(path)) Check(fs->Remove(path), "remove an old log");
  auto opened = fs->Open(path, OpenMode::kCreate);
  Check(opened.status(), "create the log");
  File* file = opened.value().get();
  const uint64_t capacity = a.mib << 20;
  {
    // Allocated, then zero-filled a page per write, as Log::Create does.
    Check(file->Allocate(0, capacity), "allocate");
    const std::vector<uint8_t> zeros(kPage, 0);
    for (uint64_t o = 0; o < capacity; o += kPage)
      Check(file->WriteAt(o, zeros.data(), kPage), "zero-fill");
    Check(file->Sync(), "sync the zeros");
  }
  std::printf("log %llu MiB, %llu-byte records, %s\n", static_cast<unsigned long long>(a.mib),
              static_cast<unsigned long long>(a.record),
              a.busy ? "a second thread spinning" : "no other thread");
  std::printf("%-11s %5s %12s %9s %9s %9s %13s %11s\n", "mode", "round", "records/s", "wall us",
              "user us", "sys us", "faults/rec", "ms/wrap");
  for (int r = 1; r <= a.rounds; r++) {
    for (const char* mode : {"map", "map-zap", "map-ahead", "map-helper", "map-nohint", "pwrite"}) {
      const Outcome o = RunMode(mode, file, capacity, a);
      std::printf("%-11s %5d %12.0f %9.3f %9.3f %9.3f %13.4f %11.1f\n", mode, r, 1e6 / o.wall_us,
                  o.wall_us, o.user_us, o.sys_us, o.faults, o.wrap_sync_ms);
      std::fflush(stdout);
    }
  }
  opened.value().reset();
  Check(fs->Remove(path), "remove the log");
  return 0;
}
