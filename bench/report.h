// Output of mmdoc-bench: the seed-shaped tables on stdout, JSON (the
// contract in DESIGN.md) and CSV.
//
// JSON:
//   {"machine": {"cpu", "cores", "memory_bytes", "kernel", "filesystem",
//                "mount_point", "mount_device", "mount_options",
//                "mem_read_gb_per_sec", "dataset_bytes", "dataset_to_memory"},
//    "config": {"docs": N (or a list), "durability": "none" (or "all"),
//               "batch", "threads", "seed", "scans", "engines", "phases",
//               "rocksdb_build", "command"},
//    "results": [{"engine", "phase", "durability", "docs", "batch",
//                 "threads", "available", "ops", "seconds", "ops_per_sec",
//                 "p50_us", "p99_us", "store_bytes", "notes"
//                 [, "gb_per_sec", "mem_bw_fraction" for search_value]}]}
// A row with "available": false is an engine lacking the durability mode
// (n/a): its numbers are 0 and its notes say why.
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
  int threads = 0;
  uint64_t seed = 0;
  int scans = 0;
  std::vector<std::string> engines;
  std::vector<std::string> phases;
  std::string rocksdb_build;
  std::string command;
  uint64_t dataset_bytes = 0;  // BSON bytes of the largest dataset
};

std::string ResultsToJson(const MachineInfo& machine, const RunInfo& run,
                          const std::vector<PhaseResult>& results);
std::string ResultsToCsv(const std::vector<PhaseResult>& results);

// One table per durability mode and engine (rows = phases, columns = doc
// counts, ops/s; p50/p99 of the largest count), then a comparison table per
// mode and count with each engine's ratio to the baseline (mmdoc, or the
// first engine when mmdoc did not run).
void PrintTables(std::FILE* out, const RunInfo& run,
                 const std::vector<PhaseResult>& results);

// "278.1k", "1.23M", "6.2"
std::string FormatRate(double ops_per_sec);

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_REPORT_H_
