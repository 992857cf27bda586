// mmdoc-bench and mmdoc-syncbench run end to end at a tiny size, and their
// JSON has DESIGN.md's shape: every phase of every engine and durability
// mode present (seed 002's and 003's phases too), with positive ops where
// the engine has the mode (and, for mapping, a typed mapping layer) and an
// n/a row where it does not; the bytes written per op of each write phase
// (/proc/self/io) in the JSON, the CSV and the tables, positive where the
// engine wrote its documents, n/a (never 0) when /proc/self/io is
// unreadable. Also what a first run meets: tools/run-bench --help before
// anything is installed, output paths refused before the run, and
// tools/plot drawing the JSON.
#include <bson/bson.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/backend.h"
#include "bench/machine.h"
#include "bench/report.h"
#include "bench/workload.h"
#include "tests/support/small_disk.h"
#include "tests/support/test_env.h"

namespace mmdoc::bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Parses the file (or, with Parse, a text) with libbson's JSON parser;
// null document on failure.
struct Json {
  Json() = default;
  explicit Json(const std::string& path) { Parse(ReadFile(path)); }
  void Parse(const std::string& text) {
    bson_error_t error;
    doc = bson_new_from_json(reinterpret_cast<const uint8_t*>(text.data()),
                             static_cast<ssize_t>(text.size()), &error);
    if (doc == nullptr) message = error.message;
  }
  ~Json() {
    if (doc != nullptr) bson_destroy(doc);
  }
  // The value at a dotted path ("config.phases", "results.0.notes").
  bool Find(const char* path, bson_iter_t* out) const {
    bson_iter_t it;
    return doc != nullptr && bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, path, out);
  }
  // Calls row(fields) for each element of the "results" array, with
  // `fields` before the element's first field; false when there is no
  // such array or an element is not a document.
  template <typename Fn>
  bool ForEachResult(Fn row) const {
    bson_iter_t it, results;
    if (doc == nullptr || !bson_iter_init_find(&it, doc, "results") ||
        !bson_iter_recurse(&it, &results))
      return false;
    while (bson_iter_next(&results)) {
      bson_iter_t fields;
      if (!bson_iter_recurse(&results, &fields)) return false;
      row(&fields);
    }
    return true;
  }
  bson_t* doc = nullptr;
  std::string message;
};

double Number(const bson_iter_t* it) {
  return BSON_ITER_HOLDS_NUMBER(it) ? bson_iter_as_double(it) : -1;
}

