// The seed workload (seed 000): documents {_id, key, value} of GUID strings,
// phases timed one by one on one engine.
//
//   Dataset data = Dataset::Generate(n, seed);   // same GUIDs for every engine
//   WorkloadConfig config;  config.durability = ...;
//   auto results = RunWorkload("lmdb", data, config);
//
// Phases (DESIGN.md): insert (N), search_id (N/10 random existing),
// search_key (N/10), search_value (S full scans for a random existing value),
// update (N/10 distinct documents), delete (N/10 distinct documents). Each
// phase gives ops/s and p50/p99 latency per operation; search_value also
// GB/s scanned (stored BSON bytes / scan time).
#ifndef MMDOC_BENCH_WORKLOAD_H_
#define MMDOC_BENCH_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mmdoc/durability.h"
#include "mmdoc/status.h"

namespace mmdoc::bench {

inline constexpr size_t kGuidLength = 36;

// N documents, generated once from a seed: GUIDs from Boost.Uuid's random
// generator over std::mt19937_64, and their BSON bytes.
class Dataset {
 public:
  static Dataset Generate(uint64_t docs, uint64_t seed);

  uint64_t size() const { return docs_; }
  uint64_t seed() const { return seed_; }
  std::string_view id(uint64_t i) const { return Guid(0, i); }
  std::string_view key(uint64_t i) const { return Guid(1, i); }
  std::string_view value(uint64_t i) const { return Guid(2, i); }
  std::string_view bson(uint64_t i) const {
    return std::string_view(bson_.data() + bson_offsets_[i],
                            bson_offsets_[i + 1] - bson_offsets_[i]);
  }
  // Total BSON bytes of all documents.
  uint64_t bson_bytes() const { return bson_.size(); }
  // Fresh GUIDs (not in the dataset) for updates, derived from the seed.
  std::string_view new_value(uint64_t i) const {
    return std::string_view(new_values_.data() + i * kGuidLength, kGuidLength);
  }
  uint64_t new_values() const { return new_values_.size() / kGuidLength; }

 private:
  std::string_view Guid(int field, uint64_t i) const {
    return std::string_view(guids_.data() + (i * 3 + field) * kGuidLength,
                            kGuidLength);
  }
  uint64_t docs_ = 0;
  uint64_t seed_ = 0;
  std::string guids_;  // id, key, value of doc 0, then doc 1, ...
  std::string bson_;
  std::vector<uint64_t> bson_offsets_;
  std::string new_values_;
};

// The phases in the order they run.
const std::vector<std::string>& AllPhases();

struct WorkloadConfig {
  Durability durability = Durability::kNone;
  // Documents per write transaction.
  int batch = 1000;
  // Threads for the read phases, and writer threads for durable inserts
  // (group mode uses at least 4 writers).
  int threads = 1;
  // Phases to time ("insert" always runs: it loads the data).
  std::vector<std::string> phases = AllPhases();
  // Number of search_value scans.
  int scans = 20;
  // In a durable mode (not none), write phases time at most this many
  // operations: inserts beyond them are preloaded in batches of 1000 first,
  // so the timed ones run against a full store. 0 = no cap.
  uint64_t max_durable_ops = 0;
  uint32_t sync_interval_ms = 100;
  // Parent of the engine's data directory (created and removed here).
  std::string dir;
  bool keep_data = false;
  // Progress bar on stderr.
  bool progress = false;
};

struct PhaseResult {
  std::string engine;
  std::string phase;
  std::string durability;
  uint64_t docs = 0;  // dataset size N
  int batch = 0;
  int threads = 0;
  bool available = true;  // false: the engine lacks the durability mode (n/a)
  uint64_t ops = 0;
  double seconds = 0;
  double ops_per_sec = 0;
  double p50_us = 0;
  double p99_us = 0;
  double gb_per_sec = -1;    // search_value only
  uint64_t store_bytes = 0;  // disk use of the store after the phase
  std::string notes;
};

// Runs the workload on one engine with a fresh store. Results for the
// phases in config.phases, in order; n/a rows when the engine lacks the
// durability mode. An error (a failed call, a wrong answer) is returned as
// a Status naming the engine and phase.
Result<std::vector<PhaseResult>> RunWorkload(const std::string& engine,
                                             const Dataset& data,
                                             const WorkloadConfig& config);

// Disk space used by the files under dir (st_blocks), in bytes.
uint64_t DiskUsage(const std::string& dir);

// Latency histogram, log-linear buckets (about 3% resolution), in ns.
class Histogram {
 public:
  Histogram();
  void Add(uint64_t ns) {
    ++counts_[Bucket(ns)];
    ++total_;
  }
  void Merge(const Histogram& o);
  uint64_t count() const { return total_; }
  // The q-quantile (0..1) in microseconds; 0 when empty.
  double QuantileUs(double q) const;

 private:
  static constexpr int kSub = 32;
  static int Bucket(uint64_t ns);
  static double BucketMid(int b);
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
};

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_WORKLOAD_H_
