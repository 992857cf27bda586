// mmdoc-writeproto: the prototype behind docs/write-path.md. It measures,
// on the storage and index layers alone (no documents, no engine), what a
// write costs in the current design and in the two designs considered for
// a faster write path, so that the cost model there has figures.
//
// The data: two trees, as a collection with one unique index has: a primary
// keyed by a 16-byte random id holding a 150-byte value, and an index keyed
// by a 16-byte random key holding the id. N entries are loaded first, in
// batches of 1000 per write transaction; then each design does M random
// inserts, M/2 updates (a new value for an existing id; the index is not
// touched) and M/2 deletes (both trees), in batches of `--batch`.
//
//   tree     today's path: each batch is a pager write transaction that
//            changes pages (copy-on-write) and logs a record of the batch;
//            checkpoints when the log (64 MiB) fills. Durability none.
//   nosync   the same with a log so large that no checkpoint falls inside
//            the timed phases: the ceiling of design 2, checkpoints that
//            never stall the writer.
//   buffer   design 1's foreground: each batch probes the trees for
//            uniqueness (a read snapshot), appends the same log record,
//            and puts its changes in an in-memory ordered buffer per tree;
//            no page is written. Then the buffer is merged into the trees
//            in key order, in one write transaction, and checkpointed: the
//            work a background thread would do, timed on its own. Point
//            reads are timed with the full buffer in front of the trees.
//
//   mmdoc-writeproto [--docs N] [--ops M] [--batch B] [--dir D]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <memory_resource>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/micro/proto_util.h"
#include "index/btree.h"
#include "mmdoc/file_system.h"
#include "storage/pager.h"

