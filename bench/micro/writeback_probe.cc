// mmdoc-wbprobe: what a checkpoint's writeback costs the readers of the
// same mapping, by how the pages were written (docs/write-path.md).
//
// A file of --mib MiB is mapped MAP_SHARED. A reader thread walks it as a
// B+tree lookup does: --depth dependent loads, each in a random page, and
// counts lookups per second. Beside it a writer thread, in rounds, changes
// --pages random pages and then fdatasyncs the file, as a merge and its
// checkpoint do. The pages are changed either
//
//   map      by stores through the shared writable mapping (mmdoc's pager);
//            the writeback must write-protect each page again, which on
//            x86 is a TLB shootdown (an interrupt) to every other core
//            running the process, the reader's included;
//   pwrite   by File::WriteAt (pwrite(2)) into the page cache, the mapping read-only (as
//            LMDB without MDB_WRITEMAP); no page table entry is dirty, so
//            the writeback has nothing to write-protect;
//   none     no writer: the reader alone.
//
// Each mode runs --seconds; modes alternate for --rounds, so that the
// machine's drift shows as spread rather than as a difference. Reported:
// the reader's lookups per second of wall time and per second it ran (the
// fairer figure on a busy machine), the TLB-shootdown interrupts all cores
// took meanwhile (/proc/interrupts), the writer's time per page changed
// (a store through the map includes the write-protect fault a writeback
// left) and per fdatasync.
//
//   mmdoc-wbprobe [--mib 512] [--pages 20000] [--depth 4] [--seconds 3]
//                 [--rounds 3] [--dir .]
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "storage/file_system.h"

namespace {

using mmdoc::File;
using mmdoc::FileSystem;
using mmdoc::MapMode;
using mmdoc::OpenMode;
using mmdoc::Status;

using Clock = std::chrono::steady_clock;
constexpr size_t kPage = 4096;

struct Args {
  size_t mib = 512;
  size_t pages = 20000;
  int depth = 4;
  double seconds = 3;
  int rounds = 3;
  std::string dir = ".";
};

[[noreturn]] void Die(const Status& s) {
  std::fprintf(stderr, "mmdoc-wbprobe: %s\n", s.ToString().c_str());
  std::exit(1);
}

void Check(const Status& s) {
  if (!s.ok()) Die(s);
}

// TLB shootdowns received by all cores so far (/proc/interrupts, "TLB").
uint64_t TlbShootdowns() {
  FILE* f = std::fopen("/proc/interrupts", "r");
  if (f == nullptr) return 0;
  char line[4096];
  uint64_t total = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    char* p = line;
    while (*p == ' ') p++;
    if (std::strncmp(p, "TLB:", 4) != 0) continue;
    p += 4;
    for (;;) {
      char* end;
      const unsigned long long v = std::strtoull(p, &end, 10);
      if (end == p) break;
      total += v;
      p = end;
    }
  }
  std::fclose(f);
  return total;
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

struct Outcome {
  double lookups_per_s = 0;
  double lookups_per_cpu_s = 0;  // per second the reader ran: scheduling aside
  double shootdowns = 0;
  double writer_rounds = 0;
  double us_per_page_changed = 0;  // the stores or pwrites, per page
  double sync_ms = 0;              // per fdatasync
};

Outcome RunMode(const std::string& mode, File* file, size_t file_pages, const Args& a) {
  const size_t len = file_pages * kPage;
  const bool writable_map = mode == "map";
  auto m = file->Map(len, writable_map ? MapMode::kReadWrite : MapMode::kReadOnly);
  if (!m.ok()) Die(m.status());
  uint8_t* base = m.value();
  // As the pager does: no readahead into large folios.
  (void)file->AdviseRandomAccess(base, len);
  // Every page resident and mapped before timing, as a warm database's are.
  uint64_t warm = 0;
  for (size_t p = 0; p < file_pages; p++) warm += base[p * kPage];
  if (warm == 1) std::puts("");

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> lookups{0};
  std::atomic<double> reader_cpu{0};
  const uint64_t tlb0 = TlbShootdowns();
  std::thread reader([&] {
    const double cpu0 = ThreadCpuSeconds();
    std::mt19937_64 rng(7);
    uint64_t n = 0, sink = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      uint64_t at = rng() % file_pages;
      for (int d = 0; d < a.depth; d++) {
        // The next page depends on what was read, as a child pointer does.
        const uint64_t v = base[at * kPage + (at * 64) % kPage];
        sink += v;
        at = (at * 2654435761u + v + d + rng()) % file_pages;
      }
      n++;
    }
    lookups.store(n + (sink == 42 ? 1 : 0));
    reader_cpu.store(ThreadCpuSeconds() - cpu0);
  });

