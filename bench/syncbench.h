// The sync micro-benchmark (seed 004): append blocks to a file and make each
// one durable before the next, measuring what one durable append costs.
//
// Methods: "fdatasync" (File::Sync), "fsync" (File::SyncAll), "msync"
// (write through a writable map, then File::MapSync = msync(MS_SYNC) of the
// block), "none" (pwrite only). Files: "appending" (the file grows with each
// block; for msync a sparse file of the full size, as in the seed) or
// "preallocated" (allocated and zero-filled and synced first, so a sync
// writes data only, no allocation metadata). All I/O goes through
// mmdoc::storage::FileSystem::Default().
#ifndef MMDOC_BENCH_SYNCBENCH_H_
#define MMDOC_BENCH_SYNCBENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "mmdoc/status.h"

namespace mmdoc::bench {

struct SyncCase {
  std::string method;  // fdatasync | fsync | msync | none
  bool preallocated = false;
  size_t block_size = 4096;
};

struct SyncLimits {
  double seconds = 1.0;                    // stop after this long (0 = no time bound)
  uint64_t count = 0;                      // stop after this many blocks (0 = no count bound)
  uint64_t max_file_bytes = 128ull << 20;  // never write past this
};

struct SyncResult {
  SyncCase c;
  uint64_t ops = 0;
  double seconds = 0;
  double ops_per_sec = 0;
  double mb_per_sec = 0;
  double p50_us = 0;
  double p99_us = 0;
};

// Runs one case in a file of its own under dir (removed afterwards).
Result<SyncResult> RunSyncCase(const std::string& dir, const SyncCase& c, const SyncLimits& limits);

std::string SyncResultsToJson(const MachineInfo& machine, const SyncLimits& limits,
                              const std::vector<SyncResult>& results);
// The seed's shape: rows = method (and file), columns = block size; tables
// of blocks/s, MB/s and p50/p99 latency.
void PrintSyncTables(std::FILE* out, const std::vector<SyncResult>& results);

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_SYNCBENCH_H_
