// Log-only commits (rule 10 of storage/pager.h): records appended without
// page changes, kept in a ring until a merge puts their changes in pages;
// replay into memory; the ring's wraps, crashes and power loss.
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/storage/storage_test_util.h"
#include "tests/support/fault_fs.h"
#include "tests/support/test_env.h"

namespace mmdoc::storage {
namespace {

using namespace testutil;
using test::FaultFileSystem;

PagerOptions RingOptions(uint64_t log_size = 16 << 10) {
  PagerOptions o = SmallOptions();
  o.log_size = log_size;
  return o;
}

std::string Payload(uint64_t n, size_t size = 100) {
  std::string p = std::to_string(n) + ":";
  p.resize(size, static_cast<char>('a' + n % 26));
  return p;
}

// Opens and replays into memory; returns the payloads replayed.
std::unique_ptr<Pager> OpenIntoMemory(const std::string& path, const PagerOptions& o,
                                      std::vector<std::string>* got) {
  auto r = Pager::Open(path, o);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  Status s = r.value()->RecoverIntoMemory([&](uint64_t, std::string_view payload) {
    got->emplace_back(payload);
    return Status::OK();
  });
  INFO(s.ToString());
  REQUIRE(s.ok());
  return std::move(r.value());
}

// A merge: a write txn that tags root slot 0 with `tag`, committed as
// holding every record up to `through`.
void Merge(Pager* p, uint64_t through, Pager::LogPosition next, uint64_t tag) {
  auto w = p->BeginWrite();
  REQUIRE(w.ok());
  PageId id;
  uint8_t* pg;
  REQUIRE(w.value()->Allocate(PageType::kLeaf, 1, &id, &pg).ok());
  FillBody(pg, w.value()->page_size(), tag);
  if (w.value()->root(0) != 0) REQUIRE(w.value()->Free(w.value()->root(0)).ok());
  w.value()->set_root(0, id);
  Status s = p->CommitMerge(w.value().get(), through, next);
  INFO(s.ToString());
  REQUIRE(s.ok());
}

TEST_CASE("log only: commits replay into memory, in order, after a crash") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  std::vector<std::string> want;
  {
    auto p = OpenOrDie(path, RingOptions(1 << 20));
    REQUIRE(p->PrepareCommits().ok());
    uint64_t last = 0;
    for (int i = 0; i < 50; i++) {
      uint64_t txid;
      const Durability d = i % 3 == 0 ? Durability::kFsync : Durability::kNone;
      REQUIRE(p->AppendCommit(Payload(i), d, &txid).ok());
      CHECK(txid > last);
      last = txid;
      want.push_back(Payload(i));
    }
    CHECK(p->Verify().ok());
    p->TEST_CrashOnClose();
  }
  std::vector<std::string> got;
  auto p = OpenIntoMemory(path, RingOptions(1 << 20), &got);
  CHECK(got == want);
  CHECK(p->Verify().ok());
  // A second session appends after them, under a new epoch; a crash and a
  // reopen replay both sessions' records.
  REQUIRE(p->PrepareCommits().ok());
  for (int i = 50; i < 60; i++) {
    uint64_t txid;
    REQUIRE(p->AppendCommit(Payload(i), Durability::kFsync, &txid).ok());
    want.push_back(Payload(i));
  }
  p->TEST_CrashOnClose();
  p.reset();
  got.clear();
  p = OpenIntoMemory(path, RingOptions(1 << 20), &got);
  CHECK(got == want);
}

TEST_CASE("log only: the ring wraps behind merges, fills without them, and replays across wraps") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  std::vector<std::string> unmerged;  // records the pages lack, in order
  uint64_t merged_tag = 0;
  {
    auto p = OpenOrDie(path, RingOptions());
    REQUIRE(p->PrepareCommits().ok());
    uint64_t n = 0, wraps = 0, last_txid = 0;
    // Each merge takes the records of the round before the last, so the
    // log always keeps a round and the ring must wrap to go on.
    std::vector<std::string> prev_round;
    uint64_t prev_through = 0;
    Pager::LogPosition prev_next = p->LogHead();
    for (int round = 0; round < 40; round++) {
      std::vector<std::string> this_round;
      uint64_t before = p->LogHead().offset;
      for (int i = 0; i < 30; i++, n++) {
        uint64_t txid;
        Status s = p->AppendCommit(Payload(n, 24 + n % 200), Durability::kNone, &txid);
        INFO(s.ToString());
        REQUIRE(s.ok());
        if (p->LogHead().offset < before) wraps++;
        before = p->LogHead().offset;
        last_txid = txid;
        this_round.push_back(Payload(n, 24 + n % 200));
      }
      CHECK(p->Verify().ok());
      if (prev_through != 0) {
        merged_tag = 1000 + round;
        Merge(p.get(), prev_through, prev_next, merged_tag);
        REQUIRE(p->Checkpoint().ok());
      }
      prev_through = last_txid;
      prev_next = p->LogHead();
      prev_round = this_round;
    }
    unmerged = prev_round;
    CHECK(wraps > 3);
    // Without merges the ring fills: Busy, and nothing is lost.
    Status s;
    while (s.ok()) {
      uint64_t txid;
      s = p->AppendCommit(Payload(n, 100), Durability::kNone, &txid);
      if (s.ok()) unmerged.push_back(Payload(n++, 100));
    }
    INFO(s.ToString());
    CHECK(s.IsBusy());
    CHECK(p->Verify().ok());
    p->TEST_CrashOnClose();
  }
  std::vector<std::string> got;
  auto p = OpenIntoMemory(path, RingOptions(), &got);
  CHECK(got == unmerged);
  CHECK(RootHasTag(p.get(), 0, merged_tag));
  CHECK(p->Verify().ok());
}

