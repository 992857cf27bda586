#include "bench/workload.h"

#include <malloc.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "bench/backend.h"
#include "bench/bson_doc.h"
#include "bench/machine.h"
#include "bench/report.h"
#include "bench/signal_cleanup.h"

namespace mmdoc::bench {

// --- Dataset ---

Dataset Dataset::Generate(uint64_t docs, uint64_t seed) {
  Dataset d;
  d.docs_ = docs;
  d.seed_ = seed;
  std::mt19937_64 rng(seed);
  boost::uuids::basic_random_generator<std::mt19937_64> gen(&rng);
  d.guids_.resize(docs * 3 * kGuidLength);
  for (uint64_t i = 0; i < docs * 3; ++i) {
    std::string s = boost::uuids::to_string(gen());
    std::copy(s.begin(), s.end(), d.guids_.begin() + i * kGuidLength);
  }
  d.bson_offsets_.reserve(docs + 1);
  d.bson_offsets_.push_back(0);
  // Sized once (the documents are all one size): a string grown by doubling
  // frees blocks of up to half the dataset, which raises glibc's mmap and
  // trim thresholds to their cap for every engine measured after it.
  if (docs > 0) d.bson_.reserve(docs * MakeDocument(d.id(0), d.key(0), d.value(0)).size());
  for (uint64_t i = 0; i < docs; ++i) {
    d.bson_ += MakeDocument(d.id(i), d.key(i), d.value(i));
    d.bson_offsets_.push_back(d.bson_.size());
  }
  uint64_t updates = std::max<uint64_t>(1, docs / 10);
  d.new_values_.resize(updates * kGuidLength);
  for (uint64_t i = 0; i < updates; ++i) {
    std::string s = boost::uuids::to_string(gen());
    std::copy(s.begin(), s.end(), d.new_values_.begin() + i * kGuidLength);
  }
  return d;
}

const std::vector<std::string>& AllPhases() {
  static const std::vector<std::string> kPhases = {
      "insert",     "search_id",      "search_key",  "search_value", "search_prefix",
      "sort_limit", "update",         "push",        "delete",       "delete_value",
      "delete_all", "insert_noindex", "build_index", "compound",     "mapping"};
  return kPhases;
}

const std::vector<std::string>& DefaultPhases() { return AllPhases(); }

bool WritePhase(const std::string& phase) {
  static const std::vector<std::string> kWrites = {"insert",         "update",       "push",
                                                   "delete",         "delete_value", "delete_all",
                                                   "insert_noindex", "build_index",  "mapping"};
  return std::find(kWrites.begin(), kWrites.end(), phase) != kWrites.end();
}

int InsertWriters(Durability durability, int threads) {
  if (durability == Durability::kNone) return 1;
  // Group commit needs concurrent commits to group.
  if (durability == Durability::kGroup && threads < 2) return 4;
  return std::max(1, threads);
}

bool ThreadedPhase(const std::string& phase) {
  static const std::vector<std::string> kReads = {"search_id", "search_key", "search_value",
                                                  "search_prefix", "sort_limit"};
  return std::find(kReads.begin(), kReads.end(), phase) != kReads.end();
}

// --- Histogram ---

Histogram::Histogram() : counts_(64 + 58 * kSub, 0) {}

int Histogram::Bucket(uint64_t ns) {
  if (ns < 64) return static_cast<int>(ns);
  int e = 63 - __builtin_clzll(ns);  // >= 6
  int sub = static_cast<int>((ns >> (e - 5)) & (kSub - 1));
  return 64 + (e - 6) * kSub + sub;
}

double Histogram::BucketMid(int b) {
  if (b < 64) return b;
  int e = (b - 64) / kSub + 6;
  int sub = (b - 64) % kSub;
  double width = std::ldexp(1.0, e - 5);
  return (kSub + sub) * width + width / 2;
}

void Histogram::Merge(const Histogram& o) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
  total_ += o.total_;
}

double Histogram::QuantileUs(double q) const {
  if (total_ == 0) return 0;
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) return BucketMid(static_cast<int>(i)) / 1000.0;
  }
  return BucketMid(static_cast<int>(counts_.size() - 1)) / 1000.0;
}