namespace {

using mmdoc::Durability;
using mmdoc::Status;
using mmdoc::index::BTree;
using mmdoc::index::PutMode;
namespace storage = mmdoc::storage;
using mmdoc::proto::Check;
using mmdoc::proto::Now;
using mmdoc::proto::RandomBytes;

constexpr int kPrimary = 1, kIndex = 2;  // root slots

struct Op {
  std::string id, key, value;
};

std::unique_ptr<storage::Pager> OpenPager(const std::string& path, uint64_t log_size) {
  storage::PagerOptions o;
  o.log_size = log_size;
  auto p = storage::Pager::Open(path, o);
  Check(p.status(), "open");
  Check(p.value()->Recover([](uint64_t, std::string_view) { return Status::OK(); }), "recover");
  return std::move(p.value());
}

// One batch of changes in today's design: a write txn over both trees.
void TreeBatch(storage::Pager* p, const std::vector<Op>& ops, size_t from, size_t n, char kind,
               std::string* log) {
  auto w = p->BeginWrite();
  Check(w.status(), "begin");
  storage::Txn* t = w.value().get();
  BTree primary(t, t->root(kPrimary)), index(t, t->root(kIndex));
  log->clear();
  for (size_t i = from; i < from + n; i++) {
    const Op& op = ops[i];
    if (kind == 'i') {
      Check(primary.Put(op.id, op.value, PutMode::kInsert), "put");
      Check(index.Put(op.key, op.id, PutMode::kInsert), "put index");
    } else if (kind == 'u') {
      Check(primary.Put(op.id, op.value, PutMode::kUpdate), "update");
    } else {
      Check(primary.Delete(op.id), "delete");
      Check(index.Delete(op.key), "delete index");
    }
    log->append(op.id).append(op.value);
  }
  t->set_root(kPrimary, primary.root());
  t->set_root(kIndex, index.root());
  Check(t->Commit(*log, Durability::kNone), "commit");
}

// Design 1's buffer, per tree: changes appended to an arena in commit
// order with a hash index of the newest change per key (point reads and
// unique checks: one probe); sorted by key only when it is merged (or, in
// the engine, when a cursor first needs its order).
struct Buffer {
  struct Entry {
    std::string_view key, value;
    bool tombstone = false;
  };
  struct Tree {
    std::pmr::monotonic_buffer_resource* arena;
    std::vector<Entry> log;                               // commit order
    std::unordered_map<std::string_view, size_t> newest;  // key -> log index
    const Entry* Find(std::string_view k) const {
      auto it = newest.find(k);
      return it == newest.end() ? nullptr : &log[it->second];
    }
    void Put(std::string_view k, std::string_view v, bool tombstone) {
      auto* mem = static_cast<char*>(arena->allocate(k.size() + v.size(), 1));
      std::memcpy(mem, k.data(), k.size());
      std::memcpy(mem + k.size(), v.data(), v.size());
      Entry e{std::string_view(mem, k.size()), std::string_view(mem + k.size(), v.size()),
              tombstone};
      auto [it, inserted] = newest.try_emplace(e.key, log.size());
      if (!inserted) it->second = log.size();
      log.push_back(e);
    }
    // The newest change per key, in key order.
    std::vector<Entry> Sorted() const {
      std::vector<Entry> out;
      out.reserve(newest.size());
      for (const auto& [k, i] : newest) out.push_back(log[i]);
      std::sort(out.begin(), out.end(),
                [](const Entry& a, const Entry& b) { return a.key < b.key; });
      return out;
    }
  };
  std::pmr::monotonic_buffer_resource arena;
  Tree primary{&arena}, index{&arena};
};

// One batch in design 1's foreground: unique probes in a snapshot, then
// the buffer and the log record.
void BufferBatch(storage::Pager* p, Buffer* b, const std::vector<Op>& ops, size_t from, size_t n,
                 char kind, std::string* log, storage::File* log_file, uint64_t* log_off) {
  auto r = p->BeginRead();
  Check(r.status(), "begin read");
  storage::Txn* t = r.value().get();
  BTree primary(t, t->root(kPrimary)), index(t, t->root(kIndex));
  log->clear();
  for (size_t i = from; i < from + n; i++) {
    const Op& op = ops[i];
    std::string_view v;
    if (kind == 'i') {
      // Unique checks see the buffer, then the tree.
      if ((b->primary.Find(op.id) == nullptr && !primary.Get(op.id, &v).IsNotFound()) ||
          (b->index.Find(op.key) == nullptr && !index.Get(op.key, &v).IsNotFound())) {
        std::fprintf(stderr, "writeproto: duplicate\n");
        std::exit(1);
      }
      b->primary.Put(op.id, op.value, false);
      b->index.Put(op.key, op.id, false);
    } else if (kind == 'u') {
      if (b->primary.Find(op.id) == nullptr) Check(primary.Get(op.id, &v), "update probe");
      b->primary.Put(op.id, op.value, false);
    } else {
      if (b->primary.Find(op.id) == nullptr) Check(primary.Get(op.id, &v), "delete probe");
      b->primary.Put(op.id, {}, true);
      b->index.Put(op.key, {}, true);
    }
    log->append(op.id).append(op.value);
  }
  // The same log record, written as the pager writes a kNone record.
  Check(log_file->WriteAt(*log_off, log->data(), log->size()), "log write");
  *log_off += log->size();
}

// Design 1's background work: the buffer into the trees in key order.
void Merge(storage::Pager* p, Buffer* b) {
  auto w = p->BeginWrite();
  Check(w.status(), "begin merge");
  storage::Txn* t = w.value().get();
  BTree primary(t, t->root(kPrimary)), index(t, t->root(kIndex));
  for (const Buffer::Entry& e : b->primary.Sorted()) {
    if (e.tombstone) {
      Status s = primary.Delete(e.key);
      if (!s.IsNotFound()) Check(s, "merge delete");
    } else {
      Check(primary.Put(e.key, e.value), "merge put");
    }
  }
  for (const Buffer::Entry& e : b->index.Sorted()) {
    if (e.tombstone) {
      Status s = index.Delete(e.key);
      if (!s.IsNotFound()) Check(s, "merge delete index");
    } else {
      Check(index.Put(e.key, e.value), "merge put index");
    }
  }
  t->set_root(kPrimary, primary.root());
  t->set_root(kIndex, index.root());
  Check(t->Commit({}, Durability::kNone), "commit merge");
  Check(p->Checkpoint(), "checkpoint after merge");
}

// Point reads of `ids`: the buffer first (when given), then the tree.
double Lookups(storage::Pager* p, const Buffer* b, const std::vector<std::string>& ids) {
  auto r = p->BeginRead();
  Check(r.status(), "begin read");
  storage::Txn* t = r.value().get();
  BTree primary(t, t->root(kPrimary));
  const double start = Now();
  size_t found = 0;
  for (const std::string& id : ids) {
    if (b != nullptr) {
      if (const Buffer::Entry* e = b->primary.Find(id)) {
        found += !e->tombstone;
        continue;
      }
    }
    std::string_view v;
    found += primary.Get(id, &v).ok();
  }
  const double secs = Now() - start;
  if (found == 0) std::exit(1);
  return secs;
}

}  // namespace

