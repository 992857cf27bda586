// mmdoc-syncbench: what one durable append costs (seed 004). Appends blocks
// of 512, 674, 1024, 4096 and 65536 bytes to a file, making each durable
// with fdatasync, fsync, msync(MS_SYNC) or nothing, in a growing file and in
// a preallocated one. See syncbench.h.
//
//   mmdoc-syncbench --seconds 2 --json sync.json
//   mmdoc-syncbench --methods fdatasync --sizes 674 --count 10000
#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "bench/cli.h"
#include "bench/machine.h"
#include "bench/signal_cleanup.h"
#include "bench/syncbench.h"

namespace mmdoc::bench {
namespace {

int Main(int argc, char** argv) {
  CLI::App app{
      "mmdoc-syncbench: blocks/s, MB/s and latency of a durable append (seed "
      "004)"};
  std::string methods_arg = "none,msync,fsync,fdatasync";
  std::string sizes_arg = "512,674,1024,4096,65536";
  std::string files_arg = "appending,preallocated";
  std::string dir_arg, json_path;
  SyncLimits limits;
  uint64_t max_mib = limits.max_file_bytes >> 20;
  app.add_option("--methods", methods_arg, "none,msync,fsync,fdatasync")->capture_default_str();
  app.add_option("--sizes", sizes_arg, "block sizes in bytes (1 to --max-file-mib)")
      ->capture_default_str();
  app.add_option("--files", files_arg,
                 "appending (growing; sparse for msync) and/or preallocated "
                 "(zero-filled "
                 "first; for the syncing methods)")
      ->capture_default_str();
  app.add_option("--seconds", limits.seconds, "time per case, 0..86400 (0 = bound by --count)")
      ->capture_default_str();
  app.add_option("--count", limits.count, "blocks per case (0 = bound by --seconds)")
      ->capture_default_str()
      ->transform(UintText());
  app.add_option("--max-file-mib", max_mib, "largest file a case writes (1..1048576)")
      ->capture_default_str()
      ->transform(UintText())
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--dir", dir_arg, "directory for the test file (default: current)");
  app.add_option("--json", json_path, "write results as JSON");
  if (int rc = ParseCommandLine("mmdoc-syncbench", app, argc, argv); rc >= 0) return rc;
  if (int rc = RefuseEmptyPaths("mmdoc-syncbench", app, {"--json", "--dir"}); rc >= 0) return rc;
  limits.max_file_bytes = max_mib << 20;
  // Every option checked before the first case: one line naming it, 2.
  // (NaN passes every comparison, so this one is written to fail it.)
  if (!(limits.seconds >= 0 && limits.seconds <= 86400)) {
    std::fprintf(stderr, "mmdoc-syncbench: bad --seconds %g (0..86400)\n", limits.seconds);
    return 2;
  }
  if (limits.seconds == 0 && limits.count == 0) {
    std::fprintf(stderr, "mmdoc-syncbench: need --seconds or --count\n");
    return 2;
  }
  auto list = [](const char* flag, const std::string& arg, std::vector<std::string>* out) {
    if (SplitList(arg, out)) return true;
    std::fprintf(stderr, "mmdoc-syncbench: %s '%s' has an empty item\n", flag, arg.c_str());
    return false;
  };
  std::vector<std::string> methods, files, sizes;
  if (!list("--methods", methods_arg, &methods) || !list("--files", files_arg, &files) ||
      !list("--sizes", sizes_arg, &sizes))
    return 2;
  for (const auto& method : methods) {
    if (method != "none" && method != "msync" && method != "fsync" && method != "fdatasync") {
      std::fprintf(stderr,
                   "mmdoc-syncbench: unknown --methods '%s' (none, msync, fsync, fdatasync)\n",
                   method.c_str());
      return 2;
    }
  }
  for (const auto& file : files) {
    if (file != "appending" && file != "preallocated") {
      std::fprintf(stderr, "mmdoc-syncbench: unknown --files '%s' (appending, preallocated)\n",
                   file.c_str());
      return 2;
    }
  }
  std::vector<size_t> block_sizes;
  for (const auto& size : sizes) {
    uint64_t n = 0;
    if (!ParseUint(size, &n) || n == 0 || n > limits.max_file_bytes) {
      std::fprintf(stderr,
                   "mmdoc-syncbench: bad --sizes value '%s' (1 to %llu bytes, --max-file-mib)\n",
                   size.c_str(), static_cast<unsigned long long>(limits.max_file_bytes));
      return 2;
    }
    block_sizes.push_back(static_cast<size_t>(n));
  }
  std::vector<SyncCase> cases;
  for (const auto& method : methods) {
    for (const auto& file : files) {
      bool pre = file == "preallocated";
      if (pre && method == "none") continue;  // nothing to compare
      for (size_t n : block_sizes) cases.push_back(SyncCase{method, pre, n});
    }
  }
  if (cases.empty()) {
    std::fprintf(stderr,
                 "mmdoc-syncbench: no case to run (--files preallocated is for the syncing "
                 "--methods, not none)\n");
    return 2;
  }
  if (!json_path.empty() && !CheckWritable("mmdoc-syncbench", "--json", json_path)) return 2;
  // The directory, and a file made in it and removed again: one the bench
  // cannot write in is bad input, found before the first case.
  std::string dir = dir_arg.empty() ? "." : dir_arg;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string probe = dir + "/syncbench-check-XXXXXX";
  const int probe_fd = ec ? -1 : ::mkstemp(probe.data());
  if (probe_fd < 0) {
    std::fprintf(stderr, "mmdoc-syncbench: cannot create a file in --dir %s: %s\n", dir.c_str(),
                 ec ? ec.message().c_str() : std::strerror(errno));
    return 2;
  }
  ::close(probe_fd);
  ::unlink(probe.c_str());

  MachineInfo machine = DescribeMachine(dir);
  std::printf("machine: %s, %d cores, %s; file system %s on %s (%s)\n", machine.cpu.c_str(),
              machine.cores, machine.kernel.c_str(), machine.filesystem.c_str(),
              machine.mount_point.c_str(), machine.mount_options.c_str());
  std::vector<SyncResult> results;
  int failures = 0;  // a failed case is said and skipped: the others' rows stay
  // Progress on a terminal: the cases take a second or more each.
  const bool progress = ::isatty(STDERR_FILENO) != 0;
  for (size_t i = 0; i < cases.size(); i++) {
    const SyncCase& c = cases[i];
    if (progress) {
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s, %zu-byte blocks, %s file", i + 1, cases.size(),
                   c.method.c_str(), c.block_size, c.preallocated ? "preallocated" : "appending");
    }
    auto r = RunSyncCase(dir, c, limits);
    if (progress) std::fprintf(stderr, "\r\033[K");
    if (!r.ok()) {
      std::fprintf(stderr, "mmdoc-syncbench: %s %zu: %s\n", c.method.c_str(), c.block_size,
                   r.status().ToString().c_str());
      ++failures;
      continue;
    }
    results.push_back(r.value());
  }
  PrintSyncTables(stdout, results);
  if (!json_path.empty()) {
    const std::string error = WriteWhole(json_path, SyncResultsToJson(machine, limits, results));
    if (!error.empty()) {
      std::fprintf(stderr, "mmdoc-syncbench: cannot write %s: %s\n", json_path.c_str(),
                   error.c_str());
      return 1;
    }
  }
  return failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace mmdoc::bench

int main(int argc, char** argv) {
  mmdoc::bench::InstallSignalCleanup(argv);
  return mmdoc::bench::Main(argc, argv);
}
