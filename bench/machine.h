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

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_MACHINE_H_