int Run(const std::string& command) {
  INFO(command);
  int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST_CASE("mmdoc-bench writes the JSON contract for every engine and mode", "[bench]") {
  test::TempDir dir;
  std::string engines = "lmdb,rocksdb,sqlite";
  if (NewBackend("mmdoc").ok()) engines = "mmdoc," + engines;
  std::string json = dir.File("out.json"), csv = dir.File("out.csv");
  std::string phases;
  for (const auto& p : AllPhases()) phases += (phases.empty() ? "" : ",") + p;
  std::string cmd = test::BuildDir() + "/mmdoc-bench --engines " + engines +
                    " --docs 2000 --durability all --phases " + phases +
                    " --batch 50 --scans 3 --max-durable-ops 300 --threads 2"
                    " --mapping-docs 500 --quiet --dir " +
                    dir.File("data") + " --json " + json + " --csv " + csv;
  REQUIRE(Run(cmd) == 0);

  Json j(json);
  INFO(j.message);
  REQUIRE(j.doc != nullptr);
  bson_iter_t it, sub;
  for (const char* key :
       {"machine.cpu", "machine.cores", "machine.memory_bytes", "machine.kernel",
        "machine.filesystem", "machine.mount_options", "machine.dataset_bytes", "config.docs",
        "config.durability", "config.batch", "config.rocksdb_build"}) {
    INFO(key);
    CHECK(bson_iter_init(&it, j.doc));
    CHECK(bson_iter_find_descendant(&it, key, &sub));
  }
  REQUIRE(bson_iter_init_find(&it, j.doc, "config"));
  REQUIRE(bson_iter_recurse(&it, &sub));
  REQUIRE(bson_iter_find(&sub, "docs"));
  CHECK(bson_iter_as_int64(&sub) == 2000);

  // (engine, durability, phase) -> available, ops, ops/s, gb/s
  struct Row {
    bool available = false;
    double ops = 0, ops_per_sec = 0, gb_per_sec = -1, p50 = -1, p99 = -1;
    double store_bytes = -1;
    double peak_rss_bytes = -1;
    double raw_ops_per_sec = -1, raw_p50 = -1, raw_p99 = -1;
    bool overhead = false;  // overhead_pct and its insert/read split
    // write_bytes, write_bytes_per_op, cancelled_write_bytes: how many of
    // the three are present, as numbers or as null (n/a)
    int write_fields = 0;
  };
  std::map<std::string, Row> rows;
  REQUIRE(j.ForEachResult([&](bson_iter_t* fields) {
    bson_iter_t& f = *fields;
    std::string engine, durability, phase;
    Row row;
    int seen = 0;
    while (bson_iter_next(&f)) {
      std::string k = bson_iter_key(&f);
      if (k == "engine") engine = bson_iter_utf8(&f, nullptr);
      if (k == "durability") durability = bson_iter_utf8(&f, nullptr);
      if (k == "phase") phase = bson_iter_utf8(&f, nullptr);
      if (k == "available") row.available = bson_iter_bool(&f);
      if (k == "ops") row.ops = Number(&f);
      if (k == "ops_per_sec") row.ops_per_sec = Number(&f);
      if (k == "gb_per_sec") row.gb_per_sec = Number(&f);
      if (k == "p50_us") row.p50 = Number(&f);
      if (k == "p99_us") row.p99 = Number(&f);
      if (k == "store_bytes") row.store_bytes = Number(&f);
      if (k == "peak_rss_bytes") row.peak_rss_bytes = Number(&f);
      if (k == "raw_ops_per_sec") row.raw_ops_per_sec = Number(&f);
      if (k == "raw_p50_us") row.raw_p50 = Number(&f);
      if (k == "raw_p99_us") row.raw_p99 = Number(&f);
      if (k == "overhead_pct" || k == "insert_overhead_pct" || k == "read_overhead_pct") {
        row.overhead = BSON_ITER_HOLDS_NUMBER(&f);
      }
      if (k == "write_bytes" || k == "write_bytes_per_op" || k == "cancelled_write_bytes") {
        if (BSON_ITER_HOLDS_NUMBER(&f) || BSON_ITER_HOLDS_NULL(&f)) ++row.write_fields;
      }
      if (k == "seconds" || k == "notes") ++seen;
    }
    CHECK(seen == 2);
    rows[engine + "/" + durability + "/" + phase] = row;
  }));

  std::stringstream list(engines);
  for (std::string engine; std::getline(list, engine, ',');) {
    auto backend = NewBackend(engine);
    REQUIRE(backend.ok());
    for (Durability d : {Durability::kNone, Durability::kPeriodic, Durability::kMsync,
                         Durability::kFsync, Durability::kGroup}) {
      const std::string prefix = engine + "/" + DurabilityName(d) + "/";
      for (const auto& phase : AllPhases()) {
        std::string name = prefix + phase;
        INFO(name);
        REQUIRE(rows.count(name) == 1);
        const Row& r = rows[name];
        bool has =
            backend.value()->Supports(d) && (phase != "mapping" || backend.value()->HasMapping());
        CHECK(r.available == has);
        // Every write phase that ran, in every mode, carries the bytes
        // written; read phases and n/a rows do not.
        CHECK(r.write_fields == (r.available && WritePhase(phase) ? 3 : 0));
        if (!r.available) continue;
        CHECK(r.ops > 0);
        CHECK(r.ops_per_sec > 0);
        CHECK(r.p50 > 0);
        CHECK(r.p99 >= r.p50);
        if (phase == "search_value") CHECK(r.gb_per_sec > 0);
        if (phase == "mapping") {
          CHECK(r.raw_ops_per_sec > 0);
          CHECK(r.raw_p50 > 0);
          CHECK(r.raw_p99 >= r.raw_p50);
          CHECK(r.overhead);
          // 500, capped by --max-durable-ops in a durable mode
          CHECK(r.ops == 2 * (d == Durability::kNone ? 500 : 300));
        } else {
          CHECK(r.raw_ops_per_sec == -1);
        }
      }
      if (!rows[prefix + "insert"].available) continue;
      // Every engine does the same work: build_index covers all documents,
      // delete_value deletes half as many as the scans (2 of 3), delete_all
      // what the deletes left.
      INFO(prefix);
      CHECK(rows[prefix + "insert_noindex"].ops == rows[prefix + "insert"].ops);
      CHECK(rows[prefix + "build_index"].ops == 2000);
      CHECK(rows[prefix + "delete_value"].ops == 2);
      // At least 10 prefix queries (N/1000 is 2), N/10 lookups / 10 pages,
      // N/10 pushes (below the durable cap of 300).
      CHECK(rows[prefix + "search_prefix"].ops == 10);
      CHECK(rows[prefix + "sort_limit"].ops == 20);
      // The compound phase: as many queries as lookups, on its own store
      // (its disk use recorded).
      CHECK(rows[prefix + "compound"].ops == 200);
      CHECK(rows[prefix + "compound"].store_bytes > 0);
      CHECK(rows[prefix + "push"].ops == 200);
      CHECK(rows[prefix + "delete_all"].ops == 2000 - rows[prefix + "delete"].ops - 2);
      // Each store's own disk use: the one without the index is not much
      // bigger than the one with it, as it would be if it counted the main
      // store beside it. (With a tiny write buffer, MMDOC_WRITE_BUFFER, runs
      // and free pages can make it a page or two larger.)
      CHECK(rows[prefix + "insert_noindex"].store_bytes > 0);
      CHECK(rows[prefix + "insert_noindex"].store_bytes <
            rows[prefix + "insert"].store_bytes * 3 / 2);
      // Peak memory is recorded (Linux /proc): mmdoc's store is mapped, so
      // loading 2000 documents makes pages resident. (Other engines may
      // reuse heap the previous engine freed, so 0 is possible for them.)
      CHECK(rows[prefix + "insert"].peak_rss_bytes >= 0);
      if (prefix.rfind("mmdoc/", 0) == 0) CHECK(rows[prefix + "insert"].peak_rss_bytes > 0);
    }
  }
  std::string text = ReadFile(csv);
  CHECK(text.rfind("engine,phase,durability,docs", 0) == 0);
  CHECK(text.find(",notes,raw_ops_per_sec,overhead_pct,") != std::string::npos);
  if (engines.rfind("mmdoc,", 0) == 0)
    CHECK(text.find("\nmmdoc,mapping,none,2000,") != std::string::npos);
  CHECK(text.find("\nlmdb,build_index,none,2000,") != std::string::npos);
}

TEST_CASE("mmdoc-bench times every phase by default", "[bench]") {
  test::TempDir dir;
  std::string json = dir.File("out.json");
  REQUIRE(Run(test::BuildDir() + "/mmdoc-bench --engines lmdb --docs 100 --quiet --dir " +
              dir.File("data") + " --json " + json) == 0);
  Json j(json);
  REQUIRE(j.doc != nullptr);
  bson_iter_t it, sub;
  REQUIRE(j.Find("config.phases", &sub));
  REQUIRE(bson_iter_recurse(&sub, &it));
  std::vector<std::string> phases;
  while (bson_iter_next(&it)) phases.push_back(bson_iter_utf8(&it, nullptr));
  CHECK(phases == DefaultPhases());
}

TEST_CASE("mmdoc-bench prints the scan rate as a share of memory bandwidth", "[bench]") {
  test::TempDir dir;
  std::string out = dir.File("out.txt");
  REQUIRE(
      Run(test::BuildDir() +
          "/mmdoc-bench --engines lmdb,sqlite --docs 500 --phases search_value --scans 2 --dir " +
          dir.File("data") + " > " + out) == 0);
  std::string text = ReadFile(out);
  INFO(text);
  // In every engine's table and in the comparison: "  of mem read  N.N%".
  size_t rows = 0;
  for (size_t at = text.find("\n  of mem read"); at != std::string::npos;
       at = text.find("\n  of mem read", at + 1)) {
    const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    INFO(line);
    CHECK(line.find('%') != std::string::npos);
    rows++;
  }
  CHECK(rows == 3);
}

TEST_CASE("a durable run at batch 1 measures the device's sync rate beside the engines",
          "[bench]") {
  test::TempDir dir;
  auto run = [&](const std::string& name, const std::string& flags, double* rate) {
    const std::string json = dir.File(name + ".json");
    const std::string out = dir.File(name + ".txt");
    REQUIRE(Run(test::BuildDir() + "/mmdoc-bench --engines mmdoc,lmdb --docs 200 --phases insert" +
                flags + " --dir " + dir.File("data") + " --json " + json + " > " + out) == 0);
    Json j(json);
    REQUIRE(j.doc != nullptr);
    bson_iter_t f;
    REQUIRE(j.Find("machine.device_syncs_per_sec", &f));
    *rate = Number(&f);
    return ReadFile(out);
  };
  double rate = -1;
  const std::string text = run("fsync", " --durability fsync --batch 1", &rate);
  INFO(text);
  CHECK(rate > 0);
  // A line per engine, its commits as a share of the device's rate.
  CHECK(text.find("the device: ") != std::string::npos);
  CHECK(text.find("  mmdoc      fsync  insert") != std::string::npos);
  CHECK(text.find("  lmdb       fsync  insert") != std::string::npos);
  // Not measured where no commit waits for one sync of its own.
  CHECK(run("none", " --durability none --batch 1", &rate).find("the device: ") ==
        std::string::npos);
  CHECK(rate == 0);
  run("batch", " --durability fsync --batch 100", &rate);
  CHECK(rate == 0);
}

// The first row of a run of mmdoc alone (500 documents, `phases`, extra
// `flags`): its notes (the settings) and its store size.
struct MmdocRow {
  std::string notes;
  double store_bytes = -1;
};
MmdocRow RunMmdoc(const test::TempDir& dir, const std::string& name, const std::string& phases,
                  const std::string& flags) {
  const std::string json = dir.File(name + ".json");
  REQUIRE(Run(test::BuildDir() + "/mmdoc-bench --engines mmdoc --docs 500 --quiet --phases " +
              phases + flags + " --dir " + dir.File("data") + " --json " + json) == 0);
  Json j(json);
  REQUIRE(j.doc != nullptr);
  MmdocRow row;
  bson_iter_t f;
  REQUIRE(j.Find("results.0.notes", &f));
  row.notes = bson_iter_utf8(&f, nullptr);
  REQUIRE(j.Find("results.0.store_bytes", &f));
  row.store_bytes = Number(&f);
  return row;
}

TEST_CASE("mmdoc-bench --mmdoc-log-mib sets mmdoc's log size", "[bench]") {
  test::TempDir dir;
  // store_bytes counts the data file and the log, which starts at a
  // sixteenth of its budget (500 documents do not grow it).
  const MmdocRow small = RunMmdoc(dir, "log4", "insert", " --mmdoc-log-mib 4");
  const MmdocRow large = RunMmdoc(dir, "log12", "insert", " --mmdoc-log-mib 12");
  CHECK(small.notes.find("log 4 MiB") != std::string::npos);
  CHECK(large.notes.find("log 12 MiB") != std::string::npos);
  CHECK(large.store_bytes - small.store_bytes == (8 << 20) / 16);
}

TEST_CASE("mmdoc-bench --mmdoc-page-kib sets mmdoc's page size", "[bench]") {
  test::TempDir dir;
  // The notes give the page size the database file reports (DB::Stats).
  CHECK(RunMmdoc(dir, "page4", "insert,search_value", "").notes.find("page 4096,") !=
        std::string::npos);
  CHECK(RunMmdoc(dir, "page16", "insert,search_value", " --mmdoc-page-kib 16")
            .notes.find("page 16384,") != std::string::npos);
  // Not a page size the library accepts: refused before anything runs.
  CHECK(Run(test::BuildDir() + "/mmdoc-bench --engines mmdoc --docs 10 --quiet" +
            " --mmdoc-page-kib 5 --dir " + dir.File("data")) != 0);
}

TEST_CASE("mmdoc-bench --lookups sets the point reads per search phase", "[bench]") {
  test::TempDir dir;
  // phase -> ops of the run's rows; config.lookups as recorded.
  int runs = 0;
  auto run = [&](const std::string& flag, std::map<std::string, double>* ops) {
    std::string json = dir.File("lookups" + std::to_string(runs++) + ".json");
    REQUIRE(Run(test::BuildDir() + "/mmdoc-bench --engines mmdoc,lmdb --docs 500 --phases " +
                "search_id,search_key --quiet" + flag + " --dir " + dir.File("data") + " --json " +
                json) == 0);
    Json j(json);
    REQUIRE(j.doc != nullptr);
    REQUIRE(j.ForEachResult([&](bson_iter_t* f) {
      std::string engine, phase;
      double n = 0;
      while (bson_iter_next(f)) {
        std::string k = bson_iter_key(f);
        if (k == "engine") engine = bson_iter_utf8(f, nullptr);
        if (k == "phase") phase = bson_iter_utf8(f, nullptr);
        if (k == "ops") n = Number(f);
      }
      (*ops)[engine + "/" + phase] = n;
    }));
    bson_iter_t f;
    REQUIRE(j.Find("config.lookups", &f));
    return Number(&f);
  };
  std::map<std::string, double> seed, more;
  CHECK(run("", &seed) == 0);
  CHECK(run(" --lookups 777", &more) == 777);
  for (const char* e : {"mmdoc", "lmdb"}) {
    INFO(e);
    const std::string p = e;
    CHECK(seed[p + "/search_id"] == 50);  // N/10
    CHECK(seed[p + "/search_key"] == 50);
    CHECK(more[p + "/search_id"] == 777);
    CHECK(more[p + "/search_key"] == 777);
  }
}

TEST_CASE("mmdoc-bench says what mmdoc's reads read through", "[bench]") {
  test::TempDir dir;
  const std::string json = dir.File("state.json");
  // A 1 MiB buffer, so that 20k inserts leave runs behind it.
  const std::string out = dir.File("state.txt");
  REQUIRE(Run(test::BuildDir() +
              "/mmdoc-bench --engines mmdoc,mmdoc-pages,lmdb --docs 20k --phases " +
              "insert,search_id,search_key --mmdoc-buffer-mib 1 --dir " + dir.File("data") +
              " --json " + json + " > " + out) == 0);
  Json j(json);
  REQUIRE(j.doc != nullptr);
  std::map<std::string, std::string> before;  // engine/phase -> state_before
  REQUIRE(j.ForEachResult([&](bson_iter_t* f) {
    std::string engine, phase, state = "(none)";
    while (bson_iter_next(f)) {
      std::string k = bson_iter_key(f);
      if (k == "engine") engine = bson_iter_utf8(f, nullptr);
      if (k == "phase") phase = bson_iter_utf8(f, nullptr);
      if (k == "state_before") state = bson_iter_utf8(f, nullptr);
    }
    before[engine + "/" + phase] = state;
  }));
  for (const char* phase : {"search_id", "search_key"}) {
    INFO(phase);
    const std::string got = before[std::string("mmdoc/") + phase];
    std::smatch m;
    REQUIRE(std::regex_search(
        got, m,
        std::regex(R"(^buffer [0-9.]+ MiB unmerged, ([0-9]+) runs \([0-9]+ being merged\))")));
    CHECK(std::stoi(m[1].str()) > 0);  // 20k documents overflow 1 MiB
    CHECK(before[std::string("lmdb/") + phase] == "(none)");
    CHECK(before[std::string("mmdoc-pages/") + phase] == "(none)");  // no buffer, no runs
    CHECK(before["mmdoc/insert"] == "(none)");
  }
  CHECK(ReadFile(out).find("  read through   buffer ") != std::string::npos);
}

// The fields of one CSV line (quoted fields may hold commas and quotes).
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

bool OnTmpfs(const std::string& path) {
  struct statfs fs;
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC;
}

TEST_CASE("mmdoc-bench reports the bytes each write phase wrote per op", "[bench]") {
  // A tmpfs has no storage and charges no write_bytes: the stores go where
  // a disk is (the build directory when the temporary one is a tmpfs).
  test::TempDir tmp;
  std::string data = tmp.File("data");
  if (OnTmpfs(tmp.path())) {
    std::string t = test::BuildDir() + "/bench-io-test-XXXXXX";
    if (::mkdtemp(t.data()) != nullptr) data = t;
  }
  std::filesystem::create_directories(data);
  const bool on_disk = !OnTmpfs(data);
  IoCounters io;
  const bool proc_io = ReadIoCounters(&io);
  if (!on_disk) WARN("no disk-backed directory: write_bytes are 0 on a tmpfs; not checked > 0");
  if (!proc_io) WARN("/proc/self/io is unreadable here: the figures must be n/a");

  std::string engines = "lmdb,rocksdb,sqlite";
  if (NewBackend("mmdoc").ok()) engines = "mmdoc," + engines;
  const std::string json = tmp.File("io.json"), csv = tmp.File("io.csv"), out = tmp.File("io.txt");
  const int rc =
      Run(test::BuildDir() + "/mmdoc-bench --engines " + engines +
          " --docs 3000 --batch 100 --phases insert,search_id,update,delete --dir " + data +
          "/run --json " + json + " --csv " + csv + " > " + out + " 2> " + tmp.File("err.txt"));
  if (data != tmp.File("data")) std::filesystem::remove_all(data);
  REQUIRE(rc == 0);

  // JSON: engine/phase -> write_bytes, write_bytes_per_op (-1: absent,
  // -2: null), and the row's ops.
  struct Io {
    double bytes = -1, per_op = -1, cancelled = -1, ops = 0;
  };
  std::map<std::string, Io> rows;
  Json j(json);
  REQUIRE(j.doc != nullptr);
  REQUIRE(j.ForEachResult([&](bson_iter_t* f) {
    std::string engine, phase;
    Io io;
    while (bson_iter_next(f)) {
      const std::string k = bson_iter_key(f);
      const double v = BSON_ITER_HOLDS_NULL(f) ? -2 : Number(f);
      if (k == "engine") engine = bson_iter_utf8(f, nullptr);
      if (k == "phase") phase = bson_iter_utf8(f, nullptr);
      if (k == "ops") io.ops = v;
      if (k == "write_bytes") io.bytes = v;
      if (k == "write_bytes_per_op") io.per_op = v;
      if (k == "cancelled_write_bytes") io.cancelled = v;
    }
    rows[engine + "/" + phase] = io;
  }));
  // CSV: the same figures by column name.
  std::stringstream lines(ReadFile(csv));
  std::string line;
  REQUIRE(std::getline(lines, line));
  const std::vector<std::string> header = CsvFields(line);
  auto column = [&](const char* name) {
    return std::find(header.begin(), header.end(), name) - header.begin();
  };
  const size_t c_engine = column("engine"), c_phase = column("phase"),
               c_bytes = column("write_bytes"), c_per_op = column("write_bytes_per_op"),
               c_cancelled = column("cancelled_write_bytes");
  REQUIRE(c_per_op < header.size());
  REQUIRE(c_bytes < header.size());
  REQUIRE(c_cancelled < header.size());
  // The columns of older files keep their places; the new ones come last.
  CHECK(column("read_overhead_pct") == 18);
  CHECK(c_bytes == 19);
  std::map<std::string, std::vector<std::string>> csv_rows;
  while (std::getline(lines, line)) {
    std::vector<std::string> f = CsvFields(line);
    REQUIRE(f.size() == header.size());
    csv_rows[f[c_engine] + "/" + f[c_phase]] = f;
  }
  const std::string text = ReadFile(out);

  std::stringstream list(engines);
  for (std::string engine; std::getline(list, engine, ',');) {
    INFO(engine);
    const Io& read = rows[engine + "/search_id"];
    CHECK(read.per_op == -1);  // a read phase has no such field
    CHECK(csv_rows[engine + "/search_id"][c_per_op].empty());
    for (const char* phase : {"insert", "update", "delete"}) {
      INFO(phase);
      const Io& r = rows[engine + "/" + phase];
      const std::vector<std::string>& c = csv_rows[engine + "/" + phase];
      REQUIRE(c.size() == header.size());
      if (!proc_io) {
        CHECK(r.per_op == -2);
        CHECK(c[c_per_op] == "n/a");
        continue;
      }
      REQUIRE(r.ops > 0);
      CHECK(r.bytes >= 0);
      CHECK(r.cancelled >= 0);
      CHECK(r.per_op == Approx(r.bytes / r.ops));
      CHECK(std::strtod(c[c_bytes].c_str(), nullptr) == r.bytes);
      CHECK(std::strtod(c[c_per_op].c_str(), nullptr) == Approx(r.per_op).epsilon(0.01));
    }
    if (!proc_io || !on_disk) continue;
    // Every engine puts each inserted document (145 bytes of BSON) into a
    // page it dirties, or into its log: at least 100 bytes per insert.
    CHECK(rows[engine + "/insert"].per_op >= 100);
  }
  // The tables: in the comparison, a "written/op" line under each write
  // phase (the search_id line is followed by update's), a cell per engine.
  INFO(text);
  const size_t at = text.find("\ncomparison");
  REQUIRE(at != std::string::npos);
  std::stringstream table(text.substr(at + 1));
  std::vector<std::string> after;  // phase -> the line below it
  std::string prev;
  size_t written = 0;
  for (std::string l; std::getline(table, l); prev = l) {
    if (l.rfind("search_id ", 0) == 0) after.push_back("search_id");
    if (prev.rfind("search_id ", 0) == 0) after.push_back(l.substr(0, l.find(' ')));
    if (l.rfind("  written/op", 0) != 0) continue;
    ++written;
    std::stringstream cells(l.substr(std::strlen("  written/op")));
    int n = 0;
    for (std::string cell; cells >> cell;)
      n += cell == "B" || cell == "KiB" || cell == "MiB" || cell == "n/a";
    CHECK(n == static_cast<int>(std::count(engines.begin(), engines.end(), ',') + 1));
  }
  CHECK(written == 3);  // insert, update, delete
  CHECK(after == std::vector<std::string>{"search_id", "update"});
}

TEST_CASE("mmdoc-bench --flush-before-writes counts every page a write phase dirties", "[bench]") {
  test::TempDir tmp;
  std::string data = tmp.File("data");
  if (OnTmpfs(tmp.path())) {
    std::string t = test::BuildDir() + "/bench-flush-test-XXXXXX";
    if (::mkdtemp(t.data()) != nullptr) data = t;
  }
  std::filesystem::create_directories(data);
  IoCounters io;
  const bool measurable = !OnTmpfs(data) && ReadIoCounters(&io);
  // Engines that change pages in place (RocksDB's updates wait in its
  // memtable, so they are not here).
  std::string engines = "lmdb,sqlite";
  if (NewBackend("mmdoc").ok()) engines = "mmdoc," + engines;
  const std::string json = tmp.File("flush.json");
  const int rc = Run(test::BuildDir() + "/mmdoc-bench --engines " + engines +
                     " --docs 3000 --batch 100 --phases insert,update --flush-before-writes" +
                     " --quiet --dir " + data + "/run --json " + json);
  if (data != tmp.File("data")) std::filesystem::remove_all(data);
  REQUIRE(rc == 0);
  Json j(json);
  REQUIRE(j.doc != nullptr);
  bson_iter_t f;
  REQUIRE(j.Find("config.flush_before_writes", &f));
  CHECK(bson_iter_as_bool(&f));
  if (!measurable) {
    WARN("no disk-backed directory or no /proc/self/io: the figures are not checked");
    return;
  }
  // Each update rewrites a 145-byte document in a page the insert phase
  // dirtied; written back before the phase, that page is charged again.
  std::map<std::string, double> update_per_op;
  REQUIRE(j.ForEachResult([&](bson_iter_t* r) {
    std::string engine, phase;
    double per_op = -1;
    while (bson_iter_next(r)) {
      const std::string k = bson_iter_key(r);
      if (k == "engine") engine = bson_iter_utf8(r, nullptr);
      if (k == "phase") phase = bson_iter_utf8(r, nullptr);
      if (k == "write_bytes_per_op" && !BSON_ITER_HOLDS_NULL(r)) per_op = Number(r);
    }
    if (phase == "update") update_per_op[engine] = per_op;
  }));
  std::stringstream list(engines);
  for (std::string engine; std::getline(list, engine, ',');) {
    INFO(engine);
    CHECK(update_per_op[engine] >= 100);
  }
}

// What PrintTables prints.
std::string TablesText(const RunInfo& run, const std::vector<PhaseResult>& results) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  REQUIRE(mem != nullptr);
  PrintTables(mem, run, results);
  std::fclose(mem);
  std::string text(buf, len);
  std::free(buf);
  return text;
}