int main(int argc, char** argv) {
  mmdoc::proto::program = "mmdoc-writeproto";
  size_t docs = 1000000, ops = 200000, batch = 1000;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--docs") docs = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--ops") ops = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--batch") batch = std::strtoull(argv[i + 1], nullptr, 10);
    if (a == "--dir") dir = argv[i + 1];
  }
  std::mt19937_64 rng(1);
  std::vector<Op> load(docs), fresh(ops);
  for (auto* v : {&load, &fresh}) {
    for (Op& op : *v) op = Op{RandomBytes(rng, 16), RandomBytes(rng, 16), RandomBytes(rng, 150)};
  }
  // Updates and deletes of loaded entries (disjoint halves).
  std::vector<Op> updates(load.begin(), load.begin() + ops / 2);
  for (Op& op : updates) op.value = RandomBytes(rng, 150);
  std::vector<Op> deletes(load.begin() + ops / 2, load.begin() + ops);
  std::vector<std::string> read_ids;
  for (size_t i = 0; i < ops; i++) read_ids.push_back(load[rng() % docs].id);

  std::printf("writeproto: %zu loaded, %zu inserts, %zu updates, %zu deletes, batch %zu\n", docs,
              ops, ops / 2, ops / 2, batch);
  std::printf("%-8s %10s %10s %10s %12s %14s %14s\n", "design", "insert/s", "update/s", "delete/s",
              "merge us/op", "read/s tree", "read/s+buffer");
  for (const char* design : {"tree", "nosync", "buffer"}) {
    const std::string path = dir + "/writeproto-" + design + ".db";
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
    const bool nosync = std::string(design) == "nosync";
    auto p = OpenPager(path, nosync ? (4ull << 30) : (64ull << 20));
    std::string log;
    for (size_t i = 0; i < docs; i += batch) {
      TreeBatch(p.get(), load, i, std::min(batch, docs - i), 'i', &log);
    }
    if (!nosync) Check(p->Checkpoint(), "checkpoint after load");
    double rate[3], merge_us = 0, read_tree = 0, read_buffer = 0;
    const std::vector<Op>* sets[3] = {&fresh, &updates, &deletes};
    const char kinds[3] = {'i', 'u', 'd'};
    if (std::string(design) == "buffer") {
      Buffer b;
      const std::string log_path = dir + "/writeproto-buffer.log";
      auto log_file = mmdoc::FileSystem::Default()->Open(log_path, mmdoc::OpenMode::kCreate);
      Check(log_file.status(), "open log");
      uint64_t off = 0;
      for (int k = 0; k < 3; k++) {
        const double start = Now();
        for (size_t i = 0; i < sets[k]->size(); i += batch) {
          BufferBatch(p.get(), &b, *sets[k], i, std::min(batch, sets[k]->size() - i), kinds[k],
                      &log, log_file.value().get(), &off);
        }
        rate[k] = static_cast<double>(sets[k]->size()) / (Now() - start);
      }
      log_file.value().reset();
      std::filesystem::remove(log_path);
      read_tree = Lookups(p.get(), nullptr, read_ids);
      read_buffer = Lookups(p.get(), &b, read_ids);
      const double start = Now();
      Merge(p.get(), &b);
      merge_us = (Now() - start) * 1e6 / static_cast<double>(ops * 2);
    } else {
      for (int k = 0; k < 3; k++) {
        const double start = Now();
        for (size_t i = 0; i < sets[k]->size(); i += batch) {
          TreeBatch(p.get(), *sets[k], i, std::min(batch, sets[k]->size() - i), kinds[k], &log);
        }
        rate[k] = static_cast<double>(sets[k]->size()) / (Now() - start);
      }
      read_tree = Lookups(p.get(), nullptr, read_ids);
    }
    auto per_s = [&](double secs) { return secs > 0 ? static_cast<double>(ops) / secs : 0.0; };
    std::printf("%-8s %10.0f %10.0f %10.0f %12.2f %14.0f %14.0f\n", design, rate[0], rate[1],
                rate[2], merge_us, per_s(read_tree), per_s(read_buffer));
    std::fflush(stdout);
    p.reset();
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-log");
  }
  return 0;
}
