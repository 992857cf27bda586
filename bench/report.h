// Output of mmdoc-bench: the seed-shaped tables on stdout, JSON (the
// contract in DESIGN.md) and CSV.
//
// JSON:
//   {"machine": {"cpu", "cores", "memory_bytes", "kernel", "filesystem",
//                "mount_point", "mount_device", "mount_options",
//                "mem_read_gb_per_sec", "device_syncs_per_sec" (0: not
//                measured), "dataset_bytes", "dataset_to_memory"},
//    "config": {"docs": N (or a list), "durability": "none" (or "all"),
//               "batch", "threads" (the lowest of --threads),
//               "read_threads" (every count, ascending), "seed", "scans",
//               "mapping_docs", "compound_docs",
//               "engines", "phases", "rocksdb_build", "command"},
//    "results": [{"engine", "phase", "durability", "docs", "batch",
//                 "threads" (the workers the phase ran on: a read phase's,
//                 a row per count of read_threads; the insert phases'
//                 writers, InsertWriters; 1 for the other write phases), "available", "ops",
//                 "seconds", "ops_per_sec", "p50_us", "p99_us", "store_bytes", "notes"
//                 [, "gb_per_sec", "mem_bw_fraction" for search_value]
//                 [, "raw_ops_per_sec", "raw_p50_us", "raw_p99_us",
//                    "overhead_pct", "insert_overhead_pct",
//                    "read_overhead_pct" for mapping]
//                 [, "write_bytes", "write_bytes_per_op",
//                    "cancelled_write_bytes" for write phases]}]}
// A row with "available": false is an engine lacking the durability mode,
// or (mapping) a typed mapping layer (n/a): its numbers are 0 and its notes
// say why. For mapping, ops_per_sec/p50/p99 are the typed layer's and
// overhead_pct = (typed time / raw time - 1) * 100. write_bytes is what
// /proc/self/io's write_bytes grew by while the phase was timed (the bytes
// the process sent toward storage, PhaseResult), write_bytes_per_op that
// over ops, cancelled_write_bytes the dirty bytes dropped before writeback
// in that time (not subtracted); all three are null when /proc/self/io
// could not be read.
//
// CSV: one line per row, the columns of the JSON rows up to notes, then
// raw_ops_per_sec, overhead_pct, insert_overhead_pct, read_overhead_pct
// (empty but for mapping), then write_bytes, write_bytes_per_op,
// cancelled_write_bytes (empty but for write phases; n/a when
// /proc/self/io could not be read).
#ifndef MMDOC_BENCH_REPORT_H_
#define MMDOC_BENCH_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "bench/workload.h"

namespace mmdoc::bench {

struct RunInfo {
  std::vector<uint64_t> docs;
  std::vector<std::string> durabilities;
  int batch = 0;
  int threads = 0;               // the lowest of thread_list: the writers'
  std::vector<int> thread_list;  // --threads, ascending; read phases run at each
  uint64_t seed = 0;
  int scans = 0;
  uint64_t mapping_docs = 0;
  uint64_t compound_docs = 0;
  uint64_t lookups = 0;              // --lookups; 0: N/10 per search phase
  bool flush_before_writes = false;  // --flush-before-writes
  std::vector<std::string> engines;
  std::vector<std::string> phases;
  std::string rocksdb_build;
  std::string command;
  uint64_t dataset_bytes = 0;      // BSON bytes of the largest dataset
  double mem_read_gb_per_sec = 0;  // one core, measured in the same run
};

std::string ResultsToJson(const MachineInfo& machine, const RunInfo& run,
                          const std::vector<PhaseResult>& results);
std::string ResultsToCsv(const std::vector<PhaseResult>& results);

// One table per durability mode and engine, its title giving the read
// threads and the insert writers (rows = phases, columns = doc counts, ops/s; p50/p99 of the
// largest count; with several thread counts a read phase has a row per count, "search_id x4"), then
// a comparison table per mode and count with each engine's ratio to the baseline (mmdoc, or the
// first engine when mmdoc did not run). Under search_value its GB/s and
// that rate as a share of run.mem_read_gb_per_sec (when set); under
// insert_noindex its ratio to insert (what the key index costs a write);
// under mapping the raw API's ops/s and the typed layer's CPU overhead;
// under each write phase the bytes written per op ("written/op", in the
// comparison with the ratio to the baseline's) and, when any were, the
// dirty bytes cancelled per op ("cancelled/op").
void PrintTables(std::FILE* out, const RunInfo& run, const std::vector<PhaseResult>& results);

// "278.1k", "1.23M", "6.2"
std::string FormatRate(double ops_per_sec);
// "812 B", "41.3 KiB", "12.0 MiB" (bytes below 10000 in full)
std::string FormatBytes(double bytes);

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_REPORT_H_