// A run of 100 documents in `none` mode.
RunInfo HundredDocs(std::vector<std::string> phases) {
  RunInfo run;
  run.docs = {100};
  run.durabilities = {"none"};
  run.phases = std::move(phases);
  return run;
}

// A 100-document insert row of `engine` whose written bytes were measured.
PhaseResult InsertRow(const char* engine) {
  PhaseResult r;
  r.engine = engine;
  r.phase = "insert";
  r.durability = "none";
  r.docs = 100;
  r.ops = 100;
  r.ops_per_sec = 1000;
  r.io_measured = true;
  return r;
}

TEST_CASE("an unreadable /proc/self/io gives n/a and never 0", "[bench]") {
  PhaseResult insert = InsertRow("lmdb");
  insert.io_known = false;
  PhaseResult search = insert;
  search.phase = "search_id";
  search.io_measured = false;
  const RunInfo run = HundredDocs({"insert", "search_id"});
  const std::vector<PhaseResult> results = {insert, search};

  bson_error_t error;
  const std::string json = ResultsToJson(MachineInfo{}, run, results);
  bson_t* doc = bson_new_from_json(reinterpret_cast<const uint8_t*>(json.data()),
                                   static_cast<ssize_t>(json.size()), &error);
  REQUIRE(doc != nullptr);
  bson_iter_t it, v;
  for (const char* key : {"results.0.write_bytes", "results.0.write_bytes_per_op",
                          "results.0.cancelled_write_bytes"}) {
    INFO(key);
    REQUIRE(bson_iter_init(&it, doc));
    REQUIRE(bson_iter_find_descendant(&it, key, &v));
    CHECK(BSON_ITER_HOLDS_NULL(&v));
  }
  REQUIRE(bson_iter_init(&it, doc));
  CHECK(!bson_iter_find_descendant(&it, "results.1.write_bytes_per_op", &v));
  bson_destroy(doc);

  const std::string csv = ResultsToCsv(results);
  CHECK(csv.find("\nlmdb,insert,") != std::string::npos);
  // The io columns, then the writer's waits, empty for an engine without them.
  CHECK(csv.find(",n/a,n/a,n/a,,,,\n") != std::string::npos);
  CHECK(csv.find(",,,,,,,\n", csv.find("\nlmdb,search_id,")) != std::string::npos);

  const std::string text = TablesText(run, results);
  INFO(text);
  const size_t at = text.find("\n  written/op");
  REQUIRE(at != std::string::npos);
  const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  CHECK(line.find("n/a") != std::string::npos);
  CHECK(line.find(" B") == std::string::npos);

  // Known and zero is a figure: 0 B.
  insert.io_known = true;
  const std::string known = ResultsToCsv({insert});
  CHECK(known.find(",0,0.0,0,,,,\n") != std::string::npos);
}

