// The seed workload (seed 000): documents {_id, key, value} of GUID strings,
// phases timed one by one on one engine.
//
//   Dataset data = Dataset::Generate(n, seed);   // same GUIDs for every engine
//   WorkloadConfig config;  config.durability = ...;
//   auto results = RunWorkload("lmdb", data, config);
//
// Phases (DESIGN.md), in the order they run, each engine doing the same work:
//
//   on the main store (the unique index on key from the start):
//     insert          N inserts, in transactions of `batch` (always runs when
//                     any main-store phase is asked for: it loads the data)
//     search_id       N/10 random existing documents by _id (--lookups)
//     search_key      N/10 by key (the secondary index; --lookups)
//     search_value    S full scans for a random existing value (no index)
//     search_prefix   max(10, N/1000) queries for the documents whose key
//                     starts with 3 random hex digits (about N/4096 each),
//                     through the key index: a range, then each document
//     sort_limit      max(10, lookups/10) pages: the 10 documents with key
//                     >= a random GUID, in key order, through the key index
//     update          N/10 distinct documents: set value, found by _id
//     push            N/10 appends of a string to a random document's `tags`
//                     array (created when missing), found by _id, in
//                     transactions of `batch`; N/20 documents, two each
//     delete          N/10 other distinct documents, by _id
//     delete_value    S/2 ops (seed 002's remove({NewsId: v})), each
//                     deleting the document whose value is v, one neither
//                     updated nor deleted: a full scan per op on every engine
//     delete_all      one op deleting every remaining document and index
//                     entry (seed 002's remove()); ops = the documents deleted
//   on a fresh store without the key index:
//     insert_noindex  the same N inserts in the same batches, no key index:
//                     against insert, what the index costs a write
//     build_index     one op building the unique key index over those N
//                     documents (seed 002's ensureIndex); ops = documents
//   on a fresh store of other documents, {_id, g, n, payload} (g an int
//   group, about 100 documents each up to 1000 groups; n a distinct int32)
//   with a compound index on (g asc, n asc):
//     compound        min(N, --compound-docs) documents loaded untimed
//                     (batches of 1000; the notes give the load's rate),
//                     then `lookups` queries (N/10, at least 10) {g: G,
//                     n: {$gte: A, $lt: B}} sorted by n, limit 10, whole
//                     documents (the range holds about 20: most queries
//                     stop at the limit): mmdoc's compound index, SQLite's and
//                     PostgreSQL's index on (g, n), LMDB and RocksDB a range
//                     of (g, n, _id) keys then each document
//   on a fresh store, engines with a typed mapping layer (mmdoc) only:
//     mapping         M inserts (batches of `batch`) + M reads by _id through
//                     the typed layer and through the raw BSON API, taking
//                     turns a transaction at a time (seed 003's Morphia vs
//                     driver); ops/s of the typed layer, raw ops/s and the
//                     overhead in percent (of CPU time) beside it; n/a for
//                     every other engine
//
// Each phase gives ops/s and p50/p99 latency per operation; search_value also
// GB/s scanned (stored BSON bytes / scan time). A one-op phase (build_index,
// delete_all) reports documents/s, and its p50 = p99 = that op's time. Each
// write phase (WritePhase) also gives the bytes the process sent toward
// storage while it was timed, per operation (/proc/self/io write_bytes).
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
    return std::string_view(guids_.data() + (i * 3 + field) * kGuidLength, kGuidLength);
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
// The phases a run times when --phases is not given.
const std::vector<std::string>& DefaultPhases();
// Whether a phase writes to the store (insert, update, push, delete,
// delete_value, delete_all, insert_noindex, build_index, mapping): the phases whose rows
// carry the bytes written per operation.
bool WritePhase(const std::string& phase);
// The writer threads of the insert phases (insert, insert_noindex) in a
// durability mode at WorkloadConfig::threads: one in none mode (nothing to
// wait for), else `threads`, and 4 in group mode when `threads` is 1
// (group commit needs concurrent commits to group). The other write phases
// run on one.
int InsertWriters(Durability durability, int threads);
// Whether a phase runs on WorkloadConfig::threads workers (search_id,
// search_key, search_value, search_prefix, sort_limit): the phases timed
// once per count of WorkloadConfig::read_threads.
bool ThreadedPhase(const std::string& phase);

