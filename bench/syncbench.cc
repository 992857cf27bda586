#include "bench/syncbench.h"

#include <bson/bson.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "bench/signal_cleanup.h"
#include "bench/workload.h"
#include "storage/file_system.h"

namespace mmdoc::bench {
namespace {

using storage::File;
using storage::FileSystem;

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Zero-fills [0, size) with pwrite and syncs, so later writes find blocks
// allocated and initialized. A page per write, as mmdoc's log does: the
// page cache sizes a folio by the write that makes it, and a store through
// the map into a large folio gets the whole folio written back at msync.
Status Prefill(File* f, uint64_t size) {
  MMDOC_RETURN_IF_ERROR(f->Allocate(0, size));
  std::string zeros(4096, '\0');
  for (uint64_t off = 0; off < size; off += zeros.size()) {
    MMDOC_RETURN_IF_ERROR(
        f->WriteAt(off, zeros.data(), std::min<uint64_t>(zeros.size(), size - off)));
  }
  return f->SyncAll();
}

std::string FileLabel(const SyncCase& c) {
  if (c.preallocated) return "preallocated";
  return c.method == "msync" ? "sparse" : "appending";
}

}  // namespace

Result<SyncResult> RunSyncCase(const std::string& dir, const SyncCase& c,
                               const SyncLimits& limits) {
  if (c.method != "fdatasync" && c.method != "fsync" && c.method != "msync" && c.method != "none") {
    return Status::InvalidArgument("unknown sync method", c.method);
  }
  if (c.block_size == 0 || c.block_size > limits.max_file_bytes) {
    return Status::InvalidArgument("bad block size");
  }
  FileSystem* fs = FileSystem::Default();
  std::string path = dir + "/syncbench-" + std::to_string(::getpid()) + ".dat";
  if (fs->Exists(path)) MMDOC_RETURN_IF_ERROR(fs->Remove(path));
  // Up to --max-file-mib (128 MiB) of it: gone on Ctrl-C too, registered
  // before it exists.
  const int cleanup_slot = RemoveOnSignal(path);
  auto opened = fs->Open(path, OpenMode::kCreate);
  if (!opened.ok()) {
    ForgetOnSignal(cleanup_slot);
    return opened.status();
  }
  std::unique_ptr<File> file = std::move(opened.value());

  uint64_t max_ops = limits.max_file_bytes / c.block_size;
  if (limits.count > 0) max_ops = std::min(max_ops, limits.count);
  uint64_t file_bytes = max_ops * c.block_size;

  Status s;
  if (c.preallocated) s = Prefill(file.get(), file_bytes);
  uint8_t* map = nullptr;
  if (s.ok() && c.method == "msync") {
    // The seed's setup: a file of the full size (sparse unless
    // preallocated), written block by block through the map.
    if (!c.preallocated) s = file->Truncate(file_bytes);
    if (s.ok()) {
      auto m = file->Map(file_bytes, MapMode::kReadWrite);
      if (m.ok()) {
        map = m.value();
      } else {
        s = m.status();
      }
    }
  }

  std::string block(c.block_size, '\0');
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<char>('a' + i % 26);
  Histogram hist;
  uint64_t ops = 0;
  uint64_t start = NowNs();
  uint64_t deadline =
      limits.seconds > 0 ? start + static_cast<uint64_t>(limits.seconds * 1e9) : UINT64_MAX;
  uint64_t prev = start;
  while (s.ok() && ops < max_ops && prev < deadline) {
    uint64_t off = ops * c.block_size;
    if (map != nullptr) {
      std::memcpy(map + off, block.data(), block.size());
      s = file->MapSync(map, off, block.size());
    } else {
      s = file->WriteAt(off, block.data(), block.size());
      if (s.ok() && c.method == "fdatasync") s = file->Sync();
      if (s.ok() && c.method == "fsync") s = file->SyncAll();
    }
    uint64_t now = NowNs();
    hist.Add(now - prev);
    prev = now;
    ++ops;
  }
  double seconds = static_cast<double>(prev - start) / 1e9;
  if (map != nullptr) {
    Status u = file->Unmap(map, file_bytes);
    if (s.ok()) s = u;
  }
  file.reset();
  Status r = fs->Remove(path);
  ForgetOnSignal(cleanup_slot);
  if (s.ok()) s = r;
  if (!s.ok()) return s;

  SyncResult res;
  res.c = c;
  res.ops = ops;
  res.seconds = seconds;
  res.ops_per_sec = seconds > 0 ? static_cast<double>(ops) / seconds : 0;
  res.mb_per_sec = res.ops_per_sec * static_cast<double>(c.block_size) / 1e6;
  res.p50_us = hist.QuantileUs(0.5);
  res.p99_us = hist.QuantileUs(0.99);
  return res;
}

std::string SyncResultsToJson(const MachineInfo& m, const SyncLimits& limits,
                              const std::vector<SyncResult>& results) {
  bson_t root, machine, config, arr;
  bson_init(&root);
  bson_append_document_begin(&root, "machine", -1, &machine);
  bson_append_utf8(&machine, "cpu", -1, m.cpu.c_str(), -1);
  bson_append_int32(&machine, "cores", -1, m.cores);
  bson_append_int64(&machine, "memory_bytes", -1, static_cast<int64_t>(m.memory_bytes));
  bson_append_utf8(&machine, "kernel", -1, m.kernel.c_str(), -1);
  bson_append_utf8(&machine, "filesystem", -1, m.filesystem.c_str(), -1);
  bson_append_utf8(&machine, "mount_point", -1, m.mount_point.c_str(), -1);
  bson_append_utf8(&machine, "mount_device", -1, m.mount_device.c_str(), -1);
  bson_append_utf8(&machine, "mount_options", -1, m.mount_options.c_str(), -1);
  bson_append_document_end(&root, &machine);
  bson_append_document_begin(&root, "config", -1, &config);
  bson_append_utf8(&config, "benchmark", -1, "syncbench", -1);
  bson_append_double(&config, "seconds", -1, limits.seconds);
  bson_append_int64(&config, "count", -1, static_cast<int64_t>(limits.count));
  bson_append_int64(&config, "max_file_bytes", -1, static_cast<int64_t>(limits.max_file_bytes));
  bson_append_document_end(&root, &config);
  bson_append_array_begin(&root, "results", -1, &arr);
  for (size_t i = 0; i < results.size(); ++i) {
    const SyncResult& r = results[i];
    bson_t row;
    bson_append_document_begin(&arr, std::to_string(i).c_str(), -1, &row);
    bson_append_utf8(&row, "method", -1, r.c.method.c_str(), -1);
    std::string file = FileLabel(r.c);
    bson_append_utf8(&row, "file", -1, file.c_str(), -1);
    bson_append_int64(&row, "block_size", -1, static_cast<int64_t>(r.c.block_size));
    bson_append_int64(&row, "ops", -1, static_cast<int64_t>(r.ops));
    bson_append_double(&row, "seconds", -1, r.seconds);
    bson_append_double(&row, "ops_per_sec", -1, r.ops_per_sec);
    bson_append_double(&row, "mb_per_sec", -1, r.mb_per_sec);
    bson_append_double(&row, "p50_us", -1, r.p50_us);
    bson_append_double(&row, "p99_us", -1, r.p99_us);
    bson_append_document_end(&arr, &row);
  }
  bson_append_array_end(&root, &arr);
  size_t len = 0;
  char* json = bson_as_relaxed_extended_json(&root, &len);
  std::string out(json, len);
  bson_free(json);
  bson_destroy(&root);
  return out + "\n";
}

void PrintSyncTables(std::FILE* out, const std::vector<SyncResult>& results) {
  std::vector<size_t> sizes;
  std::vector<std::pair<std::string, bool>> rows;
  for (const auto& r : results) {
    if (std::find(sizes.begin(), sizes.end(), r.c.block_size) == sizes.end()) {
      sizes.push_back(r.c.block_size);
    }
    auto row = std::make_pair(r.c.method, r.c.preallocated);
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
  }
  auto find = [&](const std::pair<std::string, bool>& row, size_t size) -> const SyncResult* {
    for (const auto& r : results) {
      if (r.c.method == row.first && r.c.preallocated == row.second && r.c.block_size == size) {
        return &r;
      }
    }
    return nullptr;
  };
  const char* titles[] = {"docs/s (blocks/s)", "MB/s", "p50 / p99 latency (us)"};
  for (int t = 0; t < 3; ++t) {
    std::fprintf(out, "\n%s\n%-24s", titles[t], "method");
    for (size_t s : sizes) std::fprintf(out, " %14zu", s);
    std::fprintf(out, "\n");
    for (const auto& row : rows) {
      std::string label = row.first + " " + FileLabel(SyncCase{row.first, row.second, 0});
      std::fprintf(out, "%-24s", label.c_str());
      for (size_t s : sizes) {
        const SyncResult* r = find(row, s);
        char cell[64] = "-";
        if (r != nullptr) {
          if (t == 0) std::snprintf(cell, sizeof cell, "%.0f", r->ops_per_sec);
          if (t == 1) std::snprintf(cell, sizeof cell, "%.2f", r->mb_per_sec);
          if (t == 2) std::snprintf(cell, sizeof cell, "%.0f/%.0f", r->p50_us, r->p99_us);
        }
        std::fprintf(out, " %14s", cell);
      }
      std::fprintf(out, "\n");
    }
  }
}

}  // namespace mmdoc::bench