TEST_CASE("the writer's waits are columns, JSON fields and a line, where the engine counts them",
          "[bench]") {
  PhaseResult insert = InsertRow("mmdoc");
  insert.io_known = true;
  insert.waits_known = true;
  insert.merge_waits = 3;
  insert.merge_wait_seconds = 0.25;
  insert.writer_checkpoints = 1;
  insert.log_full_merges = 0;
  PhaseResult lmdb = insert;
  lmdb.engine = "lmdb";
  lmdb.waits_known = false;
  const RunInfo run = HundredDocs({"insert"});
  const std::vector<PhaseResult> results = {insert, lmdb};

  const std::string csv = ResultsToCsv(results);
  INFO(csv);
  CHECK(csv.find("merge_waits,merge_wait_seconds,writer_checkpoints,log_full_merges\n") !=
        std::string::npos);
  CHECK(csv.find(",3,0.250000,1,0\n", csv.find("\nmmdoc,insert,")) != std::string::npos);
  CHECK(csv.find(",,,,\n", csv.find("\nlmdb,insert,")) != std::string::npos);

  Json json;
  json.Parse(ResultsToJson(MachineInfo{}, run, results));
  REQUIRE(json.doc != nullptr);
  bson_iter_t v;
  REQUIRE(json.Find("results.0.merge_waits", &v));
  CHECK(bson_iter_as_int64(&v) == 3);
  REQUIRE(json.Find("results.0.writer_checkpoints", &v));
  CHECK(bson_iter_as_int64(&v) == 1);
  CHECK(!json.Find("results.1.merge_waits", &v));

  const std::string text = TablesText(run, results);
  INFO(text);
  CHECK(text.find("writer waited  for 3 merges (0.25 s), 1 checkpoint, 0 full-log merges") !=
        std::string::npos);
  // Only under mmdoc's table: LMDB's has no such line.
  CHECK(text.find("writer waited") == text.rfind("writer waited"));
}