  Outcome o;
  std::vector<uint8_t> page(kPage, 0x5a);
  double change_us = 0, sync_us = 0;
  uint64_t changed = 0, syncs = 0;
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration<double>(a.seconds);
  std::mt19937_64 rng(11);
  if (mode != "none") {
    while (Clock::now() < until) {
      const auto t0 = Clock::now();
      for (size_t i = 0; i < a.pages; i++) {
        const size_t p = rng() % file_pages;
        page[0] = static_cast<uint8_t>(i);
        if (writable_map) {
          std::memcpy(base + p * kPage, page.data(), kPage);
        } else {
          Check(file->WriteAt(p * kPage, page.data(), kPage));
        }
      }
      const auto t1 = Clock::now();
      Check(file->Sync());
      const auto t2 = Clock::now();
      change_us += std::chrono::duration<double, std::micro>(t1 - t0).count();
      sync_us += std::chrono::duration<double, std::micro>(t2 - t1).count();
      changed += a.pages;
      syncs++;
    }
  } else {
    std::this_thread::sleep_until(until);
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  stop.store(true);
  reader.join();
  o.shootdowns = static_cast<double>(TlbShootdowns() - tlb0);
  Check(file->Unmap(base, len));
  o.lookups_per_s = static_cast<double>(lookups.load()) / secs;
  o.lookups_per_cpu_s = static_cast<double>(lookups.load()) / std::max(reader_cpu.load(), 1e-9);
  o.writer_rounds = static_cast<double>(syncs);
  o.us_per_page_changed = changed ? change_us / static_cast<double>(changed) : 0;
  o.sync_ms = syncs ? sync_us / 1000.0 / static_cast<double>(syncs) : 0;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--mib") {
      a.mib = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--pages") {
      a.pages = std::strtoull(v.c_str(), nullptr, 10);
    } else if (k == "--depth") {
      a.depth = std::atoi(v.c_str());
    } else if (k == "--seconds") {
      a.seconds = std::atof(v.c_str());
    } else if (k == "--rounds") {
      a.rounds = std::atoi(v.c_str());
    } else if (k == "--dir") {
      a.dir = v;
    } else {
      std::fprintf(stderr, "mmdoc-wbprobe: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.mib == 0 || a.pages == 0 || a.depth <= 0 || a.seconds <= 0 || a.rounds <= 0) {
    std::fprintf(stderr, "mmdoc-wbprobe: sizes must be positive\n");
    return 2;
  }
  const std::string path = a.dir + "/wbprobe.data";
  FileSystem* fs = FileSystem::Default();
  if (fs->Exists(path)) Check(fs->Remove(path));
  auto opened = fs->Open(path, OpenMode::kCreate);
  if (!opened.ok()) Die(opened.status());
  File* file = opened.value().get();
  const size_t file_pages = a.mib * (1u << 20) / kPage;
  {
    // Filled page by page (not in large writes) so that the page cache
    // holds 4 KiB folios, as the pager's stores leave it.
    std::vector<uint8_t> page(kPage);
    std::mt19937_64 rng(3);
    for (size_t p = 0; p < file_pages; p++) {
      for (auto& b : page) b = static_cast<uint8_t>(rng());
      Check(file->WriteAt(p * kPage, page.data(), kPage));
    }
    Check(file->Sync());
  }
  std::printf("file %zu MiB, writer: %zu random pages then fdatasync per round, reader depth %d\n",
              a.mib, a.pages, a.depth);
  std::printf("%-7s %5s %12s %12s %8s %12s %10s %14s\n", "mode", "round", "lookups/s", "per cpu-s",
              "vs none", "shootdowns", "us/page", "ms/sync");
  for (int r = 1; r <= a.rounds; r++) {
    double none = 0;
    for (const char* mode : {"none", "map", "pwrite"}) {
      const Outcome o = RunMode(mode, file, file_pages, a);
      if (std::string(mode) == "none") none = o.lookups_per_cpu_s;
      std::printf("%-7s %5d %12.0f %12.0f %7.2fx %12.0f %10.2f %14.1f\n", mode, r, o.lookups_per_s,
                  o.lookups_per_cpu_s, none > 0 ? o.lookups_per_cpu_s / none : 0.0, o.shootdowns,
                  o.us_per_page_changed, o.sync_ms);
      std::fflush(stdout);
    }
  }
  opened.value().reset();
  Check(fs->Remove(path));
  return 0;
}
