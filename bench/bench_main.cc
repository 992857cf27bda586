// mmdoc-bench: the seed workload on mmdoc, LMDB, RocksDB and SQLite in one
// run. See workload.h for the phases and report.h for the output.
//
//   mmdoc-bench                                   # 500k docs, all engines,
//                                                 # every phase (112-135 s
//                                                 # here, 2 cores at load
//                                                 # 4.5; the seed 000 phases
//                                                 # alone 86 s; all of
//                                                 # tools/run-bench, built,
//                                                 # 98 s at load 4.6)
//   mmdoc-bench --docs 1M,2M,4M --json out.json   # the seed's sweep
//   mmdoc-bench --durability all --batch 1        # what each mode costs
//   mmdoc-bench --phases insert,insert_noindex,build_index
//                                                 # what the key index costs
//   mmdoc-bench --engines mmdoc --phases mapping  # typed layer vs raw API
//   mmdoc-bench --engines mmdoc,sqlite,postgres   # the relational server too
//   mmdoc-bench --engines mmdoc --clients local,remote
//                                                 # mmdoc in-process and through
//                                                 # `mmdoc serve` + libmongoc
//                                                 # (opt-in: its server is
//                                                 # started per store, and
//                                                 # 500k docs take ~55 s more)
//   mmdoc-bench --engines mmdoc,postgres --clients local,remote --threads 1,2,4,8
//                                                 # in-process, served (w:1, w:0),
//                                                 # PostgreSQL on its Unix socket
//                                                 # and on TCP; reads at 1..8
//                                                 # threads, a row per count
//
// Phases, in run order (--phases picks some; insert runs whenever a phase
// needs the loaded main store):
//   seed 000: insert, search_id, search_key, search_value, then
//     search_prefix (keys starting with 3 random hex digits) and
//     sort_limit (10 docs by key from a random GUID), update, push ($push
//     to a `tags` array), delete;
//   seed 002, on the same store: delete_value (S/2 deletes by the unindexed
//     value, a scan each, S = --scans), delete_all (all that is left, one
//     op, docs/s);
//   seed 002, on a fresh store: insert_noindex (the same inserts without
//     the key index; the tables show its ratio to insert) and build_index
//     (the unique key index built over them, one op, docs/s);
//   issue 25, on a fresh store: compound (--compound-docs documents {_id, g,
//     n, payload} with a compound index on (g, n), loaded untimed, then
//     queries {g, n: {$gte, $lt}} sorted by n, limit 10, whole documents);
//   seed 003: mapping (mmdoc's typed layer against its raw BSON API,
//     --mapping-docs inserts + reads through each, overhead in percent of
//     CPU time; n/a for the peers).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>

#include "bench/backend.h"
#include "bench/backends.h"
#include "bench/cli.h"
#include "bench/machine.h"
#include "bench/report.h"
#include "bench/signal_cleanup.h"
#include "bench/syncbench.h"
#include "bench/workload.h"