TEST_CASE("tools/run-bench builds a target the build system has", "[bench]") {
  // README command 1 builds mmdoc-bench with `cmake --build --target T`; on
  // a fresh checkout a T that is the binary's name but not a target fails.
  const std::string script = ReadFile(std::string(MMDOC_SOURCE_DIR) + "/tools/run-bench");
  const size_t at = script.find("--target ");
  REQUIRE(at != std::string::npos);
  const size_t from = at + std::strlen("--target ");
  const std::string target = script.substr(from, script.find_first_of(" \n", from) - from);
  INFO(target);
  test::TempDir dir;
  const std::string out = dir.File("targets.txt");
  REQUIRE(Run("cmake --build " + test::BuildDir() + " --target help > " + out) == 0);
  CHECK(ReadFile(out).find("... " + target + "\n") != std::string::npos);
}

// Seconds a shell command takes; *rc gets its exit status.
double Timed(const std::string& command, int* rc) {
  const auto start = std::chrono::steady_clock::now();
  *rc = Run(command);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// What a shell command prints on stderr, read through a pipe rather than a
// file so that the capture cannot fail where the command did not; *rc gets
// its exit status and *seconds the time it took.
std::string StderrOf(const std::string& command, int* rc, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  std::string text;
  FILE* pipe = ::popen((command + " 2>&1 >/dev/null").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  const int status = ::pclose(pipe);
  *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return text;
}

TEST_CASE("tools/run-bench --help answers at once, installing and building nothing", "[bench]") {
  // Every installer and build tool on PATH fails and leaves a mark: help
  // must not call any of them.
  test::TempDir dir;
  const std::string bin = dir.File("bin"), mark = dir.File("called");
  std::filesystem::create_directories(bin);
  for (const char* tool : {"apt-get", "apt", "dpkg-query", "sudo", "cmake", "make", "ninja", "c++",
                           "g++", "gcc", "python3"}) {
    const std::string path = bin + "/" + tool;
    std::ofstream(path) << "#!/bin/sh\necho \"$0\" >>" << mark << "\nexit 1\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  const std::string script = std::string(MMDOC_SOURCE_DIR) + "/tools/run-bench";
  const std::string out = dir.File("help.txt");
  const std::string env = "PATH=" + bin + ":$PATH MMDOC_BUILD=";

  // Nothing built yet: run-bench's own help and where the rest will be.
  int rc = -1;
  const double took =
      Timed(env + dir.File("nobuild") + " " + script + " --help > " + out + " 2>&1", &rc);
  std::string text = ReadFile(out);
  INFO(text);
  CHECK(rc == 0);
  CHECK(took < 5);
  CHECK(!std::filesystem::exists(mark));
  for (const char* needle :
       {"Usage: tools/run-bench", "tools/setup", "tools/build-rocksdb-release",
        "minutes on 2 idle cores", "MMDOC_ROCKSDB=debian", "MMDOC_BUILD=DIR", "--docs 1M",
        "--durability all", "--json FILE", "/mmdoc-bench --help` lists every option"}) {
    INFO(needle);
    CHECK(text.find(needle) != std::string::npos);
  }
  CHECK(Run(env + dir.File("nobuild") + " " + script + " -h >/dev/null 2>&1") == 0);

  // Built: the binary's own option list follows, and every option the
  // static part names is one the binary has.
  rc = -1;
  const double took_built =
      Timed(env + test::BuildDir() + " " + script + " --help > " + out + " 2>&1", &rc);
  text = ReadFile(out);
  INFO(text);
  CHECK(rc == 0);
  CHECK(took_built < 5);
  CHECK(!std::filesystem::exists(mark));
  const size_t every = text.find("Every mmdoc-bench option");
  REQUIRE(every != std::string::npos);
  const std::string options = text.substr(every);
  CHECK(options.find("--mmdoc-page-kib") != std::string::npos);
  const size_t common = text.find("Common mmdoc-bench options:");
  REQUIRE(common != std::string::npos);
  std::stringstream lines(text.substr(common, every - common));
  int named = 0;
  for (std::string line; std::getline(lines, line);) {
    for (size_t at = line.find("--"); at != std::string::npos; at = line.find("--", at + 2)) {
      const std::string flag = line.substr(at, line.find_first_of(" ,=", at) - at);
      INFO(flag);
      CHECK(options.find(flag) != std::string::npos);
      ++named;
    }
  }
  CHECK(named >= 7);
}

TEST_CASE("mmdoc-bench refuses an output path it cannot write before the run", "[bench]") {
  test::TempDir dir;
  // 2M documents would take minutes to load: the refusal must come first.
  const std::string bench =
      test::BuildDir() + "/mmdoc-bench --engines lmdb --docs 2M --quiet --dir " + dir.File("data");
  for (const std::string& flag : {std::string(" --json ") + dir.File("no/such/dir/out.json"),
                                  std::string(" --csv ") + dir.File("no/such/dir/out.csv"),
                                  std::string(" --json ") + dir.path()}) {  // a directory
    INFO(flag);
    int rc = -1;
    double took = 0;
    const std::string text = StderrOf(bench + flag, &rc, &took);
    INFO(text);
    CHECK(rc == 2);
    CHECK(took < 10);
    CHECK(text.rfind("mmdoc-bench: cannot write --", 0) == 0);
    CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  }
  // The check leaves no file behind and does not truncate one.
  const std::string fresh = dir.File("fresh.json"), old = dir.File("old.json");
  std::ofstream(old) << "previous run";
  CHECK(Run(test::BuildDir() + "/mmdoc-bench --engines nosuch --docs 10 --json " + fresh +
            " --csv " + old + " 2>/dev/null") == 2);
  CHECK(!std::filesystem::exists(fresh));
  CHECK(ReadFile(old) == "previous run");
  // A data directory that cannot be made: one line, status 2.
  CHECK(Run(test::BuildDir() + "/mmdoc-bench --engines lmdb --docs 10 --dir " + old +
            "/sub 2>/dev/null") == 2);
}

TEST_CASE("tools/plot draws mmdoc-bench's JSON and CSV", "[bench]") {
  const std::string plot = std::string(MMDOC_SOURCE_DIR) + "/tools/plot";
  if (Run(plot + " --help >/dev/null 2>&1") != 0) {  // it imports matplotlib
    WARN("python3-matplotlib is not installed (tools/setup installs it)");
    return;
  }
  test::TempDir dir;
  std::string engines = "lmdb,sqlite";
  if (NewBackend("mmdoc").ok()) engines = "mmdoc," + engines;
  const std::string bench = test::BuildDir() + "/mmdoc-bench --engines " + engines +
                            " --docs 300 --batch 50 --max-durable-ops 100 --scans 2"
                            " --quiet --dir " +
                            dir.File("data");
  // One mode, every phase: the ratio chart; no durability chart, said so.
  REQUIRE(Run(bench + " --json " + dir.File("one.json") + " --csv " + dir.File("one.csv")) == 0);
  const std::string err = dir.File("err.txt");
  REQUIRE(Run(plot + " -o " + dir.File("charts") + " " + dir.File("one.json") + " > /dev/null 2> " +
              err) == 0);
  CHECK(ReadFile(err).find("no durability chart") != std::string::npos);
  // Every durability mode: a ratio chart per mode and the durability chart.
  REQUIRE(Run(bench + " --durability all --phases insert,update --json " + dir.File("all.json")) ==
          0);
  REQUIRE(Run(plot + " -o " + dir.File("charts") + " " + dir.File("all.json") + " > /dev/null") ==
          0);
  // The CSV of the first run draws the same way.
  REQUIRE(Run(plot + " -o " + dir.File("csv") + " " + dir.File("one.csv") + " > /dev/null 2>&1") ==
          0);
  for (const char* png :
       {"charts/one-ratio.png", "charts/all-none-ratio.png", "charts/all-fsync-ratio.png",
        "charts/all-durability.png", "csv/one-ratio.png"}) {
    INFO(png);
    const std::string bytes = ReadFile(dir.File(png));
    CHECK(bytes.size() > 1000);
    CHECK(bytes.rfind("\x89PNG", 0) == 0);
  }
  // Not a result file: status 1 and nothing drawn.
  std::ofstream(dir.File("empty.json")) << "{}";
  CHECK(Run(plot + " -o " + dir.File("none") + " " + dir.File("empty.json") + " 2>/dev/null") == 1);
}

TEST_CASE("mmdoc-bench refuses bad arguments", "[bench]") {
  std::string bench = test::BuildDir() + "/mmdoc-bench --quiet ";
  CHECK(Run(bench + "--engines nosuch --docs 100 2>/dev/null") == 2);
  CHECK(Run(bench + "--engines lmdb --docs 1x 2>/dev/null") == 2);
  CHECK(Run(bench + "--engines lmdb --docs 100 --durability sometimes 2>/dev/null") == 2);
  CHECK(Run(bench + "--engines lmdb --docs 100 --phases nosuch 2>/dev/null") == 2);
  CHECK(Run(bench + "--engines lmdb --docs 100 --clients nosuch 2>/dev/null") == 2);
  // lmdb has no server: nothing is left to run remotely.
  CHECK(Run(bench + "--engines lmdb --docs 100 --clients remote 2>/dev/null") == 2);
}

TEST_CASE("mmdoc-bench --clients remote runs mmdoc through mmdoc serve, w:1 and w:0", "[bench]") {
  if (!NewBackend("mmdoc-remote").ok()) return;  // built without libmongoc
  test::TempDir dir;
  std::string json = dir.File("out.json");
  REQUIRE(Run(test::BuildDir() +
              "/mmdoc-bench --engines mmdoc,lmdb --clients local,remote --docs 500 "
              "--phases insert,search_id,update --quiet --dir " +
              dir.File("data") + " --json " + json) == 0);
  std::string text = ReadFile(json);
  for (const char* engine : {"mmdoc", "lmdb", "mmdoc-remote", "mmdoc-remote-w0"}) {
    INFO(engine);
    CHECK(text.find("\"engine\" : \"" + std::string(engine) + "\"") != std::string::npos);
  }
  CHECK(text.find("libmongoc") != std::string::npos);  // the remote settings line
  json = dir.File("remote.json");
  REQUIRE(Run(test::BuildDir() +
              "/mmdoc-bench --engines mmdoc,lmdb --clients remote --docs 200 "
              "--phases insert --quiet --dir " +
              dir.File("data2") + " --json " + json) == 0);
  text = ReadFile(json);
  CHECK(text.find("\"engine\" : \"mmdoc-remote\"") != std::string::npos);
  CHECK(text.find("\"engine\" : \"lmdb\"") == std::string::npos);
  CHECK(text.find("\"engine\" : \"mmdoc\"") == std::string::npos);
}

// The (engine, phase, threads) of every row of a CSV, with its ops.
std::map<std::string, double> CsvRows(const std::string& path) {
  std::map<std::string, double> rows;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string field; f.size() < 8 && std::getline(ss, field, ',');) f.push_back(field);
    if (f.size() == 8) rows[f[0] + "/" + f[1] + "/" + f[5]] = std::strtod(f[7].c_str(), nullptr);
  }
  return rows;
}

TEST_CASE("mmdoc-bench --threads with a list times each read phase per count", "[bench]") {
  test::TempDir dir;
  std::string engines = "lmdb";
  if (NewBackend("mmdoc").ok()) engines = "mmdoc," + engines;
  // Unsorted and repeated: the counts run ascending, once each.
  const std::string out = dir.File("list.txt"), csv = dir.File("list.csv");
  const std::string json = dir.File("list.json");
  REQUIRE(Run(test::BuildDir() + "/mmdoc-bench --engines " + engines +
              " --docs 1000 --threads 3,1,3 --phases insert,search_id,search_key,sort_limit,update"
              " --dir " +
              dir.File("data") + " --csv " + csv + " --json " + json + " > " + out +
              " 2>/dev/null") == 0);
  std::map<std::string, double> rows = CsvRows(csv);
  std::stringstream list(engines);
  for (std::string engine; std::getline(list, engine, ',');) {
    INFO(engine);
    // A read phase per count, its ops the same; a write phase once, with
    // the lowest count.
    for (const char* phase : {"search_id", "search_key", "sort_limit"}) {
      INFO(phase);
      CHECK(rows.count(engine + "/" + phase + "/1") == 1);
      CHECK(rows.count(engine + "/" + phase + "/3") == 1);
      CHECK(rows[engine + "/" + phase + "/3"] == rows[engine + "/" + phase + "/1"]);
    }
    CHECK(rows[engine + "/search_id/1"] == 100);
    CHECK(rows[engine + "/insert/1"] == 1000);
    CHECK(rows[engine + "/update/1"] == 100);
    CHECK(rows.count(engine + "/insert/3") == 0);
    CHECK(rows.count(engine + "/update/3") == 0);
  }
  CHECK(rows.size() ==
        8 * static_cast<size_t>(std::count(engines.begin(), engines.end(), ',') + 1));
  const std::string text = ReadFile(out);
  INFO(text);
  CHECK(text.find("threads 1,3, insert writers 1 (ops/s)") != std::string::npos);
  CHECK(text.find("\nsearch_id x1 ") != std::string::npos);
  CHECK(text.find("\nsearch_key x3 ") != std::string::npos);
  CHECK(text.find("\nupdate ") != std::string::npos);
  CHECK(text.find("update x") == std::string::npos);
  Json j(json);
  REQUIRE(j.doc != nullptr);
  bson_iter_t it, sub;
  REQUIRE(j.Find("config.read_threads", &sub));
  REQUIRE(bson_iter_recurse(&sub, &it));
  std::vector<int> counts;
  while (bson_iter_next(&it)) counts.push_back(bson_iter_int32(&it));
  CHECK(counts == std::vector<int>{1, 3});
  REQUIRE(j.Find("config.threads", &sub));
  CHECK(bson_iter_int32(&sub) == 1);

  // One count: a row per phase, labelled as ever.
  const std::string one = dir.File("one.txt"), one_csv = dir.File("one.csv");
  REQUIRE(Run(test::BuildDir() +
              "/mmdoc-bench --engines lmdb --docs 1000 --threads 2"
              " --phases insert,search_id,update --dir " +
              dir.File("data") + " --csv " + one_csv + " > " + one + " 2>/dev/null") == 0);
  rows = CsvRows(one_csv);
  CHECK(rows.size() == 3);
  CHECK(rows.count("lmdb/search_id/2") == 1);
  // In none mode the inserts run on one writer, and say so.
  CHECK(rows.count("lmdb/insert/1") == 1);
  const std::string one_text = ReadFile(one);
  INFO(one_text);
  CHECK(one_text.find("threads 2, insert writers 1 (ops/s)") != std::string::npos);
  CHECK(one_text.find("\nsearch_id        ") != std::string::npos);  // 16 wide
  CHECK(one_text.find(" x2") == std::string::npos);

  // Not a count: refused before anything runs.
  const std::string bench = test::BuildDir() + "/mmdoc-bench --quiet --engines lmdb --docs 100 ";
  for (const char* bad : {"0", "1,x", "257", "2k", ",", "1,,2", "1,", ",1"}) {
    INFO(bad);
    CHECK(Run(bench + "--threads " + bad + " 2>/dev/null") == 2);
  }
}

TEST_CASE("mmdoc-bench runs the served engines at several thread counts", "[bench]") {
  if (!NewBackend("mmdoc-remote").ok()) return;  // built without libmongoc
  test::TempDir dir;
  const std::string csv = dir.File("remote.csv");
  REQUIRE(Run(test::BuildDir() +
              "/mmdoc-bench --engines mmdoc --clients remote --docs 500 --threads 1,4 "
              "--phases insert,search_id,search_key --quiet --dir " +
              dir.File("data") + " --csv " + csv) == 0);
  std::map<std::string, double> rows = CsvRows(csv);
  for (const char* engine : {"mmdoc-remote", "mmdoc-remote-w0"}) {
    for (const char* phase : {"search_id", "search_key"}) {
      for (const char* n : {"1", "4"}) {
        const std::string row = std::string(engine) + "/" + phase + "/" + n;
        INFO(row);
        CHECK(rows[row] == 50);
      }
    }
  }
}

TEST_CASE("mmdoc-layoutbench reads a loaded and a compacted store", "[bench]") {
  if (!NewBackend("mmdoc").ok()) return;  // built without the engine
  test::TempDir dir;
  const std::string out = dir.File("layout.txt");
  REQUIRE(Run(test::BuildDir() +
              "/mmdoc-layoutbench --docs 3000 --rounds 2 --lookups 500 --scans "
              "2 --dir " +
              dir.path() + " > " + out) == 0);
  const std::string text = ReadFile(out);
  INFO(text);
  // The compacted store is the smaller one, with fuller pages.
  double loaded_mib = 0, loaded_fill = 0, compact_s = 0, packed_mib = 0, packed_fill = 0;
  REQUIRE(std::sscanf(text.c_str(),
                      "3000 documents; as loaded: %lf MiB, fill %lf; compacted "
                      "(%lf s): %lf "
                      "MiB, fill %lf",
                      &loaded_mib, &loaded_fill, &compact_s, &packed_mib, &packed_fill) == 5);
  CHECK(packed_fill > loaded_fill);
  CHECK(packed_mib <= loaded_mib);
  CHECK(text.find("round 2: point reads") != std::string::npos);
  CHECK(text.find("median: point reads") != std::string::npos);
  // Both stores are removed.
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()),
                      std::filesystem::directory_iterator()) == 1);
  // A directory it cannot create: a one-line error and status 2.
  CHECK(Run(test::BuildDir() + "/mmdoc-layoutbench --docs 10 --dir " + out + "/sub 2>/dev/null") ==
        2);
}

