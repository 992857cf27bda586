#include "bench/workload.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "bench/backend.h"
#include "bench/bson_doc.h"

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
      "insert", "search_id", "search_key", "search_value", "update", "delete"};
  return kPhases;
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
  uint64_t rank =
      static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
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
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += static_cast<uint64_t>(st.st_blocks) * 512;
    }
  }
  return total;
}

namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// A progress bar on stderr, redrawn a few times a second by its own thread.
class Progress {
 public:
  Progress(bool enabled, std::string label, uint64_t total)
      : enabled_(enabled && total > 0),
        label_(std::move(label)),
        total_(total) {
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
    while (!cv_.wait_for(l, std::chrono::milliseconds(200),
                         [this] { return stop_; })) {
      uint64_t done = std::min(done_.load(std::memory_order_relaxed), total_);
      int width = 30;
      int filled = static_cast<int>(width * done / total_);
      std::fprintf(stderr, "\r\033[K%-32s [%s%s] %3d%%", label_.c_str(),
                   std::string(filled, '#').c_str(),
                   std::string(width - filled, ' ').c_str(),
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
};

// Runs fn on `threads` workers over ops operations split evenly, and times
// the whole (wall clock from the start of the first to the end of the last).
template <typename Fn>
Timed RunParallel(std::vector<std::unique_ptr<Session>>& sessions, int threads,
                  uint64_t ops, Progress* progress, Fn fn) {
  Timed t;
  threads =
      static_cast<int>(std::max<uint64_t>(1, std::min<uint64_t>(threads, ops)));
  std::vector<Histogram> hists(threads);
  std::vector<Status> statuses(threads);
  if (threads == 1) {
    uint64_t start = NowNs();
    statuses[0] = fn(Share{sessions[0].get(), 0, 0, ops, &hists[0], progress});
    t.seconds = static_cast<double>(NowNs() - start) / 1e9;
  } else {
    std::vector<std::thread> workers;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    for (int i = 0; i < threads; ++i) {
      uint64_t b = ops * i / threads, e = ops * (i + 1) / threads;
      workers.emplace_back([&, i, b, e] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        statuses[i] =
            fn(Share{sessions[i].get(), i, b, e, &hists[i], progress});
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    uint64_t start = NowNs();
    go.store(true, std::memory_order_release);
    for (auto& w : workers) w.join();
    t.seconds = static_cast<double>(NowNs() - start) / 1e9;
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
  Runner(const std::string& engine, const Dataset& data,
         const WorkloadConfig& config)
      : engine_(engine), data_(data), config_(config) {}

  Result<std::vector<PhaseResult>> Run();

 private:
  bool Wanted(const std::string& phase) const {
    return std::find(config_.phases.begin(), config_.phases.end(), phase) !=
           config_.phases.end();
  }
  PhaseResult Row(const std::string& phase) const {
    PhaseResult r;
    r.engine = engine_;
    r.phase = phase;
    r.durability = DurabilityName(config_.durability);
    r.docs = data_.size();
    r.batch = config_.batch;
    r.threads = config_.threads;
    return r;
  }
  void Record(PhaseResult r, uint64_t ops, const Timed& t,
              const std::string& notes) {
    r.ops = ops;
    r.seconds = t.seconds;
    r.ops_per_sec = t.seconds > 0 ? static_cast<double>(ops) / t.seconds : 0;
    r.p50_us = t.hist.QuantileUs(0.50);
    r.p99_us = t.hist.QuantileUs(0.99);
    r.notes = settings_;
    if (!notes.empty()) r.notes += "; " + notes;
    results_.push_back(std::move(r));
  }
  uint64_t DurableCap(uint64_t ops) const {
    if (config_.durability == Durability::kNone || config_.max_durable_ops == 0)
      return ops;
    return std::min(ops, config_.max_durable_ops);
  }
  std::string Label(const std::string& phase) const {
    return engine_ + " " + phase + " (" + std::to_string(data_.size()) + ")";
  }

  Status Insert();
  Status SearchId();
  Status SearchKey();
  Status SearchValue();
  Status Update();
  Status Delete();

  const std::string engine_;
  const Dataset& data_;
  const WorkloadConfig& config_;
  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<Session>> sessions_;
  std::string dir_;
  std::string settings_;
  int writers_ = 1;
  std::vector<uint64_t> perm_;  // distinct documents for update, then delete
  std::vector<PhaseResult> results_;
};

Result<std::vector<PhaseResult>> Runner::Run() {
  auto b = NewBackend(engine_);
  if (!b.ok()) return b.status();
  backend_ = std::move(b.value());
  if (!backend_->Supports(config_.durability)) {
    for (const auto& phase : AllPhases()) {
      if (!Wanted(phase)) continue;
      PhaseResult r = Row(phase);
      r.available = false;
      r.notes = std::string("n/a: ") + engine_ + " has no " +
                DurabilityName(config_.durability) + " mode";
      results_.push_back(std::move(r));
    }
    return results_;
  }

  std::string tmpl = (config_.dir.empty() ? std::string(".") : config_.dir) +
                     "/" + engine_ + "-" + std::to_string(data_.size()) +
                     "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return Status::IOError("cannot create data directory", tmpl);
  }
  dir_ = buf.data();

  writers_ = 1;
  if (config_.durability != Durability::kNone)
    writers_ = std::max(1, config_.threads);
  // Group commit needs concurrent commits to group.
  if (config_.durability == Durability::kGroup && writers_ < 2) writers_ = 4;
  BackendConfig bc;
  bc.durability = config_.durability;
  bc.expected_docs = data_.size();
  bc.expected_bytes = data_.bson_bytes();
  bc.max_sessions = std::max(config_.threads, writers_);
  bc.sync_interval_ms = config_.sync_interval_ms;
  Status s = backend_->Open(dir_, bc);
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
  if (!s.ok()) s = Status::IOError(engine_ + " open", s.ToString());

  // Distinct documents for update and delete.
  perm_.resize(data_.size());
  for (uint64_t i = 0; i < perm_.size(); ++i) perm_[i] = i;
  std::mt19937_64 rng(data_.seed() ^ 0x5eed0000u);
  std::shuffle(perm_.begin(), perm_.end(), rng);

  if (s.ok()) s = Insert();
  if (s.ok() && Wanted("search_id")) s = SearchId();
  if (s.ok() && Wanted("search_key")) s = SearchKey();
  if (s.ok() && Wanted("search_value")) s = SearchValue();
  if (s.ok() && Wanted("update")) s = Update();
  if (s.ok() && Wanted("delete")) s = Delete();

  sessions_.clear();
  Status close = backend_->Close();
  if (s.ok() && !close.ok())
    s = Status::IOError(engine_ + " close", close.ToString());
  if (!results_.empty()) results_.back().store_bytes = DiskUsage(dir_);
  backend_.reset();
  if (!config_.keep_data) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  if (!s.ok()) return s;
  return results_;
}

Status Runner::Insert() {
  uint64_t n = data_.size();
  uint64_t timed = DurableCap(n);
  uint64_t preload = n - timed;
  std::string notes;
  if (preload > 0) {
    // Untimed bulk load, so the timed inserts meet a store of N documents.
    Progress progress(config_.progress, Label("preload"), preload);
    Timed t =
        RunParallel(sessions_, 1, preload, &progress, [&](const Share& sh) {
          return WriteLoop(sh, 1000, [&](Session* session, uint64_t i) {
            return session->Insert(
                DocRef{data_.id(i), data_.key(i), data_.bson(i)});
          });
        });
    if (!t.status.ok())
      return Status::IOError(engine_ + " preload", t.status.ToString());
    notes = "timed the last " + std::to_string(timed) + " of " +
            std::to_string(n) + " inserts (the first " +
            std::to_string(preload) + " preloaded in batches of 1000)";
  }
  Progress progress(config_.progress, Label("insert"), timed);
  Timed t =
      RunParallel(sessions_, writers_, timed, &progress, [&](const Share& sh) {
        return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
          uint64_t i = preload + k;
          return session->Insert(
              DocRef{data_.id(i), data_.key(i), data_.bson(i)});
        });
      });
  if (!t.status.ok())
    return Status::IOError(engine_ + " insert", t.status.ToString());
  if (writers_ > 1) {
    if (!notes.empty()) notes += "; ";
    notes += std::to_string(writers_) + " writer threads";
  }
  if (Wanted("insert")) {
    PhaseResult r = Row("insert");
    r.store_bytes = DiskUsage(dir_);
    Record(std::move(r), timed, t, notes);
  }
  return Status::OK();
}

Status Runner::SearchId() {
  uint64_t ops = std::max<uint64_t>(1, data_.size() / 10);
  Progress progress(config_.progress, Label("search_id"), ops);
  Timed t = RunParallel(
      sessions_, config_.threads, ops, &progress, [&](const Share& sh) {
        std::mt19937_64 rng(data_.seed() * 31 + 1 + sh.thread);
        std::uniform_int_distribution<uint64_t> pick(0, data_.size() - 1);
        std::string value;
        return ReadLoop(sh, [&](Session* session, uint64_t) {
          uint64_t i = pick(rng);
          MMDOC_RETURN_IF_ERROR(session->GetById(data_.id(i), &value));
          if (value != data_.value(i))
            return Status::Corruption("wrong value for _id", data_.id(i));
          return Status::OK();
        });
      });
  if (!t.status.ok())
    return Status::IOError(engine_ + " search_id", t.status.ToString());
  Record(Row("search_id"), ops, t, "");
  return Status::OK();
}

Status Runner::SearchKey() {
  uint64_t ops = std::max<uint64_t>(1, data_.size() / 10);
  Progress progress(config_.progress, Label("search_key"), ops);
  Timed t = RunParallel(
      sessions_, config_.threads, ops, &progress, [&](const Share& sh) {
        std::mt19937_64 rng(data_.seed() * 31 + 2 + sh.thread);
        std::uniform_int_distribution<uint64_t> pick(0, data_.size() - 1);
        std::string value;
        return ReadLoop(sh, [&](Session* session, uint64_t) {
          uint64_t i = pick(rng);
          MMDOC_RETURN_IF_ERROR(session->FindByKey(data_.key(i), &value));
          if (value != data_.value(i))
            return Status::Corruption("wrong value for key", data_.key(i));
          return Status::OK();
        });
      });
  if (!t.status.ok())
    return Status::IOError(engine_ + " search_key", t.status.ToString());
  Record(Row("search_key"), ops, t, "");
  return Status::OK();
}

Status Runner::SearchValue() {
  uint64_t ops = static_cast<uint64_t>(std::max(1, config_.scans));
  Progress progress(config_.progress, Label("search_value"), ops);
  Timed t = RunParallel(
      sessions_, config_.threads, ops, &progress, [&](const Share& sh) {
        std::mt19937_64 rng(data_.seed() * 31 + 3 + sh.thread);
        std::uniform_int_distribution<uint64_t> pick(0, data_.size() - 1);
        uint64_t prev = NowNs();
        for (uint64_t k = sh.begin; k < sh.end; ++k) {
          uint64_t i = pick(rng);
          bool found = false;
          MMDOC_RETURN_IF_ERROR(
              sh.session->ScanByValue(data_.value(i), &found, nullptr));
          if (!found)
            return Status::Corruption("scan missed value", data_.value(i));
          uint64_t now = NowNs();
          sh.hist->Add(now - prev);
          prev = now;
          sh.progress->Add(1);
        }
        return Status::OK();
      });
  if (!t.status.ok())
    return Status::IOError(engine_ + " search_value", t.status.ToString());
  PhaseResult r = Row("search_value");
  // Every engine scans the same stored BSON bytes: all N documents.
  double bytes =
      static_cast<double>(data_.bson_bytes()) * static_cast<double>(ops);
  r.gb_per_sec = t.seconds > 0 ? bytes / t.seconds / 1e9 : 0;
  Record(std::move(r), ops, t,
         "full scan of " + std::to_string(data_.size()) +
             " docs per op, parsing each BSON value field (no early stop)");
  return Status::OK();
}

Status Runner::Update() {
  uint64_t ops = DurableCap(std::min<uint64_t>(
      std::max<uint64_t>(1, data_.size() / 10), data_.new_values()));
  Progress progress(config_.progress, Label("update"), ops);
  Timed t = RunParallel(sessions_, 1, ops, &progress, [&](const Share& sh) {
    return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
      return session->UpdateValue(data_.id(perm_[k]), data_.new_value(k));
    });
  });
  if (!t.status.ok())
    return Status::IOError(engine_ + " update", t.status.ToString());
  // Untimed check: updated documents carry their new value, by _id and key.
  std::string value;
  for (uint64_t k = 0; k < ops; k += std::max<uint64_t>(1, ops / 100)) {
    uint64_t i = perm_[k];
    Status s = sessions_[0]->FindByKey(data_.key(i), &value);
    if (s.ok() && value != data_.new_value(k))
      s = Status::Corruption("update not visible");
    if (!s.ok())
      return Status::IOError(engine_ + " update check", s.ToString());
  }
  Record(Row("update"), ops, t, "");
  return Status::OK();
}

Status Runner::Delete() {
  uint64_t n = std::max<uint64_t>(1, data_.size() / 10);
  uint64_t offset = n;  // perm_[0, n) were updated; delete the next n (2n <= N)
  uint64_t ops = DurableCap(n);
  Progress progress(config_.progress, Label("delete"), ops);
  Timed t = RunParallel(sessions_, 1, ops, &progress, [&](const Share& sh) {
    return WriteLoop(sh, config_.batch, [&](Session* session, uint64_t k) {
      return session->Delete(data_.id(perm_[offset + k]));
    });
  });
  if (!t.status.ok())
    return Status::IOError(engine_ + " delete", t.status.ToString());
  // Untimed check: deleted documents are gone by _id and by key.
  std::string value;
  for (uint64_t k = 0; k < ops; k += std::max<uint64_t>(1, ops / 100)) {
    uint64_t i = perm_[offset + k];
    Status a = sessions_[0]->GetById(data_.id(i), &value);
    Status b = sessions_[0]->FindByKey(data_.key(i), &value);
    if (!a.IsNotFound() || !b.IsNotFound()) {
      return Status::Corruption(engine_ + " delete check: document still found",
                                data_.id(i));
    }
  }
  Record(Row("delete"), ops, t, "");
  return Status::OK();
}

}  // namespace

Result<std::vector<PhaseResult>> RunWorkload(const std::string& engine,
                                             const Dataset& data,
                                             const WorkloadConfig& config) {
  if (data.size() < 10)
    return Status::InvalidArgument("the workload needs at least 10 docs");
  Runner runner(engine, data, config);
  return runner.Run();
}

}  // namespace mmdoc::bench