TEST_CASE("log only: a merge that leaves records behind keeps them across a checkpoint") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  std::vector<std::string> after;
  {
    auto p = OpenOrDie(path, RingOptions(1 << 20));
    REQUIRE(p->PrepareCommits().ok());
    uint64_t txid = 0;
    for (int i = 0; i < 10; i++)
      REQUIRE(p->AppendCommit(Payload(i), Durability::kNone, &txid).ok());
    // The merge covers those ten; ten more arrive while it runs.
    const uint64_t through = txid;
    const Pager::LogPosition next = p->LogHead();
    for (int i = 10; i < 20; i++) {
      REQUIRE(p->AppendCommit(Payload(i), Durability::kFsync, &txid).ok());
      after.push_back(Payload(i));
    }
    Merge(p.get(), through, next, 7);
    REQUIRE(p->Checkpoint().ok());
    CHECK(p->Verify().ok());
    // A write txn that logs a record may not follow unmerged log-only
    // commits (its record would be replayed after changes it never saw).
    auto w = p->BeginWrite();
    REQUIRE(w.ok());
    CHECK(w.value()->Commit("x", Durability::kNone).IsInvalidArgument());
    p->TEST_CrashOnClose();
  }
  std::vector<std::string> got;
  auto p = OpenIntoMemory(path, RingOptions(1 << 20), &got);
  CHECK(got == after);
  CHECK(RootHasTag(p.get(), 0, 7));
}

TEST_CASE("log only: a clean close needs everything merged, an unmerged log is not clean") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  {
    auto p = OpenOrDie(path, RingOptions(1 << 20));
    REQUIRE(p->PrepareCommits().ok());
    uint64_t txid;
    REQUIRE(p->AppendCommit(Payload(1), Durability::kNone, &txid).ok());
  }  // closed without merging: the checkpoint at close keeps the record
  std::vector<std::string> got;
  {
    auto p = OpenIntoMemory(path, RingOptions(1 << 20), &got);
    CHECK(got == std::vector<std::string>{Payload(1)});
  }
  // Deleting the log of that database is refused (rule 9): it is not clean.
  got.clear();
  std::filesystem::remove(path + "-log");
  CHECK(Pager::Open(path, RingOptions(1 << 20)).status().IsCorruption());
}