TEST_CASE("mmdoc-syncbench writes a row per method, file and block size", "[bench]") {
  test::TempDir dir;
  std::string json = dir.File("sync.json");
  std::string cmd = test::BuildDir() +
                    "/mmdoc-syncbench --count 20 --seconds 0 --sizes 512,4096"
                    " --dir " +
                    dir.path() + " --json " + json + " >/dev/null";
  REQUIRE(Run(cmd) == 0);
  Json j(json);
  INFO(j.message);
  REQUIRE(j.doc != nullptr);
  std::set<std::string> seen;
  REQUIRE(j.ForEachResult([&](bson_iter_t* fields) {
    bson_iter_t& f = *fields;
    std::string method, file;
    int64_t size = 0;
    double ops = 0, rate = 0;
    while (bson_iter_next(&f)) {
      std::string k = bson_iter_key(&f);
      if (k == "method") method = bson_iter_utf8(&f, nullptr);
      if (k == "file") file = bson_iter_utf8(&f, nullptr);
      if (k == "block_size") size = bson_iter_as_int64(&f);
      if (k == "ops") ops = Number(&f);
      if (k == "ops_per_sec") rate = Number(&f);
    }
    CHECK(ops == 20);
    CHECK(rate > 0);
    seen.insert(method + "/" + file + "/" + std::to_string(size));
  }));
  // none (appending only) + 3 syncing methods x 2 files, x 2 sizes.
  CHECK(seen.size() == 14);
  CHECK(seen.count("fdatasync/preallocated/4096") == 1);
  CHECK(seen.count("msync/sparse/512") == 1);
}