struct WorkloadConfig {
  Durability durability = Durability::kNone;
  // Documents per write transaction.
  int batch = 1000;
  // Threads for the read phases, and writer threads for durable inserts
  // (InsertWriters: group mode uses 4 writers when this is 1).
  int threads = 1;
  // When not empty: the thread counts each read phase (ThreadedPhase) is
  // timed at, a row per count, in this order (the seed's threads
  // experiment); `threads` still sets the writers. Empty: `threads` alone.
  std::vector<int> read_threads;
  // Phases to time ("insert" always runs: it loads the data).
  std::vector<std::string> phases = AllPhases();
  // Number of search_value scans; delete_value does half as many ops
  // (rounded up), each a scan too.
  int scans = 20;
  // Point reads per search_id and search_key phase; 0 = N/10 (the seed's).
  // At 1M, N/10 lookups take a few tenths of a second: more of them give a
  // steadier rate.
  uint64_t lookups = 0;
  // Documents the mapping phase inserts and reads per round (at most N).
  uint64_t mapping_docs = 50000;
  // Documents the compound phase loads (at most N): its load is untimed
  // but not free (SQLite loads some 40k/s), so the default run stays short.
  uint64_t compound_docs = 100000;
  // In a durable mode (not none), write phases time at most this many
  // operations: inserts beyond them are preloaded in batches of 1000 first,
  // so the timed ones run against a full store. 0 = no cap.
  uint64_t max_durable_ops = 0;
  uint32_t sync_interval_ms = 100;
  // mmdoc's Options::log_size; 0 = the library's default.
  uint64_t mmdoc_log_bytes = 0;
  // mmdoc's Options::page_size; 0 = the library's default.
  uint32_t mmdoc_page_size = 0;
  // mmdoc's Options::write_buffer_size (not mmdoc-pages', which is 0).
  uint64_t mmdoc_buffer_bytes = 64ull << 20;
  // Parent of the engine's data directory (created and removed here).
  std::string dir;
  bool keep_data = false;
  // Progress bar on stderr.
  bool progress = false;
  // A line on stderr as each phase ends ("ENGINE MODE N PHASE: RATE ops/s").
  bool phase_lines = false;
  // Before each write phase, untimed: sync(), so that write_bytes counts
  // every page the phase dirties, not only those an earlier phase left
  // clean (in `none` mode nothing else writes pages back between phases).
  bool flush_before_writes = false;
};

struct PhaseResult {
  std::string engine;
  std::string phase;
  std::string durability;
  uint64_t docs = 0;  // dataset size N
  int batch = 0;
  // The workers the phase ran on: a read phase's count, the inserts'
  // writers (InsertWriters), 1 for the other write phases.
  int threads = 0;
  bool available = true;  // false: the engine lacks the durability mode (n/a)
  uint64_t ops = 0;
  double seconds = 0;
  double ops_per_sec = 0;
  double p50_us = 0;
  double p99_us = 0;
  double gb_per_sec = -1;    // search_value only
  uint64_t store_bytes = 0;  // disk use of the store after the phase
  // The engine's peak resident memory over its whole run (all phases at
  // this N), above the process's resident size when the engine started (the
  // dataset, which every engine shares). Mapped file pages a store touched
  // count, as they do for the OS; 0 when /proc cannot tell.
  uint64_t peak_rss_bytes = 0;
  // Write phases only (io_measured): the bytes this process sent toward
  // storage while the phase was timed (IoCounters::write_bytes after minus
  // before, every thread of the process, an engine's background threads
  // too), and the dirty bytes it dropped before writeback in that time
  // (cancelled_write_bytes: a truncated or deleted file), which are
  // reported beside write_bytes, not subtracted from it: they are charged
  // when a file is truncated or deleted, often in a later phase than the
  // one that dirtied it. A page stored to again while still dirty (from
  // this phase or an earlier one) counts once, and what an engine writes
  // after the phase (a background compaction, a memtable flushed at close)
  // counts in no write phase. See IoCounters for large folios. io_known is
  // false when /proc/self/io could not be read: the figures are n/a.
  bool io_measured = false;
  bool io_known = false;
  uint64_t write_bytes = 0;
  uint64_t cancelled_write_bytes = 0;
  std::string notes;
  // Write phases of an engine that counts them (Backend::Waits): what its
  // writer waited on its own background work during the phase, as
  // WriterWaits counts it.
  bool waits_known = false;
  uint64_t merge_waits = 0;
  double merge_wait_seconds = 0;
  uint64_t writer_checkpoints = 0;
  uint64_t log_full_merges = 0;
  // Read phases: Backend::State() when the phase began and when it ended
  // (empty: the engine holds nothing besides its trees).
  std::string state_before;
  std::string state_after;
  // mapping only (raw_ops_per_sec >= 0): the same work through the raw BSON
  // API (wall-clock, as ops_per_sec), and how much more CPU time the typed
  // layer took, in percent (typed thread CPU time / raw - 1), in all and
  // for inserts and reads alone. CPU time, because the APIs differ by CPU
  // work and a shared machine's stalls swamp that in wall-clock time.
  double raw_ops_per_sec = -1;
  double raw_p50_us = 0;
  double raw_p99_us = 0;
  double overhead_pct = 0;
  double insert_overhead_pct = 0;
  double read_overhead_pct = 0;
};

// Runs the workload on one engine with fresh stores. Results for the
// phases in config.phases, in order; n/a rows when the engine lacks the
// durability mode (or, for mapping, a typed mapping layer). An error (a failed
// call, a wrong answer) is returned as a Status naming the engine and phase;
// or, with `failed`, put there, with the rows of the phases that ran and an
// n/a row saying so for each that did not, so that a run's tables keep them.
Result<std::vector<PhaseResult>> RunWorkload(const std::string& engine, const Dataset& data,
                                             const WorkloadConfig& config,
                                             Status* failed = nullptr);

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