namespace mmdoc::bench {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "mmdoc-bench: the seed workload (GUID documents, unique index on key) on "
      "mmdoc and its "
      "peers, one run, one machine"};
  std::string engines_arg, docs_arg = "500k", durability_arg = "none", phases_arg;
  std::string dir_arg, json_path, csv_path;
  int batch = 1000, scans = 0;
  std::string threads_arg = "1";
  uint64_t seed = 1, max_durable_ops = 10000, mapping_docs = 50000, compound_docs = 100000;
  uint64_t lookups = 0;
  uint32_t sync_interval_ms = 100;
  uint64_t mmdoc_log_mib = 0;
  uint64_t mmdoc_buffer_mib = 64;
  uint32_t mmdoc_page_kib = 0;
  bool keep = false, quiet = false, flush_before_writes = false;
  std::string engine_help = "engines, comma-separated (default: the four of the seed test bed";
  engine_help +=
      "; postgres, a PostgreSQL server the bench starts and stops, is opt-in: it adds about a "
      "minute to a 500k run); known:";
  for (const auto& n : BackendNames()) engine_help += " " + n;
  app.add_option("--engines", engines_arg, engine_help);
  std::string clients_arg = "local";
  app.add_option("--clients", clients_arg,
                 "local (each engine in-process), remote (through a socket: mmdoc as "
                 "mmdoc-remote, `mmdoc serve` on loopback driven by libmongoc with w:1 writes, and "
                 "mmdoc-remote-w0, w:0 writes as the seed's driver; postgres as postgres-tcp, "
                 "libpq over TCP on 127.0.0.1 instead of its Unix socket; engines without a "
                 "server are left out), or local,remote")
      ->capture_default_str();
  app.add_option("--docs", docs_arg, "documents, or a list: 1M,2M,4M (k/M suffixes)")
      ->capture_default_str();
  app.add_option("--batch", batch, "documents per write transaction (1..1000000)")
      ->capture_default_str()
      ->transform(UintText())
      ->check(CLI::Range(1, 1000000));
  app.add_option("--durability", durability_arg, "none|periodic|msync|fsync|group|all")
      ->capture_default_str();
  app.add_option("--threads", threads_arg,
                 "threads for the read phases, and writer threads for durable inserts (group: 4 "
                 "when this is 1; none: 1; the tables and rows say how many); a list "
                 "(1,2,4,8) times each read phase once per count, a row each, and the write "
                 "phases once with the lowest")
      ->capture_default_str();
  // At most 2^63-1: the JSON records it as a (signed) 64-bit integer.
  app.add_option("--seed", seed,
                 "seed of the GUIDs (the same for every engine; 0..9223372036854775807)")
      ->capture_default_str()
      ->transform(UintText())
      ->check(CLI::Range(uint64_t{0}, uint64_t{INT64_MAX}));
  app.add_option("--scans", scans,
                 "search_value scans, 1..1000000 (default 20, fewer above 1M docs); "
                 "delete_value does half as many deletes, a scan each")
      ->transform(UintText())
      ->check(CLI::Range(1, 1000000));
  std::string phases_help =
      "phases to time, comma-separated (insert runs whenever a main-store "
      "phase needs the data; default all, or only insert with --durability "
      "all); known:";
  for (const auto& p : AllPhases()) phases_help += " " + p;
  app.add_option("--phases", phases_arg, phases_help);
  app.add_option("--lookups", lookups,
                 "point reads per search_id and search_key phase (default "
                 "N/10, the seed's; more make a short phase less noisy)")
      ->transform(UintText())
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--mapping-docs", mapping_docs,
                 "documents the mapping phase inserts and reads per round "
                 "(at most --docs)")
      ->capture_default_str()
      ->transform(UintText())
      ->check(CLI::Range(uint64_t{1}, uint64_t{100000000}));
  app.add_option("--compound-docs", compound_docs,
                 "documents the compound phase loads (untimed) into its own store (at most "
                 "--docs)")
      ->capture_default_str()
      ->transform(UintText())
      ->check(CLI::Range(uint64_t{10}, uint64_t{100000000}));
  app.add_option("--max-durable-ops", max_durable_ops,
                 "in a durable mode, time at most this many writes per phase (0 = all)")
      ->capture_default_str()
      ->transform(UintText());
  app.add_option("--sync-interval-ms", sync_interval_ms,
                 "flush interval of periodic mode (1..3600000)")
      ->capture_default_str()
      ->transform(UintText())
      ->check(CLI::Range(1u, 3600000u));
  app.add_option("--mmdoc-log-mib", mmdoc_log_mib,
                 "mmdoc's log size in MiB (Options::log_size; a checkpoint "
                 "runs each time it fills; default: the library's, 64)")
      ->transform(UintText())
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--mmdoc-buffer-mib", mmdoc_buffer_mib,
                 "mmdoc's write buffer in MiB (Options::write_buffer_size; mmdoc-pages has "
                 "none)")
      ->capture_default_str()
      ->transform(UintText())
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--mmdoc-page-kib", mmdoc_page_kib,
                 "mmdoc's page size in KiB (Options::page_size: 4, 8, 16, "
                 "32 or 64; default: the library's, 4)")
      ->transform(UintText())
      ->check(CLI::IsMember({4u, 8u, 16u, 32u, 64u}));
  app.add_option("--dir", dir_arg,
                 "data directory (default: a temporary one in the current directory)");
  app.add_option("--json", json_path, "write results as JSON");
  app.add_option("--csv", csv_path, "write results as CSV");
  app.add_flag("--flush-before-writes", flush_before_writes,
               "before each write phase, untimed, write every dirty page back (sync), so "
               "written/op counts all the pages a phase dirties (in none mode an earlier "
               "phase's dirty pages are otherwise not counted again)");
  app.add_flag("--keep", keep, "keep the data files");
  app.add_flag("--quiet", quiet, "no tables on stdout");
  if (int rc = ParseCommandLine("mmdoc-bench", app, argc, argv); rc >= 0) return rc;
  // A list given with an empty item ("2k,", "1,,2", ",") is refused, as is
  // an empty list: none of them is a default.
  auto list = [](const char* flag, const std::string& arg, std::vector<std::string>* out) {
    if (SplitList(arg, out)) return true;
    std::fprintf(stderr, "mmdoc-bench: %s '%s' has an empty item\n", flag, arg.c_str());
    return false;
  };
  if (int rc = RefuseEmptyPaths("mmdoc-bench", app, {"--json", "--csv", "--dir"}); rc >= 0)
    return rc;
  if (!json_path.empty() && json_path == csv_path) {
    std::fprintf(stderr, "mmdoc-bench: --json and --csv name the same file %s\n",
                 json_path.c_str());
    return 2;
  }
  if (!json_path.empty() && !csv_path.empty()) {
    if (SameFile(json_path, csv_path)) {
      std::fprintf(stderr, "mmdoc-bench: --json %s and --csv %s are the same file\n",
                   json_path.c_str(), csv_path.c_str());
      return 2;
    }
  }
  if ((!json_path.empty() && !CheckWritable("mmdoc-bench", "--json", json_path)) ||
      (!csv_path.empty() && !CheckWritable("mmdoc-bench", "--csv", csv_path)))
    return 2;

  RunInfo run;
  for (int i = 0; i < argc; ++i) run.command += (i ? " " : "") + std::string(argv[i]);
  if (app.count("--engines") == 0) {
    run.engines = DefaultBackendNames();
  } else if (!list("--engines", engines_arg, &run.engines)) {
    return 2;
  }
  {
    bool local = false, remote = false;
    std::vector<std::string> clients;
    if (!list("--clients", clients_arg, &clients)) return 2;
    for (const auto& c : clients) {
      if (c == "local") {
        local = true;
      } else if (c == "remote") {
        remote = true;
      } else {
        std::fprintf(stderr, "mmdoc-bench: bad --clients '%s' (local, remote)\n", c.c_str());
        return 2;
      }
    }
    std::vector<std::string> engines;
    auto add = [&engines](const std::string& e) {
      if (std::find(engines.begin(), engines.end(), e) == engines.end()) engines.push_back(e);
    };
    for (const auto& e : run.engines) {
      bool served = e == "postgres-tcp" || e.rfind("mmdoc-remote", 0) == 0;
      if (local || (remote && served)) add(e);
      if (remote && e == "mmdoc") {
        add("mmdoc-remote");
        add("mmdoc-remote-w0");
      }
      // postgres's own socket is a Unix one: remote is TCP loopback, as
      // mmdoc-remote's.
      if (remote && e == "postgres") add("postgres-tcp");
    }
    if (engines.empty()) {
      std::fprintf(stderr,
                   "mmdoc-bench: no engine left for --clients %s (remote: mmdoc, postgres)\n",
                   clients_arg.c_str());
      return 2;
    }
    run.engines = engines;
  }
  for (const auto& e : run.engines) {
    auto b = NewBackend(e);
    if (!b.ok()) {
      std::fprintf(stderr, "mmdoc-bench: %s\n", b.status().ToString().c_str());
      return 2;
    }
  }
  std::vector<std::string> items;
  if (!list("--docs", docs_arg, &items)) return 2;
  for (const auto& d : items) {
    // The documents are numbered in 32 bits (the key order's oracle).
    uint64_t n = 0;
    if (!ParseCount(d, &n) || n < 10 || n > UINT32_MAX) {
      std::fprintf(stderr, "mmdoc-bench: bad --docs value '%s' (need a count from 10 to %u)\n",
                   d.c_str(), UINT32_MAX);
      return 2;
    }
    // A count given twice would run twice and print two identical columns.
    if (std::find(run.docs.begin(), run.docs.end(), n) == run.docs.end()) run.docs.push_back(n);
  }
  // Ascending and distinct: the lowest count is the writers' (and the only
  // one, as before lists, when one is given).
  if (!list("--threads", threads_arg, &items)) return 2;
  for (const auto& t : items) {
    const bool digits = t.size() <= 3 && t.find_first_not_of("0123456789") == std::string::npos;
    const int n = digits ? std::stoi(t) : 0;
    if (n < 1 || n > 256) {
      std::fprintf(stderr, "mmdoc-bench: bad --threads value '%s' (1..256)\n", t.c_str());
      return 2;
    }
    run.thread_list.push_back(n);
  }
  std::sort(run.thread_list.begin(), run.thread_list.end());
  run.thread_list.erase(std::unique(run.thread_list.begin(), run.thread_list.end()),
                        run.thread_list.end());
  const int threads = run.thread_list[0];
  if (durability_arg == "all") {
    run.durabilities = {"none", "periodic", "msync", "fsync", "group"};
  } else if (ParseDurability(durability_arg)) {
    run.durabilities = {durability_arg};
  } else {
    std::fprintf(stderr, "mmdoc-bench: bad --durability '%s'\n", durability_arg.c_str());
    return 2;
  }
  if (app.count("--phases") == 0) {
    run.phases = durability_arg == "all" ? std::vector<std::string>{"insert"} : DefaultPhases();
  } else {
    std::vector<std::string> wanted;
    if (!list("--phases", phases_arg, &wanted)) return 2;
    for (const auto& p : wanted) {
      if (std::find(AllPhases().begin(), AllPhases().end(), p) == AllPhases().end()) {
        std::fprintf(stderr, "mmdoc-bench: unknown phase '%s'\n", p.c_str());
        return 2;
      }
    }
    // Canonical order.
    for (const auto& p : AllPhases()) {
      if (std::find(wanted.begin(), wanted.end(), p) != wanted.end()) run.phases.push_back(p);
    }
  }
  run.batch = batch;
  run.threads = threads;
  run.seed = seed;
  run.scans = scans > 0 ? scans : 20;
  run.mapping_docs = mapping_docs;
  run.compound_docs = compound_docs;
  run.lookups = lookups;
  run.flush_before_writes = flush_before_writes;
  run.rocksdb_build = RocksDbBuild();

  // The data directory: made (or, with --dir, a directory made in it and
  // removed again) before anything is printed, so one the bench cannot
  // write is bad input, not a failed run. Its own is removed on Ctrl-C too
  // (bench/signal_cleanup.h).
  bool own_dir = dir_arg.empty();
  std::string parent;
  int cleanup_slot = -1;
  if (own_dir) {
    parent = MakeTempDir("./mmdoc-bench-", !keep, &cleanup_slot);
    if (parent.empty()) {
      std::fprintf(stderr,
                   "mmdoc-bench: cannot create a data directory here (%s); "
                   "give one with --dir\n",
                   std::strerror(errno));
      return 2;
    }
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir_arg, ec);
    if (ec) {
      std::fprintf(stderr, "mmdoc-bench: cannot create --dir %s: %s\n", dir_arg.c_str(),
                   ec.message().c_str());
      return 2;
    }
    std::string probe = dir_arg + "/mmdoc-bench-check-XXXXXX";
    if (::mkdtemp(probe.data()) == nullptr) {
      std::fprintf(stderr, "mmdoc-bench: cannot create a directory in --dir %s: %s\n",
                   dir_arg.c_str(), std::strerror(errno));
      return 2;
    }
    ::rmdir(probe.c_str());
    parent = dir_arg;
  }

  MachineInfo machine = DescribeMachine(parent);
  machine.mem_read_gb_per_sec = MeasureMemoryReadBandwidth();
  run.mem_read_gb_per_sec = machine.mem_read_gb_per_sec;
  if (!quiet) {
    std::printf("machine: %s, %d cores, %.1f GiB, %s\n", machine.cpu.c_str(), machine.cores,
                static_cast<double>(machine.memory_bytes) / (1ull << 30), machine.kernel.c_str());
    std::printf("data dir: %s on %s (%s, %s), memory read %.1f GB/s (one core)\n", parent.c_str(),
                machine.mount_point.c_str(), machine.filesystem.c_str(),
                machine.mount_options.c_str(), machine.mem_read_gb_per_sec);
    std::printf("%s\n", run.rocksdb_build.c_str());
    std::fflush(stdout);
  }

  // A durable commit at batch 1 is one log append and one sync: the
  // device's own rate for that, measured beside the engines, is what they
  // are held against.
  const bool durable_batch1 =
      batch == 1 && std::any_of(run.durabilities.begin(), run.durabilities.end(),
                                [](const std::string& m) { return m == "fsync" || m == "group"; });
  auto measure_device = [&] {
    SyncCase c;
    c.method = "fdatasync";
    c.preallocated = true;
    c.block_size = 512;
    SyncLimits limits;
    limits.seconds = 2;
    auto r = RunSyncCase(parent, c, limits);
    if (r.ok()) {
      machine.device_syncs_per_sec = std::max(machine.device_syncs_per_sec, r.value().ops_per_sec);
    } else {
      std::fprintf(stderr, "mmdoc-bench: the device's sync rate: %s\n",
                   r.status().ToString().c_str());
    }
  };
  if (durable_batch1) measure_device();

  bool progress = isatty(STDERR_FILENO) != 0;
  std::vector<PhaseResult> results;
  int failures = 0;
  for (uint64_t n : run.docs) {
    Dataset data = Dataset::Generate(n, seed);
    run.dataset_bytes = std::max(run.dataset_bytes, data.bson_bytes());
    for (const auto& mode : run.durabilities) {
      for (const auto& engine : run.engines) {
        WorkloadConfig config;
        config.durability = *ParseDurability(mode);
        config.batch = batch;
        config.threads = threads;
        if (run.thread_list.size() > 1) config.read_threads = run.thread_list;
        config.phases = run.phases;
        config.scans =
            scans > 0 ? scans : static_cast<int>(std::clamp<uint64_t>(20000000 / n, 5, 20));
        config.max_durable_ops = max_durable_ops;
        config.mapping_docs = mapping_docs;
        config.compound_docs = compound_docs;
        config.lookups = lookups;
        config.sync_interval_ms = sync_interval_ms;
        config.mmdoc_log_bytes = mmdoc_log_mib << 20;
        config.mmdoc_page_size = mmdoc_page_kib << 10;
        config.mmdoc_buffer_bytes = mmdoc_buffer_mib << 20;
        config.dir = parent;
        config.keep_data = keep;
        config.flush_before_writes = flush_before_writes;
        config.progress = progress;
        config.phase_lines = !quiet;  // under the bars on a terminal
        Status failed;
        auto r = RunWorkload(engine, data, config, &failed);
        if (!r.ok() || !failed.ok()) {
          std::fprintf(stderr, "mmdoc-bench: %s\n",
                       (r.ok() ? failed : r.status()).ToString().c_str());
          ++failures;
        }
        if (!r.ok()) continue;
        for (auto& row : r.value()) results.push_back(std::move(row));
      }
    }
  }
  if (durable_batch1) measure_device();
  if (own_dir && !keep) {
    std::error_code ec;
    std::filesystem::remove_all(parent, ec);
    ForgetOnSignal(cleanup_slot);
  }

  if (!quiet) PrintTables(stdout, run, results);
  if (!quiet && machine.device_syncs_per_sec > 0) {
    std::printf(
        "\nthe device: %.0f fdatasyncs/s, the best of two 2 s loops of 512-byte appends to "
        "a preallocated file (mmdoc-syncbench), before and after the engines\n",
        machine.device_syncs_per_sec);
    for (const PhaseResult& r : results) {
      if (r.phase != "insert" || !r.available || r.batch != 1) continue;
      if (r.durability != "fsync" && r.durability != "group") continue;
      // Several writers can share a sync (group commit): above 100% then.
      std::printf("  %-10s %-6s insert %8.0f commits/s = %5.1f%% of it (%d writer%s)\n",
                  r.engine.c_str(), r.durability.c_str(), r.ops_per_sec,
                  100.0 * r.ops_per_sec / machine.device_syncs_per_sec, r.threads,
                  r.threads == 1 ? "" : "s");
    }
  }
  auto write = [](const std::string& path, const std::string& text) {
    const std::string error = WriteWhole(path, text);
    if (!error.empty()) {
      std::fprintf(stderr, "mmdoc-bench: cannot write %s: %s\n", path.c_str(), error.c_str());
    }
    return error.empty();
  };
  if (!json_path.empty() && !write(json_path, ResultsToJson(machine, run, results))) return 1;
  if (!csv_path.empty() && !write(csv_path, ResultsToCsv(results))) return 1;
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mmdoc::bench

int main(int argc, char** argv) {
  mmdoc::bench::InstallSignalCleanup(argv);
  try {
    return mmdoc::bench::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    // A --docs too large for this machine's memory: a line, not an abort.
    mmdoc::bench::CleanUpNow();  // Main's own cleanup was unwound past
    std::fprintf(stderr, "mmdoc-bench: out of memory (a smaller --docs?)\n");
    return 1;
  }
}