TEST_CASE("log only: power loss keeps every acknowledged fsync commit, and a prefix in none") {
  const uint64_t rounds = 40 * test::Scale();
  std::mt19937_64 rng(test::Seed("log only power loss"));
  uint64_t wraps = 0;
  for (uint64_t round = 0; round < rounds; round++) {
    test::RamDir dir;
    const std::string path = dir.File("db");
    FaultFileSystem fs;
    PagerOptions o = RingOptions();
    o.fs = &fs;
    const bool durable = round % 2 == 0;
    std::vector<std::string> sent, acked, merged_upto;
    {
      auto p = OpenOrDie(path, o);
      REQUIRE(p->PrepareCommits().ok());
      uint64_t txid = 0, n = 0;
      uint64_t before = 0;
      uint64_t mark_through = 0;  // the merge point: records up to it
      Pager::LogPosition mark_next;
      size_t mark_count = 0;
      const int commits = 20 + static_cast<int>(rng() % 400);
      for (int i = 0; i < commits; i++, n++) {
        Status s = p->AppendCommit(Payload(n, 24 + rng() % 300),
                                   durable ? Durability::kFsync : Durability::kNone, &txid);
        if (s.IsBusy()) {
          // Merge what the last merge point saw, as a background merge
          // that lags behind the writer would: the ring must wrap.
          if (mark_through == 0) {  // no merge point yet: all so far
            mark_through = txid;
            mark_next = p->LogHead();
            mark_count = sent.size();
          }
          Merge(p.get(), mark_through, mark_next, n);
          REQUIRE(p->Checkpoint().ok());
          merged_upto.assign(sent.begin(), sent.begin() + static_cast<long>(mark_count));
          mark_through = txid;
          mark_next = p->LogHead();
          mark_count = sent.size();
          i--;
          n--;
          continue;
        }
        REQUIRE(s.ok());
        if (p->LogHead().offset < before) wraps++;
        before = p->LogHead().offset;
        sent.push_back(std::to_string(n));
        if (durable) acked = sent;
        if (mark_through == 0 && rng() % 20 == 0) {
          mark_through = txid;
          mark_next = p->LogHead();
          mark_count = sent.size();
        }
      }
      p->TEST_CrashOnClose();
    }
    fs.SimulatePowerLoss(rng);
    std::vector<std::string> got;
    auto p = OpenIntoMemory(path, RingOptions(), &got);
    // What came back is the records after the last durable merge: a prefix
    // of what was sent after it, holding every acknowledged one.
    INFO("round " << round << ": sent " << sent.size() << ", merged " << merged_upto.size()
                  << ", got " << got.size());
    REQUIRE(got.size() + merged_upto.size() <= sent.size());
    for (size_t i = 0; i < got.size(); i++) {
      CHECK(got[i].substr(0, got[i].find(':')) == sent[merged_upto.size() + i]);
    }
    if (durable) CHECK(merged_upto.size() + got.size() == acked.size());
    CHECK(p->Verify().ok());
  }
  CHECK(wraps > 0);  // the ring wrapped behind lagging merges
}

// Records each StartWriteback on the log and counts the log's syncs.
class WritebackFileSystem final : public test::FileSystemWrapper {
 public:
  struct Range {
    uint64_t offset, length;
  };
  std::vector<Range> ranges;
  std::vector<Range> dropped;   // DropMappedPages, as offsets into the log
  std::vector<Range> prepared;  // PrepareMappedWrite, the same
  uint64_t log_syncs = 0;

  Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override {
    auto f = base()->Open(path, mode);
    if (!f.ok()) return f.status();
    const bool is_log = path.size() >= 4 && path.compare(path.size() - 4, 4, "-log") == 0;
    if (!is_log) return f;
    return std::unique_ptr<File>(new LogFile(this, std::move(f.value())));
  }

 private:
  class LogFile final : public test::FileWrapper {
   public:
    LogFile(WritebackFileSystem* fs, std::unique_ptr<File> real)
        : FileWrapper(std::move(real)), fs_(fs) {}
    Result<uint8_t*> Map(uint64_t length, MapMode mode) override {
      auto m = real()->Map(length, mode);
      if (m.ok()) base_ = m.value();
      return m;
    }
    Status DropMappedPages(uint8_t* addr, uint64_t length) override {
      fs_->dropped.push_back(Range{static_cast<uint64_t>(addr - base_), length});
      return real()->DropMappedPages(addr, length);
    }
    Status PrepareMappedWrite(uint8_t* addr, uint64_t length) override {
      fs_->prepared.push_back(Range{static_cast<uint64_t>(addr - base_), length});
      return real()->PrepareMappedWrite(addr, length);
    }
    Status StartWriteback(uint64_t offset, uint64_t length) override {
      fs_->ranges.push_back(Range{offset, length});
      return real()->StartWriteback(offset, length);
    }
    Status Sync() override {
      fs_->log_syncs++;
      return real()->Sync();
    }

   private:
    WritebackFileSystem* fs_;
    uint8_t* base_ = nullptr;
  };
};

