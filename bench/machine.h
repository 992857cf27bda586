// The machine fingerprint every result carries: CPU, cores, memory, kernel,
// the file system (and its mount options) holding the data directory, and a
// memory read bandwidth measured in the same run.
#ifndef MMDOC_BENCH_MACHINE_H_
#define MMDOC_BENCH_MACHINE_H_

#include <cstdint>
#include <string>

namespace mmdoc::bench {

struct MachineInfo {
  std::string cpu;  // /proc/cpuinfo "model name"
  int cores = 0;
  uint64_t memory_bytes = 0;  // MemTotal
  std::string kernel;         // uname -srm
  // The mount holding the data directory (/proc/self/mounts).
  std::string filesystem;  // type, e.g. "ext4"
  std::string mount_point;
  std::string mount_device;
  std::string mount_options;
  // One core reading memory sequentially (GB/s); 0 when not measured.
  double mem_read_gb_per_sec = 0;
  // What the device allows a durable commit: the best rate of a loop of
  // 512-byte appends to a preallocated file, each followed by fdatasync
  // (mmdoc-syncbench's case), before and after the engines of a run with a
  // durable log mode at batch 1; 0 when not measured.
  double device_syncs_per_sec = 0;
};

// Describes this machine; dir is the data directory (must exist).
MachineInfo DescribeMachine(const std::string& dir);

// Reads a buffer of `bytes` (well beyond the caches) a few times with one
// thread and returns the best GB/s.
double MeasureMemoryReadBandwidth(uint64_t bytes = 512ull << 20);

// Resident memory of this process (/proc/self/status VmRSS, VmHWM), in
// bytes; 0 when unknown. ResetPeakResident sets VmHWM to the current
// VmRSS (writes 5 to /proc/self/clear_refs); false when it cannot.
uint64_t ResidentBytes();
uint64_t PeakResidentBytes();
bool ResetPeakResident();

// What this process has sent toward storage so far, from /proc/self/io:
// the sum over all its threads, live and exited (an engine's background
// threads count). write_bytes grows when a page-cache folio goes from clean
// to dirty, by write() or by a store through a shared map, by the folio's
// whole size, so a page is counted once per writeback cycle however often
// it is stored to (O_DIRECT writes count as issued). Where the file system
// caches a file in large folios (ext4 on Linux 6.18 does, after readahead),
// one 4 KiB write() into a clean 1 MiB folio charges 1 MiB while only the
// dirty blocks reach the disk; a store through a map does write the whole
// folio back. cancelled_write_bytes grows when dirty pages are dropped
// before writeback (a truncate or unlink). Writes the kernel does for the
// file system (its journal, inode updates) are not charged, and a tmpfs
// charges nothing. false when /proc/self/io cannot be read (a kernel
// without task I/O accounting): no figure, not 0.
struct IoCounters {
  uint64_t write_bytes = 0;
  uint64_t cancelled_write_bytes = 0;
};
// Also adds the writes of the process trees WatchIo watches.
bool ReadIoCounters(IoCounters* out);

// A process tree outside the bench that writes for it (a database server
// the bench started, root = its main process, and the processes it forks):
// while watched, ReadIoCounters adds the tree's writes to the bench's own,
// so an engine in another process is charged for its writes as an embedded
// one is. Each process's counters are kept as last read, so the sum never
// goes back when one exits; what a process wrote after the last read
// before it exited is not counted, nor a process that starts and ends
// between two reads (an autovacuum worker within one phase).
// Thread-safe.
void WatchIo(int root);
// Stops reading the tree; what it wrote so far stays in the sum.
void UnwatchIo(int root);

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_MACHINE_H_