// The build directory as an absolute path: the commands below run in
// another directory.
std::string AbsoluteBuildDir() { return std::filesystem::absolute(test::BuildDir()).string(); }

// A command meant to be refused, run in dir: its exit status, its stderr,
// and whether it wrote nothing on stdout and left nothing in dir.
struct Refusal {
  int status = -1;
  std::string err;
  bool quiet = false;
};

Refusal RunRefused(const test::TempDir& dir, const std::string& command) {
  Refusal r;
  const std::string out = dir.File("refused.out"), err = dir.File("refused.err");
  r.status = Run("cd " + dir.path() + " && " + command + " > " + out + " 2> " + err);
  r.err = ReadFile(err);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++entries;
  }
  r.quiet = ReadFile(out).empty() && entries == 2;
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// Bad input: one line on stderr naming it, exit status 2, before anything
// runs (README, "The command-line tool"): no output, no data directory.
void CheckRefused(const test::TempDir& dir, const std::string& command) {
  INFO(command);
  const Refusal r = RunRefused(dir, command);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.quiet);
}

TEST_CASE("mmdoc-bench refuses bad input with one line and status 2", "[bench]") {
  test::TempDir dir;
  const std::string bench = AbsoluteBuildDir() + "/mmdoc-bench --engines lmdb ";
  const std::string same = dir.File("same");
  for (const std::string& args : std::vector<std::string>{
           // Counts that do not fit (stoull threw; count x 1000 wrapped).
           "--docs 99999999999999999999", "--docs 18446744073709552k", "--docs 4294967296",
           "--docs 18446744073709551615M",
           // Empty items, and empty lists.
           "--docs 2k,", "--docs ,100", "--phases ,", "--phases insert,,search_id", "--engines ,",
           "--clients local,", "--phases ''", "--engines ''",
           // Empty paths: a run that would write nowhere, or in the current directory.
           "--json ''", "--csv ''", "--dir ''",
           // CLI11's own errors (its exit codes 104..114 and two lines).
           "--no-such-option", "--batch", "--batch x", "--batch 0", "--mmdoc-page-kib 5", "stray",
           // Negative, out of range, or 0 where 0 means nothing.
           "--seed -1", "--seed 18446744073709551616", "--seed 9223372036854775808", "--seed 0x10",
           "--scans -3", "--scans 0", "--max-durable-ops -1", "--sync-interval-ms 0",
           "--durability periodic --sync-interval-ms 0", "--lookups -1", "--mapping-docs -5",
           // A data directory the bench cannot make anything in.
           "--dir /proc", "--dir /proc/self/nonexistent",
           // Both outputs to one file.
           "--json " + same + " --csv " + same,
           "--json " + same + " --csv " + dir.path() + "/./same"}) {
    // (--docs once: a second one is an error of its own.)
    CheckRefused(dir, bench + args + (args.find("--docs") == 0 ? "" : " --docs 100"));
  }
  // --help is not an error.
  CHECK(Run(bench + "--help > /dev/null") == 0);
}

TEST_CASE("mmdoc-bench runs a document count given twice once", "[bench]") {
  test::TempDir dir;
  const std::string csv = dir.File("twice.csv");
  REQUIRE(Run(AbsoluteBuildDir() + "/mmdoc-bench --engines lmdb --docs 100,100 --phases insert" +
              " --quiet --dir " + dir.File("data") + " --csv " + csv + " 2>/dev/null") == 0);
  const std::string text = ReadFile(csv);
  INFO(text);
  CHECK(std::count(text.begin(), text.end(), '\n') == 2);  // the header and one insert row
}

TEST_CASE("mmdoc-bench keeps an engine that failed in its tables, JSON and CSV", "[bench]") {
  // Found by an outside test: an engine whose run failed (SQLite on a full
  // disk) left no row at all; only stderr said so.
  test::SmallDisk disk(6 << 20);
  MMDOC_NEED_DISK(disk);
  test::TempDir dir;
  const std::string json = dir.File("f.json"), csv = dir.File("f.csv"), out = dir.File("f.txt");
  const int rc = Run("cd " + disk.path() + " && " + AbsoluteBuildDir() +
                     "/mmdoc-bench --engines sqlite,mmdoc --docs 20k --phases insert,search_id"
                     " --json " +
                     json + " --csv " + csv + " > " + out + " 2>/dev/null");
  CHECK(rc == 1);
  const std::string text = ReadFile(json);
  // Each of sqlite's phases is there, n/a, saying why.
  CHECK(text.find(R"("engine" : "sqlite", "phase" : "insert")") != std::string::npos);
  CHECK(text.find(R"("engine" : "sqlite", "phase" : "search_id")") != std::string::npos);
  CHECK(text.find("n/a: the run failed") != std::string::npos);
  CHECK(ReadFile(csv).find("sqlite,search_id") != std::string::npos);
  CHECK(ReadFile(out).find("n/a") != std::string::npos);
}