uint64_t DiskUsage(const std::string& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

namespace {

// CPU time of the calling thread: what it did, not what it waited for
// while other processes had the core.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// A progress bar on stderr, redrawn a few times a second by its own thread.
class Progress {
 public:
  Progress(bool enabled, std::string label, uint64_t total)
      : enabled_(enabled && total > 0), label_(std::move(label)), total_(total) {
    if (enabled_) thread_ = std::thread([this] { Loop(); });
  }
  ~Progress() {
    if (!enabled_) return;
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    std::fprintf(stderr, "\r\033[K");
  }
  void Add(uint64_t n) {
    if (enabled_) done_.fetch_add(n, std::memory_order_relaxed);
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!cv_.wait_for(l, std::chrono::milliseconds(200), [this] { return stop_; })) {
      uint64_t done = std::min(done_.load(std::memory_order_relaxed), total_);
      int width = 30;
      int filled = static_cast<int>(width * done / total_);
      std::fprintf(stderr, "\r\033[K%-32s [%s%s] %3d%%", label_.c_str(),
                   std::string(filled, '#').c_str(), std::string(width - filled, ' ').c_str(),
                   static_cast<int>(100 * done / total_));
      std::fflush(stderr);
    }
  }
  const bool enabled_;
  const std::string label_;
  const uint64_t total_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// One worker's share of a phase.
struct Share {
  Session* session;
  int thread;
  uint64_t begin, end;  // operation numbers [begin, end)
  Histogram* hist;
  Progress* progress;
};

struct Timed {
  double seconds = 0;
  Histogram hist;
  Status status;
  // /proc/self/io read just before the timed work starts and just after it
  // ends; io_known is false when either read failed.
  bool io_known = false;
  IoCounters io_before, io_after;
  // The engine's writer waits during the work (Runner::RunTimed).
  bool waits_known = false;
  WriterWaits waits;
};

// Runs fn on `threads` workers over ops operations split evenly, and times
// the whole (wall clock from the start of the first to the end of the last).
template <typename Fn>
Timed RunParallel(std::vector<std::unique_ptr<Session>>& sessions, int threads, uint64_t ops,
                  Progress* progress, Fn fn) {
  Timed t;
  threads = static_cast<int>(std::max<uint64_t>(1, std::min<uint64_t>(threads, ops)));
  std::vector<Histogram> hists(threads);
  std::vector<Status> statuses(threads);
  if (threads == 1) {
    t.io_known = ReadIoCounters(&t.io_before);
    uint64_t start = NowNs();
    statuses[0] = fn(Share{sessions[0].get(), 0, 0, ops, &hists[0], progress});
    t.seconds = static_cast<double>(NowNs() - start) / 1e9;
    t.io_known = ReadIoCounters(&t.io_after) && t.io_known;
  } else {
    std::vector<std::thread> workers;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    for (int i = 0; i < threads; ++i) {
      uint64_t b = ops * i / threads, e = ops * (i + 1) / threads;
      workers.emplace_back([&, i, b, e] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        statuses[i] = fn(Share{sessions[i].get(), i, b, e, &hists[i], progress});
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    t.io_known = ReadIoCounters(&t.io_before);
    uint64_t start = NowNs();
    go.store(true, std::memory_order_release);
    for (auto& w : workers) w.join();
    t.seconds = static_cast<double>(NowNs() - start) / 1e9;
    t.io_known = ReadIoCounters(&t.io_after) && t.io_known;
  }
  for (int i = 0; i < threads; ++i) {
    t.hist.Merge(hists[i]);
    if (t.status.ok() && !statuses[i].ok()) t.status = statuses[i];
  }
  return t;
}

// Writes ops [share.begin, share.end) in transactions of `batch`, each op
// timed from the end of the previous one (so Begin and Commit count for the
// first and last op of a transaction). op(session, i) does one write.
template <typename Op>
Status WriteLoop(const Share& share, int batch, Op op) {
  uint64_t prev = NowNs();
  uint64_t in_txn = 0;
  for (uint64_t i = share.begin; i < share.end; ++i) {
    if (in_txn == 0) MMDOC_RETURN_IF_ERROR(share.session->Begin());
    MMDOC_RETURN_IF_ERROR(op(share.session, i));
    if (++in_txn == static_cast<uint64_t>(batch) || i + 1 == share.end) {
      MMDOC_RETURN_IF_ERROR(share.session->Commit());
      share.progress->Add(in_txn);
      in_txn = 0;
    }
    uint64_t now = NowNs();
    share.hist->Add(now - prev);
    prev = now;
  }
  return Status::OK();
}

// Reads: op(session, i) does one read.
template <typename Op>
Status ReadLoop(const Share& share, Op op) {
  uint64_t prev = NowNs();
  for (uint64_t i = share.begin; i < share.end; ++i) {
    MMDOC_RETURN_IF_ERROR(op(share.session, i));
    uint64_t now = NowNs();
    share.hist->Add(now - prev);
    prev = now;
    if ((i & 255) == 255) share.progress->Add(256);
  }
  return Status::OK();
}

class Runner {
 public:
  Runner(const std::string& engine, const Dataset& data, const WorkloadConfig& config)
      : engine_(engine), data_(data), config_(config) {}

  Result<std::vector<PhaseResult>> Run();
  // After Run returned an error: the rows of the phases that ran, and an
  // n/a row naming the failure for each wanted phase that did not.
  std::vector<PhaseResult> RowsAfterFailure(const Status& failure);

 private:
  bool Wanted(const std::string& phase) const {
    return std::find(config_.phases.begin(), config_.phases.end(), phase) != config_.phases.end();
  }
  // threads: the workers of a read phase's row (0: the phase's own, as
  // PhaseResult::threads says: the inserts' writers, one for the other
  // write phases, config_.threads for compound).
  PhaseResult Row(const std::string& phase, int threads = 0) const {
    PhaseResult r;
    r.engine = engine_;
    r.phase = phase;
    r.durability = DurabilityName(config_.durability);
    r.docs = data_.size();
    r.batch = config_.batch;
    if (threads > 0) {
      r.threads = threads;
    } else if (phase == "insert" || phase == "insert_noindex") {
      r.threads = writers_;
    } else if (WritePhase(phase)) {
      r.threads = 1;
    } else {
      r.threads = config_.threads;
    }
    return r;
  }
  // The thread counts the read phases run at (WorkloadConfig::read_threads).
  std::vector<int> ReadThreads() const {
    return config_.read_threads.empty() ? std::vector<int>{config_.threads} : config_.read_threads;
  }
  // RunParallel on this runner's sessions, with the engine's writer waits
  // read before and after: they change only in the timed work's commits.
  template <typename Fn>
  Timed RunTimed(int threads, uint64_t ops, Progress* progress, Fn fn) {
    WriterWaits before, after;
    const bool known = backend_->Waits(&before);
    Timed t = RunParallel(sessions_, threads, ops, progress, fn);
    t.waits_known = known && backend_->Waits(&after);
    if (t.waits_known) {
      t.waits.merge_waits = after.merge_waits - before.merge_waits;
      t.waits.merge_wait_seconds = after.merge_wait_seconds - before.merge_wait_seconds;
      t.waits.checkpoints = after.checkpoints - before.checkpoints;
      t.waits.log_full_merges = after.log_full_merges - before.log_full_merges;
    }
    return t;
  }
  void Record(PhaseResult r, uint64_t ops, const Timed& t, const std::string& notes) {
    r.ops = ops;
    r.seconds = t.seconds;
    r.ops_per_sec = t.seconds > 0 ? static_cast<double>(ops) / t.seconds : 0;
    r.p50_us = t.hist.QuantileUs(0.50);
    r.p99_us = t.hist.QuantileUs(0.99);
    if (WritePhase(r.phase)) {
      r.io_measured = true;
      r.io_known = t.io_known;
      if (t.io_known) {
        // Counters only grow; a wrap is not a figure either.
        r.io_known = t.io_after.write_bytes >= t.io_before.write_bytes &&
                     t.io_after.cancelled_write_bytes >= t.io_before.cancelled_write_bytes;
        r.write_bytes = t.io_after.write_bytes - t.io_before.write_bytes;
        r.cancelled_write_bytes =
            t.io_after.cancelled_write_bytes - t.io_before.cancelled_write_bytes;
        if (!r.io_known) r.write_bytes = r.cancelled_write_bytes = 0;
      }
    }
    if (WritePhase(r.phase) && t.waits_known) {
      r.waits_known = true;
      r.merge_waits = t.waits.merge_waits;
      r.merge_wait_seconds = t.waits.merge_wait_seconds;
      r.writer_checkpoints = t.waits.checkpoints;
      r.log_full_merges = t.waits.log_full_merges;
    }
    r.notes = settings_;
    if (!notes.empty()) r.notes += "; " + notes;
    Push(std::move(r));
  }
  // Keeps a row, and with WorkloadConfig::phase_lines announces it: in a
  // log, the only sign of progress during a long run.
  void Push(PhaseResult r) {
    if (config_.phase_lines) {
      std::string phase = r.phase;
      if (config_.read_threads.size() > 1 && ThreadedPhase(phase))
        phase += " x" + std::to_string(r.threads);
      // (Over the phase's bar, which is redrawn below it until it ends.)
      std::fprintf(stderr, "%s%s %s %s %s: %s ops/s\n", config_.progress ? "\r\033[K" : "",
                   engine_.c_str(), DurabilityName(config_.durability),
                   std::to_string(data_.size()).c_str(), phase.c_str(),
                   r.available ? FormatRate(r.ops_per_sec).c_str() : "n/a");
    }
    results_.push_back(std::move(r));
  }
  uint64_t DurableCap(uint64_t ops) const {
    if (config_.durability == Durability::kNone || config_.max_durable_ops == 0) return ops;
    return std::min(ops, config_.max_durable_ops);
  }
  // WorkloadConfig::flush_before_writes: untimed, before a write phase.
  void FlushBeforeWrites() const {
    if (config_.flush_before_writes) ::sync();
  }
  std::string Label(const std::string& phase, int threads = 0) const {
    std::string label = engine_ + " " + phase;
    if (threads > 0 && config_.read_threads.size() > 1) label += " x" + std::to_string(threads);
    return label + " (" + std::to_string(data_.size()) + ")";
  }

  // Opens a fresh store in dir_/name (with or without the key index, or
  // the compound phase's (g, n) index) and its sessions; CloseStore closes
  // it and records its disk use on the stage's last row.
  Status OpenStore(const std::string& name, bool key_index, bool group_index = false);
  Status CloseStore(size_t first_row);
  bool WantedAny(std::initializer_list<const char*> phases) const {
    for (const char* p : phases)
      if (Wanted(p)) return true;
    return false;
  }

  // Loads the N documents, timing them as `phase` (insert, insert_noindex).
  Status Load(const std::string& phase);
  // The read phases, on `threads` workers.
  Status SearchId(int threads);
  Status SearchKey(int threads);
  // Point reads per search phase (WorkloadConfig::lookups).
  uint64_t Lookups() const {
    return config_.lookups != 0 ? config_.lookups : std::max<uint64_t>(1, data_.size() / 10);
  }
  Status SearchValue(int threads);
  Status SearchPrefix(int threads);
  Status SortLimit(int threads);
  Status Update();
  Status Push();
  // The documents' numbers in key order (bytewise), built on first use:
  // the oracle of the key range phases.
  const std::vector<uint32_t>& ByKey();
  // Where key k would go in ByKey() (the first document whose key >= k).
  size_t KeyRank(std::string_view k);
  // The values of ByKey()[begin, end), the answer a key range query owes.
  std::vector<std::string> ValuesInKeyOrder(size_t begin, size_t end);
  Status Delete();
  Status DeleteValue();
  Status DeleteAll();
  Status BuildIndex();
  Status Compound();
  Status Mapping();
  // Untimed: the store holds `docs` documents and `key_entries` entries in
  // the key index.
  Status CheckCount(const std::string& phase, uint64_t docs, uint64_t key_entries);

  const std::string engine_;
  const Dataset& data_;
  const WorkloadConfig& config_;
  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::string dir_;        // the engine's directory
  std::string store_dir_;  // the open store's, under dir_
  std::string settings_;
  int writers_ = 1;
  std::vector<uint64_t> perm_;    // distinct documents for update, delete, ...
  std::vector<uint32_t> by_key_;  // ByKey()
  uint64_t live_ = 0;             // documents in the open store
  std::vector<PhaseResult> results_;
};

Result<std::vector<PhaseResult>> Runner::Run() {
  auto b = NewBackend(engine_);
  if (!b.ok()) return b.status();
  writers_ = InsertWriters(config_.durability, config_.threads);
  const bool supported = b.value()->Supports(config_.durability);
  const bool has_mapping = b.value()->HasMapping();
  if (!supported) {
    for (const auto& phase : AllPhases()) {
      if (!Wanted(phase)) continue;
      PhaseResult r = Row(phase);
      r.available = false;
      r.notes = std::string("n/a: ") + engine_ + " has no " + DurabilityName(config_.durability) +
                " mode";
      Push(std::move(r));
    }
    return results_;
  }

  // Gone on Ctrl-C too, as at the end of the run (bench/signal_cleanup.h).
  const std::string prefix = (config_.dir.empty() ? std::string(".") : config_.dir) + "/" +
                             engine_ + "-" + std::to_string(data_.size()) + "-";
  int cleanup_slot = -1;
  dir_ = MakeTempDir(prefix, !config_.keep_data, &cleanup_slot);
  if (dir_.empty()) {
    return Status::IOError("cannot create data directory",
                           prefix + "XXXXXX: " + std::strerror(errno));
  }

  // Distinct documents for update, delete and delete_value.
  perm_.resize(data_.size());
  for (uint64_t i = 0; i < perm_.size(); ++i) perm_[i] = i;
  std::mt19937_64 rng(data_.seed() ^ 0x5eed0000u);
  std::shuffle(perm_.begin(), perm_.end(), rng);

  Status s;
  // The main store: the seed workload, then seed 002's deletes.
  if (WantedAny({"insert", "search_id", "search_key", "search_value", "search_prefix", "sort_limit",
                 "update", "push", "delete", "delete_value", "delete_all"})) {
    size_t first = results_.size();
    s = OpenStore("main", true);
    if (s.ok()) s = Load("insert");
    // Each read phase once per thread count, on the same loaded store.
    const std::vector<int> counts = ReadThreads();
    for (int n : counts)
      if (s.ok() && Wanted("search_id")) s = SearchId(n);
    for (int n : counts)
      if (s.ok() && Wanted("search_key")) s = SearchKey(n);
    for (int n : counts)
      if (s.ok() && Wanted("search_value")) s = SearchValue(n);
    for (int n : counts)
      if (s.ok() && Wanted("search_prefix")) s = SearchPrefix(n);
    for (int n : counts)
      if (s.ok() && Wanted("sort_limit")) s = SortLimit(n);
    if (s.ok() && Wanted("update")) s = Update();
    if (s.ok() && Wanted("push")) s = Push();
    if (s.ok() && Wanted("delete")) s = Delete();
    if (s.ok() && Wanted("delete_value")) s = DeleteValue();
    if (s.ok() && Wanted("delete_all")) s = DeleteAll();
    Status close = CloseStore(first);
    if (s.ok()) s = close;
  }
  // Seed 002 without the index: the same inserts, then the index built.
  if (s.ok() && WantedAny({"insert_noindex", "build_index"})) {
    size_t first = results_.size();
    s = OpenStore("noindex", false);
    if (s.ok()) s = Load("insert_noindex");
    if (s.ok() && Wanted("build_index")) s = BuildIndex();
    Status close = CloseStore(first);
    if (s.ok()) s = close;
  }
  // The compound index query, on documents of its own.
  if (s.ok() && Wanted("compound")) {
    size_t first = results_.size();
    s = OpenStore("compound", false, true);
    if (s.ok()) s = Compound();
    Status close = CloseStore(first);
    if (s.ok()) s = close;
  }
  // Seed 003: the typed mapping layer against the raw API.
  if (s.ok() && Wanted("mapping")) {
    if (has_mapping) {
      size_t first = results_.size();
      s = OpenStore("mapping", true);
      if (s.ok()) s = Mapping();
      Status close = CloseStore(first);
      if (s.ok()) s = close;
    } else {
      PhaseResult r = Row("mapping");
      r.available = false;
      r.notes = "n/a: " + engine_ + " has no typed mapping layer (mmdoc's Mapping<T>, seed 003)";
      Push(std::move(r));
    }
  }

  if (!config_.keep_data) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    ForgetOnSignal(cleanup_slot);
  }
  if (!s.ok()) return s;
  return results_;
}

std::vector<PhaseResult> Runner::RowsAfterFailure(const Status& failure) {
  for (const auto& phase : AllPhases()) {
    if (!Wanted(phase)) continue;
    const bool ran = std::any_of(results_.begin(), results_.end(),
                                 [&](const PhaseResult& r) { return r.phase == phase; });
    if (ran) continue;
    PhaseResult r = Row(phase);
    r.available = false;
    r.notes = "n/a: the run failed: " + failure.ToString();
    Push(std::move(r));
  }
  return results_;
}

Status Runner::OpenStore(const std::string& name, bool key_index, bool group_index) {
  auto b = NewBackend(engine_);
  if (!b.ok()) return b.status();
  backend_ = std::move(b.value());
  store_dir_ = dir_ + "/" + name;
  std::error_code ec;
  std::filesystem::create_directory(store_dir_, ec);
  if (ec) return Status::IOError("cannot create", store_dir_);
  BackendConfig bc;
  bc.durability = config_.durability;
  bc.expected_docs = data_.size();
  bc.expected_bytes = data_.bson_bytes();
  int readers = 0;
  for (int n : ReadThreads()) readers = std::max(readers, n);
  bc.max_sessions = std::max(readers, writers_);
  bc.sync_interval_ms = config_.sync_interval_ms;
  bc.mmdoc_log_bytes = config_.mmdoc_log_bytes;
  bc.mmdoc_page_size = config_.mmdoc_page_size;
  bc.mmdoc_buffer_bytes = config_.mmdoc_buffer_bytes;
  bc.key_index = key_index;
  bc.group_index = group_index;
  Status s = backend_->Open(store_dir_, bc);
  if (s.ok()) {
    settings_ = backend_->settings();
    for (int i = 0; i < bc.max_sessions && s.ok(); ++i) {
      auto session = backend_->NewSession();
      if (session.ok()) {
        sessions_.push_back(std::move(session.value()));
      } else {
        s = session.status();
      }
    }
  }
  live_ = 0;
  if (!s.ok()) return Status::IOError(engine_ + " open", s.ToString());
  return Status::OK();
}

Status Runner::CloseStore(size_t first_row) {
  sessions_.clear();
  Status close = backend_ != nullptr ? backend_->Close() : Status::OK();
  backend_.reset();
  if (results_.size() > first_row) results_.back().store_bytes = DiskUsage(store_dir_);
  if (!close.ok()) return Status::IOError(engine_ + " close", close.ToString());
  return Status::OK();
}

Status Runner::CheckCount(const std::string& phase, uint64_t docs, uint64_t key_entries) {
  uint64_t d = 0, k = 0;
  Status s = sessions_[0]->Count(&d, &k);
  if (!s.ok()) return Status::IOError(engine_ + " " + phase + " count", s.ToString());
  if (d != docs || k != key_entries) {
    return Status::Corruption(engine_ + " " + phase + " check: " + std::to_string(d) +
                              " docs and " + std::to_string(k) + " key entries, expected " +
                              std::to_string(docs) + " and " + std::to_string(key_entries));
  }
  return Status::OK();
}

Status Runner::Load(const std::string& phase) {
  uint64_t n = data_.size();
  uint64_t timed = DurableCap(n);
  uint64_t preload = n - timed;
  std::string notes;
  if (preload > 0) {
    // Untimed bulk load, so the timed inserts meet a store of N documents.
    Progress progress(config_.progress, Label("preload"), preload);
    Timed t = RunTimed(1, preload, &progress, [&](const Share& sh) {
      return WriteLoop(sh, 1000, [&](Session* session, uint64_t i) {
        return session->Insert(DocRef{data_.id(i), data_.key(i), data_.bson(i)});
      });
    });
    if (!t.status.ok())
      return Status::IOError(engine_ + " " + phase + " preload", t.status.ToString());
    notes = "timed the last " + std::to_string(timed) + " of " + std::to_string(n) +
            " inserts (the first " + std::to_string(preload) + " preloaded in batches of 1000)";
  }
  FlushBeforeWrites();
  Progress progress(config_.progress, Label(phase), timed);
  Timed t = RunTimed(writers_, timed, &progress, [&](const Share& sh) {
    return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
      uint64_t i = preload + k;
      return session->Insert(DocRef{data_.id(i), data_.key(i), data_.bson(i)});
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " " + phase, t.status.ToString());
  if (writers_ > 1) {
    if (!notes.empty()) notes += "; ";
    notes += std::to_string(writers_) + " writer threads";
  }
  live_ = n;
  if (Wanted(phase)) {
    PhaseResult r = Row(phase);
    r.store_bytes = DiskUsage(store_dir_);
    Record(std::move(r), timed, t, notes);
  }
  return Status::OK();
}

Status Runner::SearchId(int threads) {
  const uint64_t ops = Lookups();
  const std::string before = backend_->State();
  Progress progress(config_.progress, Label("search_id", threads), ops);
  Timed t = RunTimed(threads, ops, &progress, [&](const Share& sh) {
    std::mt19937_64 rng(data_.seed() * 31 + 1 + sh.thread);
    std::uniform_int_distribution<uint64_t> pick(0, data_.size() - 1);
    std::string value;
    return ReadLoop(sh, [&](Session* session, uint64_t) {
      uint64_t i = pick(rng);
      MMDOC_RETURN_IF_ERROR(session->GetById(data_.id(i), &value));
      if (value != data_.value(i)) return Status::Corruption("wrong value for _id", data_.id(i));
      return Status::OK();
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " search_id", t.status.ToString());
  PhaseResult r = Row("search_id", threads);
  r.state_before = before;
  r.state_after = backend_->State();
  Record(std::move(r), ops, t, "");
  return Status::OK();
}

Status Runner::SearchKey(int threads) {
  const uint64_t ops = Lookups();
  const std::string before = backend_->State();
  Progress progress(config_.progress, Label("search_key", threads), ops);
  Timed t = RunTimed(threads, ops, &progress, [&](const Share& sh) {
    std::mt19937_64 rng(data_.seed() * 31 + 2 + sh.thread);
    std::uniform_int_distribution<uint64_t> pick(0, data_.size() - 1);
    std::string value;
    return ReadLoop(sh, [&](Session* session, uint64_t) {
      uint64_t i = pick(rng);
      MMDOC_RETURN_IF_ERROR(session->FindByKey(data_.key(i), &value));
      if (value != data_.value(i)) return Status::Corruption("wrong value for key", data_.key(i));
      return Status::OK();
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " search_key", t.status.ToString());
  PhaseResult r = Row("search_key", threads);
  r.state_before = before;
  r.state_after = backend_->State();
  Record(std::move(r), ops, t, "");
  return Status::OK();
}

Status Runner::SearchValue(int threads) {
  uint64_t ops = static_cast<uint64_t>(std::max(1, config_.scans));
  Progress progress(config_.progress, Label("search_value", threads), ops);
  Timed t = RunTimed(threads, ops, &progress, [&](const Share& sh) {
    std::mt19937_64 rng(data_.seed() * 31 + 3 + sh.thread);
    std::uniform_int_distribution<uint64_t> pick(0, data_.size() - 1);
    uint64_t prev = NowNs();
    for (uint64_t k = sh.begin; k < sh.end; ++k) {
      uint64_t i = pick(rng);
      bool found = false;
      MMDOC_RETURN_IF_ERROR(sh.session->ScanByValue(data_.value(i), &found, nullptr));
      if (!found) return Status::Corruption("scan missed value", data_.value(i));
      uint64_t now = NowNs();
      sh.hist->Add(now - prev);
      prev = now;
      sh.progress->Add(1);
    }
    return Status::OK();
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " search_value", t.status.ToString());
  PhaseResult r = Row("search_value", threads);
  // Every engine scans the same stored BSON bytes: all N documents.
  double bytes = static_cast<double>(data_.bson_bytes()) * static_cast<double>(ops);
  r.gb_per_sec = t.seconds > 0 ? bytes / t.seconds / 1e9 : 0;
  Record(std::move(r), ops, t,
         "full scan of " + std::to_string(data_.size()) +
             " docs per op (no early stop): a byte pre-check for the value, then a BSON parse of "
             "candidates");
  return Status::OK();
}

const std::vector<uint32_t>& Runner::ByKey() {
  if (by_key_.size() != data_.size()) {
    by_key_.resize(data_.size());
    for (uint64_t i = 0; i < data_.size(); ++i) by_key_[i] = static_cast<uint32_t>(i);
    std::sort(by_key_.begin(), by_key_.end(),
              [&](uint32_t a, uint32_t b) { return data_.key(a) < data_.key(b); });
  }
  return by_key_;
}

size_t Runner::KeyRank(std::string_view k) {
  const auto& order = ByKey();
  return static_cast<size_t>(
      std::lower_bound(order.begin(), order.end(), k,
                       [&](uint32_t i, std::string_view want) { return data_.key(i) < want; }) -
      order.begin());
}

std::vector<std::string> Runner::ValuesInKeyOrder(size_t begin, size_t end) {
  std::vector<std::string> out;
  for (size_t j = begin; j < end; ++j) out.emplace_back(data_.value(ByKey()[j]));
  return out;
}

Status Runner::SearchPrefix(int threads) {
  // Random 3-hex-digit prefixes (a GUID starts with 8 hex digits): each
  // matches 1/4096 of the keys, about N/4096 documents.
  const uint64_t ops = std::max<uint64_t>(10, data_.size() / 1000);
  std::vector<std::string> prefixes(ops);
  std::mt19937_64 rng(data_.seed() * 31 + 11);
  std::uniform_int_distribution<int> pick(0, 4095);
  for (auto& p : prefixes) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%03x", pick(rng));
    p = buf;
  }
  std::vector<uint64_t> found(ops, 0);
  Progress progress(config_.progress, Label("search_prefix", threads), ops);
  Timed t = RunTimed(threads, ops, &progress, [&](const Share& sh) {
    std::vector<std::string> values;
    return ReadLoop(sh, [&](Session* session, uint64_t k) {
      MMDOC_RETURN_IF_ERROR(session->FindKeyPrefix(prefixes[k], &values));
      found[k] = values.size();
      return Status::OK();
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " search_prefix", t.status.ToString());
  // Untimed check: every query found as many documents as the store holds
  // under its prefix; a sample returned exactly those, in key order.
  uint64_t total = 0, least = UINT64_MAX, most = 0;
  std::vector<std::string> values;
  for (uint64_t k = 0; k < ops; ++k) {
    const size_t begin = KeyRank(prefixes[k]), end = KeyRank(PrefixEnd(prefixes[k]));
    if (found[k] != end - begin) {
      return Status::Corruption(engine_ + " search_prefix check: " + std::to_string(found[k]) +
                                    " documents, expected " + std::to_string(end - begin),
                                prefixes[k]);
    }
    if (k % std::max<uint64_t>(1, ops / 10) == 0) {
      Status s = sessions_[0]->FindKeyPrefix(prefixes[k], &values);
      if (s.ok() && values != ValuesInKeyOrder(begin, end))
        s = Status::Corruption("wrong documents or order for prefix", prefixes[k]);
      if (!s.ok()) return Status::IOError(engine_ + " search_prefix check", s.ToString());
    }
    total += found[k];
    least = std::min(least, found[k]);
    most = std::max(most, found[k]);
  }
  char notes[256];
  std::snprintf(notes, sizeof notes,
                "%llu queries for the keys starting with 3 random hex digits, each a key index "
                "range then its documents: %.1f docs per query (%llu..%llu)",
                static_cast<unsigned long long>(ops),
                static_cast<double>(total) / static_cast<double>(ops),
                static_cast<unsigned long long>(least), static_cast<unsigned long long>(most));
  Record(Row("search_prefix", threads), ops, t, notes);
  return Status::OK();
}

Status Runner::SortLimit(int threads) {
  constexpr int kLimit = 10;
  // Pages of 10 by key from random GUIDs (not keys of the dataset).
  const uint64_t ops = std::max<uint64_t>(10, Lookups() / kLimit);
  std::vector<std::string> from(ops);
  std::mt19937_64 rng(data_.seed() * 31 + 13);
  boost::uuids::basic_random_generator<std::mt19937_64> gen(&rng);
  for (auto& g : from) g = boost::uuids::to_string(gen());
  std::vector<uint64_t> found(ops, 0);
  Progress progress(config_.progress, Label("sort_limit", threads), ops);
  Timed t = RunTimed(threads, ops, &progress, [&](const Share& sh) {
    std::vector<std::string> values;
    return ReadLoop(sh, [&](Session* session, uint64_t k) {
      MMDOC_RETURN_IF_ERROR(session->FindKeysFrom(from[k], kLimit, &values));
      found[k] = values.size();
      return Status::OK();
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " sort_limit", t.status.ToString());
  // Untimed check: every page is full (short only at the end of the keys);
  // a sample holds exactly the next 10 documents by key, in order.
  std::vector<std::string> values;
  for (uint64_t k = 0; k < ops; ++k) {
    const size_t begin = KeyRank(from[k]);
    const size_t end = std::min<size_t>(data_.size(), begin + kLimit);
    if (found[k] != end - begin) {
      return Status::Corruption(engine_ + " sort_limit check: " + std::to_string(found[k]) +
                                    " documents, expected " + std::to_string(end - begin),
                                from[k]);
    }
    if (k % std::max<uint64_t>(1, ops / 20) == 0) {
      Status s = sessions_[0]->FindKeysFrom(from[k], kLimit, &values);
      if (s.ok() && values != ValuesInKeyOrder(begin, end))
        s = Status::Corruption("wrong documents or order from", from[k]);
      if (!s.ok()) return Status::IOError(engine_ + " sort_limit check", s.ToString());
    }
  }
  Record(Row("sort_limit", threads), ops, t,
         "pages of the 10 docs with key >= a random GUID, in key order, through the key "
         "index");
  return Status::OK();
}

Status Runner::Update() {
  uint64_t ops =
      DurableCap(std::min<uint64_t>(std::max<uint64_t>(1, data_.size() / 10), data_.new_values()));
  FlushBeforeWrites();
  Progress progress(config_.progress, Label("update"), ops);
  Timed t = RunTimed(1, ops, &progress, [&](const Share& sh) {
    return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
      return session->UpdateValue(data_.id(perm_[k]), data_.new_value(k));
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " update", t.status.ToString());
  // Untimed check: updated documents carry their new value, by _id and key.
  std::string value;
  for (uint64_t k = 0; k < ops; k += std::max<uint64_t>(1, ops / 100)) {
    uint64_t i = perm_[k];
    Status s = sessions_[0]->FindByKey(data_.key(i), &value);
    if (s.ok() && value != data_.new_value(k)) s = Status::Corruption("update not visible");
    if (!s.ok()) return Status::IOError(engine_ + " update check", s.ToString());
  }
  Record(Row("update"), ops, t, "");
  return Status::OK();
}

Status Runner::Push() {
  // Random documents (their own shuffle), each pushed to in two
  // transactions when ops allow: push k goes to docs[k % m], so the second
  // round appends to the array the first created. m >= the batch keeps a
  // transaction's documents distinct (backend.h: PushTag).
  const uint64_t ops = DurableCap(std::max<uint64_t>(1, data_.size() / 10));
  const uint64_t batch = static_cast<uint64_t>(config_.batch);
  const uint64_t m =
      std::min<uint64_t>(data_.size(), std::max<uint64_t>((ops + 1) / 2, std::min(batch, ops)));
  std::vector<uint64_t> docs(data_.size());
  for (uint64_t i = 0; i < docs.size(); ++i) docs[i] = i;
  std::mt19937_64 rng(data_.seed() * 31 + 17);
  std::shuffle(docs.begin(), docs.end(), rng);
  docs.resize(m);
  std::vector<std::string> tags(ops);
  for (uint64_t k = 0; k < ops; ++k) tags[k] = "t" + std::to_string(k);
  FlushBeforeWrites();
  Progress progress(config_.progress, Label("push"), ops);
  Timed t = RunTimed(1, ops, &progress, [&](const Share& sh) {
    return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
      return session->PushTag(data_.id(docs[k % m]), tags[k]);
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " push", t.status.ToString());
  // Untimed check: a sample of documents holds exactly its tags, in push
  // order, and is still found by its key.
  std::string doc, value;
  std::vector<std::string> got, want;
  for (uint64_t j = 0; j < std::min(m, ops); j += std::max<uint64_t>(1, m / 100)) {
    want.clear();
    for (uint64_t k = j; k < ops; k += m) want.push_back(tags[k]);
    const uint64_t i = docs[j];
    Status s = sessions_[0]->GetDocument(data_.id(i), &doc);
    if (s.ok() && !TagsOf(doc, &got)) s = Status::Corruption("bad tags", data_.id(i));
    if (s.ok() && got != want) s = Status::Corruption("wrong tags", data_.id(i));
    if (s.ok()) s = sessions_[0]->FindByKey(data_.key(i), &value);
    if (!s.ok()) return Status::IOError(engine_ + " push check", s.ToString());
  }
  Record(Row("push"), ops, t,
         "append a string to the `tags` array of a document found by _id (created when "
         "missing), " +
             std::to_string(m) + " random docs, " + std::to_string((ops + m - 1) / m) +
             " pushes each at most");
  return Status::OK();
}

Status Runner::Delete() {
  uint64_t n = std::max<uint64_t>(1, data_.size() / 10);
  uint64_t offset = n;  // perm_[0, n) were updated; delete the next n (2n <= N)
  uint64_t ops = DurableCap(n);
  FlushBeforeWrites();
  Progress progress(config_.progress, Label("delete"), ops);
  Timed t = RunTimed(1, ops, &progress, [&](const Share& sh) {
    return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
      return session->Delete(data_.id(perm_[offset + k]));
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " delete", t.status.ToString());
  // Untimed check: deleted documents are gone by _id and by key.
  std::string value;
  for (uint64_t k = 0; k < ops; k += std::max<uint64_t>(1, ops / 100)) {
    uint64_t i = perm_[offset + k];
    Status a = sessions_[0]->GetById(data_.id(i), &value);
    Status b = sessions_[0]->FindByKey(data_.key(i), &value);
    if (!a.IsNotFound() || !b.IsNotFound()) {
      return Status::Corruption(engine_ + " delete check: document still found", data_.id(i));
    }
  }
  live_ -= ops;
  Record(Row("delete"), ops, t, "");
  return Status::OK();
}

Status Runner::DeleteValue() {
  // Documents neither updated nor deleted (perm_ past the first 2 * N/10),
  // each found by its original value.
  uint64_t n10 = std::max<uint64_t>(1, data_.size() / 10);
  uint64_t offset = std::min<uint64_t>(2 * n10, data_.size() - 1);
  // Half as many as search_value's scans: each op costs a scan like them,
  // and the one delete it adds is the same work on every engine.
  uint64_t ops = DurableCap(std::min<uint64_t>(
      static_cast<uint64_t>(std::max(1, (config_.scans + 1) / 2)), data_.size() - offset));
  FlushBeforeWrites();
  Progress progress(config_.progress, Label("delete_value"), ops);
  Timed t = RunTimed(1, ops, &progress, [&](const Share& sh) {
    return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
      uint64_t i = perm_[offset + k];
      uint64_t deleted = 0;
      MMDOC_RETURN_IF_ERROR(session->DeleteByValue(data_.value(i), &deleted));
      if (deleted != 1) {
        return Status::Corruption(
            "deleted " + std::to_string(deleted) + " documents by value, expected 1",
            data_.value(i));
      }
      return Status::OK();
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " delete_value", t.status.ToString());
  live_ -= ops;
  // Untimed check: the deleted documents are gone by _id and by key; the
  // next one in line, never deleted, is still there; the count is right.
  std::string value;
  for (uint64_t k = 0; k < ops; ++k) {
    uint64_t i = perm_[offset + k];
    Status a = sessions_[0]->GetById(data_.id(i), &value);
    Status b = sessions_[0]->FindByKey(data_.key(i), &value);
    if (!a.IsNotFound() || !b.IsNotFound()) {
      return Status::Corruption(engine_ + " delete_value check: document still found", data_.id(i));
    }
  }
  if (offset + ops < data_.size()) {
    uint64_t i = perm_[offset + ops];
    Status a = sessions_[0]->GetById(data_.id(i), &value);
    if (!a.ok() || value != data_.value(i)) {
      return Status::Corruption(engine_ + " delete_value check: a neighbour went missing",
                                data_.id(i));
    }
  }
  MMDOC_RETURN_IF_ERROR(CheckCount("delete_value", live_, live_));
  Record(Row("delete_value"), ops, t,
         "full scan of the store per op (value has no index), deleting the "
         "match and its key entry");
  return Status::OK();
}

Status Runner::DeleteAll() {
  uint64_t docs = live_;
  FlushBeforeWrites();
  Progress progress(config_.progress, Label("delete_all"), 1);
  Timed t = RunTimed(1, 1, &progress, [&](const Share& sh) {
    return WriteLoop(sh, 1, [&](Session* session, uint64_t) { return session->DeleteAll(); });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " delete_all", t.status.ToString());
  live_ = 0;
  // Untimed check: nothing is left, by count, by _id or by key.
  MMDOC_RETURN_IF_ERROR(CheckCount("delete_all", 0, 0));
  std::string value;
  for (uint64_t k = 0; k < data_.size(); k += std::max<uint64_t>(1, data_.size() / 100)) {
    if (!sessions_[0]->GetById(data_.id(k), &value).IsNotFound() ||
        !sessions_[0]->FindByKey(data_.key(k), &value).IsNotFound()) {
      return Status::Corruption(engine_ + " delete_all check: document still found", data_.id(k));
    }
  }
  Record(Row("delete_all"), docs, t,
         "one op deleting all " + std::to_string(docs) +
             " remaining docs and their key entries; ops = docs, p50/p99 = "
             "the whole op");
  return Status::OK();
}

Status Runner::BuildIndex() {
  uint64_t docs = live_;
  FlushBeforeWrites();
  Progress progress(config_.progress, Label("build_index"), 1);
  Timed t = RunTimed(1, 1, &progress, [&](const Share& sh) {
    return WriteLoop(sh, 1, [&](Session* session, uint64_t) { return session->BuildKeyIndex(); });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " build_index", t.status.ToString());
  // Untimed check: every document is in the index, and found through it.
  MMDOC_RETURN_IF_ERROR(CheckCount("build_index", docs, docs));
  std::string value;
  for (uint64_t k = 0; k < data_.size(); k += std::max<uint64_t>(1, data_.size() / 100)) {
    Status s = sessions_[0]->FindByKey(data_.key(k), &value);
    if (s.ok() && value != data_.value(k))
      s = Status::Corruption("wrong value for key", data_.key(k));
    if (!s.ok()) return Status::IOError(engine_ + " build_index check", s.ToString());
  }
  PhaseResult r = Row("build_index");
  r.store_bytes = DiskUsage(store_dir_);
  Record(std::move(r), docs, t,
         "one op indexing " + std::to_string(docs) +
             " stored docs (unique key); ops = docs, p50/p99 = the whole op");
  return Status::OK();
}

Status Runner::Compound() {
  // M documents {_id, g, n, payload}: the dataset's _id and value (as the
  // payload), g a random group, about 100 documents per group up to 1000
  // groups, n distinct and spread over all of int32, the negative half too
  // (i times an odd constant is a bijection of 32-bit integers), so an
  // engine's key encoding must order signed numbers.
  const uint64_t m = std::max<uint64_t>(1, std::min(config_.compound_docs, data_.size()));
  const int32_t groups = static_cast<int32_t>(std::clamp<uint64_t>(m / 100, 1, 1000));
  std::mt19937_64 rng(data_.seed() * 31 + 19);
  std::uniform_int_distribution<int32_t> pick_group(0, groups - 1);
  const uint32_t mix = static_cast<uint32_t>(rng());
  std::vector<int32_t> g(m), n(m);
  std::string arena;
  std::vector<uint64_t> offsets = {0};
  offsets.reserve(m + 1);
  for (uint64_t i = 0; i < m; ++i) {
    g[i] = pick_group(rng);
    n[i] = static_cast<int32_t>((static_cast<uint32_t>(i) * 2654435761u) ^ mix);
    arena += MakeGroupDocument(data_.id(i), g[i], n[i], data_.value(i));
    offsets.push_back(arena.size());
  }
  auto bson = [&](uint64_t i) {
    return std::string_view(arena.data() + offsets[i], offsets[i + 1] - offsets[i]);
  };

  // The load, untimed as a phase (its rate goes in the notes): batches of
  // 1000 into the store with the (g, n) index already there.
  Timed load;
  {
    Progress progress(config_.progress, Label("compound load"), m);
    load = RunParallel(sessions_, 1, m, &progress, [&](const Share& sh) {
      return WriteLoop(sh, 1000, [&](Session* session, uint64_t i) {
        return session->InsertGrouped(GroupDocRef{data_.id(i), g[i], n[i], bson(i)});
      });
    });
  }
  if (load.status.IsNotSupported()) {
    PhaseResult r = Row("compound");
    r.available = false;
    r.notes = "n/a: " + engine_ + " has no compound index here (" + load.status.ToString() + ")";
    Push(std::move(r));
    return Status::OK();
  }
  if (!load.status.ok()) return Status::IOError(engine_ + " compound load", load.status.ToString());

  // Queries {g: G, n: {$gte: A, $lt: B}} sorted by n, limit 10: a random
  // group and a random range of it expected to hold about 20 documents,
  // so most queries stop at the limit and some return fewer.
  constexpr int kLimit = 10;
  struct Query {
    int32_t g, lo, hi;
  };
  // As many queries as search_id's lookups: a tenth of that (sort_limit's
  // count) took 0.1-0.2 s at 1M, and ratios swung 1.4x-3.3x between two
  // runs on the shared machine.
  const uint64_t ops = std::max<uint64_t>(10, Lookups());
  const double per_group = static_cast<double>(m) / groups;
  const int64_t width =
      std::clamp<int64_t>(std::llround(2 * kLimit * 4294967296.0 / per_group), 1, UINT32_MAX);
  std::uniform_int_distribution<int64_t> pick_lo(INT32_MIN, int64_t{INT32_MAX} - width + 1);
  std::vector<Query> queries(ops);
  for (Query& q : queries) {
    const int64_t lo = pick_lo(rng);
    q = Query{pick_group(rng), static_cast<int32_t>(lo),
              static_cast<int32_t>(std::min<int64_t>(lo + width, INT32_MAX))};
  }
  std::vector<uint64_t> found(ops, 0);
  Progress progress(config_.progress, Label("compound"), ops);
  Timed t = RunTimed(config_.threads, ops, &progress, [&](const Share& sh) {
    std::vector<std::string> docs;
    return ReadLoop(sh, [&](Session* session, uint64_t k) {
      const Query& q = queries[k];
      MMDOC_RETURN_IF_ERROR(session->FindGroupRange(q.g, q.lo, q.hi, kLimit, &docs));
      found[k] = docs.size();
      return Status::OK();
    });
  });
  if (!t.status.ok()) return Status::IOError(engine_ + " compound", t.status.ToString());

  // Untimed check against the documents sorted by (g, n): every query found
  // as many as it owes; a sample returned exactly those bytes, in n order.
  std::vector<uint32_t> order(m);
  for (uint64_t i = 0; i < m; ++i) order[i] = static_cast<uint32_t>(i);
  auto less = [&](uint32_t a, uint32_t b) { return g[a] != g[b] ? g[a] < g[b] : n[a] < n[b]; };
  std::sort(order.begin(), order.end(), less);
  auto rank = [&](int32_t gv, int32_t nv) {
    return static_cast<size_t>(
        std::lower_bound(order.begin(), order.end(), 0,
                         [&](uint32_t i, int) { return g[i] != gv ? g[i] < gv : n[i] < nv; }) -
        order.begin());
  };
  std::vector<std::string> docs;
  uint64_t total = 0;
  for (uint64_t k = 0; k < ops; ++k) {
    const Query& q = queries[k];
    const size_t begin = rank(q.g, q.lo);
    const size_t end = std::min<size_t>(rank(q.g, q.hi), begin + kLimit);
    if (found[k] != end - begin) {
      return Status::Corruption(engine_ + " compound check: " + std::to_string(found[k]) +
                                " documents, expected " + std::to_string(end - begin) + " for g " +
                                std::to_string(q.g) + ", n in [" + std::to_string(q.lo) + ", " +
                                std::to_string(q.hi) + ")");
    }
    total += found[k];
    if (k % std::max<uint64_t>(1, ops / 20) != 0) continue;
    Status s = sessions_[0]->FindGroupRange(q.g, q.lo, q.hi, kLimit, &docs);
    for (size_t j = begin; s.ok() && j < end; ++j) {
      if (docs[j - begin] != bson(order[j])) {
        s = Status::Corruption("wrong document or order for g " + std::to_string(q.g),
                               data_.id(order[j]));
      }
    }
    if (!s.ok()) return Status::IOError(engine_ + " compound check", s.ToString());
  }
  char notes[512];
  std::snprintf(notes, sizeof notes,
                "%llu docs {_id, g, n, payload} in %d groups, index (g, n); %llu queries {g: G, "
                "n: {$gte: A, $lt: B}} sort n limit %d (about %d docs in range), whole docs: "
                "%.1f docs per query; the load (untimed, batches of 1000) took %.2f s, %.0f "
                "docs/s",
                static_cast<unsigned long long>(m), groups, static_cast<unsigned long long>(ops),
                kLimit, 2 * kLimit, static_cast<double>(total) / static_cast<double>(ops),
                load.seconds, load.seconds > 0 ? static_cast<double>(m) / load.seconds : 0);
  Record(Row("compound"), ops, t, notes);
  return Status::OK();
}

Status Runner::Mapping() {
  const uint64_t m =
      DurableCap(std::max<uint64_t>(1, std::min(config_.mapping_docs, data_.size())));
  std::vector<MappedItem> items(m);
  for (uint64_t i = 0; i < m; ++i) {
    items[i].id = data_.id(i);
    items[i].key = data_.key(i);
    items[i].value = data_.value(i);
  }
  std::vector<uint64_t> order(m);
  for (uint64_t i = 0; i < m; ++i) order[i] = i;
  std::mt19937_64 rng(data_.seed() * 31 + 7);
  std::shuffle(order.begin(), order.end(), rng);

  // The two APIs take turns, a transaction (or a chunk of reads) at a time,
  // each going first in every other turn: on a shared, noisy machine both
  // then run under the same conditions, which separate runs would not.
  Session* session = sessions_[0].get();
  Status s = session->ResetMapping();
  if (!s.ok()) return Status::IOError(engine_ + " mapping", s.ToString());
  const MappingApi kApis[2] = {MappingApi::kRaw, MappingApi::kTyped};
  const char* kNames[2] = {"raw", "typed"};
  Histogram hist[2];
  // Wall-clock and thread CPU seconds per API, of inserts and of reads.
  double insert_s[2] = {0, 0}, read_s[2] = {0, 0};
  double insert_cpu[2] = {0, 0}, read_cpu[2] = {0, 0};
  FlushBeforeWrites();
  Progress progress(config_.progress, Label("mapping"), 4 * m);
  // The bytes written cover both APIs' m inserts (2m in all; the reads
  // write nothing), so per op of the row (2m ops) they are bytes per insert.
  IoCounters io_before, io_after;
  const bool io_known = ReadIoCounters(&io_before);
  const uint64_t batch = static_cast<uint64_t>(config_.batch);
  for (uint64_t begin = 0, turn = 0; begin < m; begin += batch, ++turn) {
    const uint64_t end = std::min(m, begin + batch);
    for (int j = 0; j < 2; ++j) {
      const int side = static_cast<int>((turn + j) % 2);
      const double cpu = ThreadCpuSeconds();
      uint64_t start = NowNs(), prev = start;
      s = session->Begin();
      for (uint64_t k = begin; s.ok() && k < end; ++k) {
        s = session->MappedInsert(kApis[side], items[k]);
        if (s.ok() && k + 1 == end) s = session->Commit();
        uint64_t now = NowNs();
        hist[side].Add(now - prev);
        prev = now;
      }
      if (!s.ok()) {
        return Status::IOError(engine_ + " mapping " + kNames[side] + " insert", s.ToString());
      }
      insert_cpu[side] += ThreadCpuSeconds() - cpu;
      insert_s[side] += static_cast<double>(prev - start) / 1e9;
      progress.Add(end - begin);
    }
  }
  const uint64_t kReadChunk = 1000;
  MappedItem out;
  for (uint64_t begin = 0, turn = 0; begin < m; begin += kReadChunk, ++turn) {
    const uint64_t end = std::min(m, begin + kReadChunk);
    for (int j = 0; j < 2; ++j) {
      const int side = static_cast<int>((turn + j) % 2);
      const double cpu = ThreadCpuSeconds();
      uint64_t start = NowNs(), prev = start;
      for (uint64_t k = begin; s.ok() && k < end; ++k) {
        const MappedItem& want = items[order[k]];
        s = session->MappedGet(kApis[side], want.id, &out);
        if (s.ok() && (out.value != want.value || out.key != want.key))
          s = Status::Corruption("wrong document read back", want.id);
        uint64_t now = NowNs();
        hist[side].Add(now - prev);
        prev = now;
      }
      if (!s.ok()) {
        return Status::IOError(engine_ + " mapping " + kNames[side] + " get", s.ToString());
      }
      read_cpu[side] += ThreadCpuSeconds() - cpu;
      read_s[side] += static_cast<double>(prev - start) / 1e9;
      progress.Add(end - begin);
    }
  }

  const bool io_after_known = ReadIoCounters(&io_after);

  // ops/s and latencies are wall-clock, as in every phase. The overhead is
  // a ratio of the thread's CPU time: the difference between the APIs is
  // CPU work, and on a shared machine a turn that waits for the core (tens
  // of ms now and then) swings wall-clock totals by more than the
  // difference itself; the same code on both sides measured within 2% by
  // CPU time and within 25% by wall clock here.
  auto pct = [](double typed, double raw) { return raw > 0 ? (typed / raw - 1) * 100 : 0; };
  const double ops = static_cast<double>(2 * m);
  const double raw_s = insert_s[0] + read_s[0];
  const double typed_s = insert_s[1] + read_s[1];
  PhaseResult r = Row("mapping");
  r.raw_ops_per_sec = raw_s > 0 ? ops / raw_s : 0;
  r.raw_p50_us = hist[0].QuantileUs(0.50);
  r.raw_p99_us = hist[0].QuantileUs(0.99);
  r.overhead_pct = pct(insert_cpu[1] + read_cpu[1], insert_cpu[0] + read_cpu[0]);
  r.insert_overhead_pct = pct(insert_cpu[1], insert_cpu[0]);
  r.read_overhead_pct = pct(read_cpu[1], read_cpu[0]);
  Timed t;
  t.seconds = typed_s;
  t.hist = hist[1];
  t.io_known = io_known && io_after_known;
  t.io_before = io_before;
  t.io_after = io_after;
  auto us = [&](double cpu) { return cpu * 1e6 / static_cast<double>(m); };
  char notes[640];
  std::snprintf(notes, sizeof notes,
                "%llu inserts (batches of %d) + %llu gets by _id per API, the APIs "
                "taking turns a transaction (a chunk of 1000 gets) at a time; typed = "
                "TypedCollection<MappedItem>, raw = libbson by hand + "
                "Transaction::Insert / DB::Get; overhead = thread CPU time typed / raw "
                "- 1: per insert %.2f vs %.2f us (%+.1f%%), per get %.2f vs %.2f us "
                "(%+.1f%%)",
                static_cast<unsigned long long>(m), config_.batch,
                static_cast<unsigned long long>(m), us(insert_cpu[1]), us(insert_cpu[0]),
                r.insert_overhead_pct, us(read_cpu[1]), us(read_cpu[0]), r.read_overhead_pct);
  Record(std::move(r), 2 * m, t, notes);
  return Status::OK();
}

}  // namespace

Result<std::vector<PhaseResult>> RunWorkload(const std::string& engine, const Dataset& data,
                                             const WorkloadConfig& config, Status* failed) {
  if (data.size() < 10) return Status::InvalidArgument("the workload needs at least 10 docs");
  // Heap the previous engine freed goes back to the OS first, so this
  // engine's peak is measured from what the process holds for the dataset.
  malloc_trim(0);
  // A server's memory is not this process's: its peak is left unknown (0).
  auto probe = NewBackend(engine);
  const bool peak_known = probe.ok() && probe.value()->InProcess() && ResetPeakResident();
  const uint64_t base = ResidentBytes();
  Runner runner(engine, data, config);
  auto rows = runner.Run();
  if (!rows.ok() && failed != nullptr) {
    *failed = rows.status();
    rows = runner.RowsAfterFailure(rows.status());
  }
  if (rows.ok() && peak_known) {
    const uint64_t peak = PeakResidentBytes();
    for (PhaseResult& r : rows.value()) r.peak_rss_bytes = peak > base ? peak - base : 0;
  }
  return rows;
}

}  // namespace mmdoc::bench