TEST_CASE("log only: without a sync per commit the log writes back behind its head") {
  test::TempDir dir;
  const std::string path = dir.File("db");
  WritebackFileSystem fs;
  PagerOptions o = RingOptions(4 << 20);
  o.fs = &fs;
  auto p = OpenOrDie(path, o);
  REQUIRE(p->PrepareCommits().ok());
  uint64_t txid = 0, n = 0, wraps = 0;
  // A merge lags a stretch of records behind the writer, so the ring wraps.
  uint64_t mark_through = 0, since_merge = 0;
  Pager::LogPosition mark_next;
  bool restarted = false;
  auto append = [&](Durability d, size_t size) {
    for (;;) {
      const uint64_t syncs = fs.log_syncs;
      const size_t calls = fs.ranges.size();
      const uint64_t before = p->LogHead().offset;
      Status s = p->AppendCommit(Payload(n, size), d, &txid);
      if (s.IsBusy()) {
        // Up to the mark, or (no mark yet) everything: the log starts over.
        restarted = mark_through == 0;
        if (restarted) Merge(p.get(), txid, p->LogHead(), n);
        if (!restarted) Merge(p.get(), mark_through, mark_next, n);
        REQUIRE(p->Checkpoint().ok());
        mark_through = 0;
        since_merge = 0;
        continue;
      }
      INFO(s.ToString());
      REQUIRE(s.ok());
      n++;
      const uint64_t head = p->LogHead().offset;
      since_merge += size;
      if (head < before && !restarted) {
        wraps++;
        CHECK(fs.log_syncs > syncs);  // a wrap still makes the lap durable first
      }
      for (size_t i = calls; i < fs.ranges.size(); i++) {
        const auto& r = fs.ranges[i];
        // Whole pages behind the head, about a MiB at a time, each from
        // where the one before ended (or from the start after a wrap).
        CHECK(r.length + 4096 > (1u << 20));
        CHECK((r.offset + r.length) % 4096 == 0);
        CHECK(r.offset + r.length <= head);
        // Unmapped first, so the writeback write-protects nothing.
        REQUIRE(fs.dropped.size() == fs.ranges.size());
        CHECK(fs.dropped[i].offset == r.offset);
        CHECK(fs.dropped[i].length == r.length);
        if (i > 0 && fs.ranges[i - 1].offset < r.offset) {
          CHECK(r.offset == fs.ranges[i - 1].offset + fs.ranges[i - 1].length);
        }
      }
      if (d == Durability::kNone && size < 4096) {
        // Stored where the map was made writable ahead of it, 64 KiB at a
        // time (more when the record is longer).
        REQUIRE(!fs.prepared.empty());
        const auto& w = fs.prepared.back();
        CHECK(w.offset % 4096 == 0);
        CHECK(w.offset < head);
        CHECK(head <= w.offset + w.length);
        CHECK(w.length <= (64u << 10) + 4096 + size + 64);
      }
      restarted = false;
      if (mark_through == 0 && since_merge > (512u << 10)) {
        mark_through = txid;
        mark_next = p->LogHead();
      }
      return;
    }
  };
  // Three laps of a 4 MiB ring in kNone.
  while (wraps < 3) append(Durability::kNone, 300 + n % 5000);
  CHECK(fs.ranges.size() >= 9);
  CHECK(fs.prepared.size() >= 3 * (4u << 20) / (64u << 10));
  // Commits that sync themselves leave nothing to write back, and write
  // with pwrite.
  const size_t calls = fs.ranges.size(), prepared = fs.prepared.size();
  for (int i = 0; i < 300; i++) append(Durability::kFsync, 5000);
  CHECK(fs.ranges.size() == calls);
  CHECK(fs.prepared.size() == prepared);
  CHECK(p->Verify().ok());
}

TEST_CASE("log only: records behind the writeback, unmapped, replay after a crash") {
  // Small kNone commits past several writebacks (each unmaps the pages it
  // starts writing), then a crash: every record is read back, through the
  // map, from the page cache.
  test::TempDir dir;
  const std::string path = dir.File("db");
  WritebackFileSystem fs;
  PagerOptions o = RingOptions(8 << 20);
  o.fs = &fs;
  std::vector<std::string> want;
  {
    auto p = OpenOrDie(path, o);
    REQUIRE(p->PrepareCommits().ok());
    for (uint64_t i = 0; want.size() * 300 < (5u << 20); i++) {
      uint64_t txid;
      REQUIRE(p->AppendCommit(Payload(i, 200 + i % 200), Durability::kNone, &txid).ok());
      want.push_back(Payload(i, 200 + i % 200));
    }
    CHECK(fs.dropped.size() >= 4);
    CHECK(p->Verify().ok());
    p->TEST_CrashOnClose();
  }
  std::vector<std::string> got;
  auto p = OpenIntoMemory(path, o, &got);
  CHECK(got.size() == want.size());
  CHECK(got == want);
}

}  // namespace
}  // namespace mmdoc::storage