TEST_CASE(
    "mmdoc-bench and mmdoc-syncbench write JSON through a link, keep its mode, and check "
    "the directory first",
    "[bench]") {
  // Found by an outside test: --json through a symbolic link replaced the
  // link, a 0600 file came back 0644, and an output whose directory the run
  // could not write in failed only after the whole run.
  test::TempDir dir;
  const std::string target = dir.File("run.json"), link = dir.File("latest.json");
  std::ofstream(target) << "old";
  REQUIRE(chmod(target.c_str(), 0600) == 0);
  REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
  REQUIRE(Run(AbsoluteBuildDir() +
              "/mmdoc-bench --engines lmdb --docs 100 --phases insert --quiet"
              " --dir " +
              dir.File("data") + " --json " + link) == 0);
  struct stat st;
  REQUIRE(lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  REQUIRE(stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(ReadFile(target).find("\"results\"") != std::string::npos);
  // A file in a directory no temporary file can be made in: refused first.
  CHECK(Run(AbsoluteBuildDir() + "/mmdoc-bench --engines lmdb --docs 100 --phases insert"
                                 " --quiet --csv /proc/version 2>/dev/null") == 2);
  CHECK(Run(AbsoluteBuildDir() + "/mmdoc-syncbench --json '' 2>/dev/null") == 2);
  CHECK(Run(AbsoluteBuildDir() + "/mmdoc-syncbench --dir '' 2>/dev/null") == 2);
}

TEST_CASE("mmdoc-bench and mmdoc-syncbench leave no libmongoc file in /dev/shm", "[bench]") {
  // libmongoc's counters file, made as the program loads, was left behind
  // by a run killed outright; a later process given its PID then printed a
  // second error line. The tools run with the file turned off.
  test::TempDir dir;
  auto ours = [&dir](const std::string& tool) {
    const std::string out = dir.File("pid");
    // The shell's PID is the tool's: exec.
    Run("sh -c 'echo $$ > " + out + "; exec " + AbsoluteBuildDir() + "/" + tool +
        " --help > /dev/null'");
    std::ifstream in(out);
    std::string pid;
    in >> pid;
    return "/dev/shm/mongoc-" + pid;
  };
  for (const char* tool : {"mmdoc-bench", "mmdoc-syncbench"}) {
    INFO(tool);
    CHECK_FALSE(std::filesystem::exists(ours(tool)));
  }
}

TEST_CASE("mmdoc-bench records the seed it used", "[bench]") {
  test::TempDir dir;
  const std::string json = dir.File("seed.json");
  // "010" is ten (CLI11 alone read it as octal 8); 2^63-1 is the largest.
  for (const auto& [arg, want] : std::vector<std::pair<std::string, int64_t>>{
           {"010", 10}, {"9223372036854775807", INT64_MAX}, {"0", 0}}) {
    INFO(arg);
    REQUIRE(Run(AbsoluteBuildDir() + "/mmdoc-bench --engines lmdb --docs 100 --phases search_id " +
                "--quiet --seed " + arg + " --dir " + dir.File("data") + " --json " + json) == 0);
    Json j(json);
    REQUIRE(j.doc != nullptr);
    bson_iter_t sub;
    REQUIRE(j.Find("config.seed", &sub));
    CHECK(bson_iter_as_int64(&sub) == want);
  }
}

TEST_CASE("mmdoc-bench reports the writers the inserts ran on", "[bench]") {
  test::TempDir dir;
  // Group commit takes 4 writers when --threads is 1; the other write
  // phases run on one; the tables' titles say so, as do the rows.
  const std::string csv = dir.File("group.csv"), out = dir.File("group.txt");
  REQUIRE(Run(AbsoluteBuildDir() +
              "/mmdoc-bench --engines rocksdb --docs 400 --durability group --batch 1 "
              "--threads 1 --phases insert,search_id,update --dir " +
              dir.File("data") + " --csv " + csv + " > " + out + " 2>/dev/null") == 0);
  std::map<std::string, double> rows = CsvRows(csv);
  CHECK(rows.count("rocksdb/insert/4") == 1);
  CHECK(rows.count("rocksdb/update/1") == 1);
  CHECK(rows.count("rocksdb/search_id/1") == 1);
  CHECK(rows.size() == 3);
  const std::string text = ReadFile(out);
  INFO(text);
  CHECK(text.find("durability group, batch 1, threads 1, insert writers 4 (ops/s)") !=
        std::string::npos);
  // A list in none mode: one writer, not the lowest count.
  REQUIRE(Run(AbsoluteBuildDir() +
              "/mmdoc-bench --engines lmdb --docs 400 --threads 2,4 "
              "--phases insert,search_id,update --quiet --dir " +
              dir.File("data") + " --csv " + csv) == 0);
  rows = CsvRows(csv);
  CHECK(rows.count("lmdb/insert/1") == 1);
  CHECK(rows.count("lmdb/update/1") == 1);
  CHECK(rows.count("lmdb/search_id/2") == 1);
  CHECK(rows.count("lmdb/search_id/4") == 1);
  CHECK(rows.count("lmdb/insert/2") == 0);
}

// Starts command (through sh, in dir, the signals at their defaults: a
// shell's background job would ignore SIGINT), waits until dir holds an
// entry whose name matches `started` (searched recursively), sends sig,
// and returns the status as a shell gives it (128+signo when the signal
// ended the process).
int InterruptWhen(const test::TempDir& dir, const std::string& command, const std::string& started,
                  int sig) {
  INFO(command);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);
    if (::chdir(dir.path().c_str()) != 0) ::_exit(127);
    const std::string line = "exec " + command + " > /dev/null 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  REQUIRE(pid > 0);
  const std::regex want(started);
  bool seen = false;
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 1200 && !seen && !exited; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir.path(), ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (std::regex_search(it->path().filename().string(), want)) seen = true;
    }
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
  }
  INFO(started);
  CHECK(seen);
  if (!exited) {
    ::kill(pid, sig);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  // libmongoc's counters file, which a later process of the same PID would
  // warn about on stderr before main (bench/signal_cleanup.cc).
  CHECK_FALSE(std::filesystem::exists("/dev/shm/mongoc-" + std::to_string(pid)));
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The names left in dir.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  return names;
}

TEST_CASE("mmdoc-bench and mmdoc-syncbench remove their files on a signal", "[bench]") {
  const std::string bench = AbsoluteBuildDir() +
                            "/mmdoc-bench --engines lmdb --docs 300k --phases insert,search_value "
                            "--quiet";
  // SIGPIPE and SIGQUIT: found by an outside test (`mmdoc-bench | head`
  // left the data directory behind).
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) {
    INFO(sig);
    {
      // Its own data directory, in the current one.
      test::TempDir dir;
      CHECK(InterruptWhen(dir, bench, "^lmdb-", sig) == 128 + sig);
      CHECK(Entries(dir.path()).empty());
    }
    {
      // --dir: the engine's directory in it.
      test::TempDir dir;
      CHECK(InterruptWhen(dir, bench + " --dir data", "^lmdb-", sig) == 128 + sig);
      CHECK(Entries(dir.File("data")).empty());
    }
  }
  // --keep keeps it.
  test::TempDir kept;
  CHECK(InterruptWhen(kept, bench + " --keep --dir data", "^lmdb-", SIGINT) == 128 + SIGINT);
  CHECK(Entries(kept.File("data")).size() == 1);
  // The sync benchmark's test file.
  test::TempDir sync;
  CHECK(InterruptWhen(sync,
                      AbsoluteBuildDir() +
                          "/mmdoc-syncbench --methods fsync --files appending --sizes 4096 "
                          "--seconds 60",
                      "^syncbench-[0-9]+\\.dat$", SIGINT) == 128 + SIGINT);
  CHECK(Entries(sync.path()).empty());
}

TEST_CASE("mmdoc-syncbench refuses bad input with one line and status 2", "[bench]") {
  test::TempDir dir;
  const std::string sync = AbsoluteBuildDir() + "/mmdoc-syncbench --count 5 ";
  ::close(::creat(dir.File("a.csv").c_str(), 0644));
  ::mkdir(dir.File("adir").c_str(), 0755);
  for (const char* args : {"--seconds nan",
                           "--seconds inf",
                           "--seconds -1",
                           "--seconds 1e9",
                           "--seconds x",
                           "--methods ''",
                           "--methods ,",
                           "--sizes ,",
                           "--files ,",
                           "--sizes 512,",
                           "--files preallocated --methods none",
                           "--methods foo",
                           "--methods none,foo",
                           "--files foo",
                           "--json adir",
                           "--json missing/x.json",
                           "--sizes -1",
                           "--sizes 999999999999",
                           "--sizes 0",
                           "--max-file-mib 0",
                           "--max-file-mib -1",
                           "--count -1",
                           "--dir /proc",
                           "--dir a.csv",
                           "--no-such-option",
                           "--count"}) {
    // The two files made above are all that may be in dir.
    INFO(args);
    const Refusal r = RunRefused(dir, sync + args);
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(Entries(dir.path()).size() == 2);
  }
  CHECK(Run(sync + "--help > /dev/null") == 0);
}

}  // namespace
}  // namespace mmdoc::bench
