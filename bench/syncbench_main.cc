// mmdoc-syncbench: what one durable append costs (seed 004). Appends blocks
// of 512, 674, 1024, 4096 and 65536 bytes to a file, making each durable
// with fdatasync, fsync, msync(MS_SYNC) or nothing, in a growing file and in
// a preallocated one. See syncbench.h.
//
//   mmdoc-syncbench --seconds 2 --json sync.json
//   mmdoc-syncbench --methods fdatasync --sizes 674 --count 10000
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/machine.h"
#include "bench/syncbench.h"

namespace mmdoc::bench {
namespace {

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

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
  app.add_option("--sizes", sizes_arg, "block sizes in bytes")->capture_default_str();
  app.add_option("--files", files_arg,
                 "appending (growing; sparse for msync) and/or preallocated "
                 "(zero-filled "
                 "first; for the syncing methods)")
      ->capture_default_str();
  app.add_option("--seconds", limits.seconds, "time per case (0 = bound by --count)")
      ->capture_default_str();
  app.add_option("--count", limits.count, "blocks per case (0 = bound by --seconds)")
      ->capture_default_str();
  app.add_option("--max-file-mib", max_mib, "largest file a case writes")->capture_default_str();
  app.add_option("--dir", dir_arg, "directory for the test file (default: current)");
  app.add_option("--json", json_path, "write results as JSON");
  CLI11_PARSE(app, argc, argv);
  limits.max_file_bytes = max_mib << 20;
  if (limits.seconds <= 0 && limits.count == 0) {
    std::fprintf(stderr, "mmdoc-syncbench: need --seconds or --count\n");
    return 2;
  }
  std::string dir = dir_arg.empty() ? "." : dir_arg;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);

  std::vector<SyncCase> cases;
  auto files = SplitList(files_arg);
  for (const auto& method : SplitList(methods_arg)) {
    for (const auto& file : files) {
      if (file != "appending" && file != "preallocated") {
        std::fprintf(stderr, "mmdoc-syncbench: unknown file kind '%s'\n", file.c_str());
        return 2;
      }
      bool pre = file == "preallocated";
      if (pre && method == "none") continue;  // nothing to compare
      for (const auto& size : SplitList(sizes_arg)) {
        char* end = nullptr;
        unsigned long long n = std::strtoull(size.c_str(), &end, 10);
        if (end == size.c_str() || *end != '\0' || n == 0) {
          std::fprintf(stderr, "mmdoc-syncbench: bad block size '%s'\n", size.c_str());
          return 2;
        }
        cases.push_back(SyncCase{method, pre, static_cast<size_t>(n)});
      }
    }
  }

  MachineInfo machine = DescribeMachine(dir);
  std::printf("machine: %s, %d cores, %s; file system %s on %s (%s)\n", machine.cpu.c_str(),
              machine.cores, machine.kernel.c_str(), machine.filesystem.c_str(),
              machine.mount_point.c_str(), machine.mount_options.c_str());
  std::vector<SyncResult> results;
  for (const auto& c : cases) {
    auto r = RunSyncCase(dir, c, limits);
    if (!r.ok()) {
      std::fprintf(stderr, "mmdoc-syncbench: %s %zu: %s\n", c.method.c_str(), c.block_size,
                   r.status().ToString().c_str());
      return 1;
    }
    results.push_back(r.value());
  }
  PrintSyncTables(stdout, results);
  if (!json_path.empty()) {
    std::ofstream f(json_path, std::ios::trunc);
    f << SyncResultsToJson(machine, limits, results);
    if (!f) {
      std::fprintf(stderr, "mmdoc-syncbench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace mmdoc::bench

int main(int argc, char** argv) { return mmdoc::bench::Main(argc, argv); }
