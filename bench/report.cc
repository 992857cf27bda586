#include "bench/report.h"

#include <bson/bson.h>

#include <algorithm>
#include <map>
#include <set>

namespace mmdoc::bench {
namespace {

void AppendString(bson_t* b, const char* key, const std::string& v) {
  bson_append_utf8(b, key, -1, v.data(), static_cast<int>(v.size()));
}

void AppendStrings(bson_t* b, const char* key, const std::vector<std::string>& v) {
  bson_t arr;
  bson_append_array_begin(b, key, -1, &arr);
  for (size_t i = 0; i < v.size(); ++i) AppendString(&arr, std::to_string(i).c_str(), v[i]);
  bson_append_array_end(b, &arr);
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// threads: the row with that many workers (0: the first of any).
const PhaseResult* FindRow(const std::vector<PhaseResult>& results, const std::string& engine,
                           const std::string& durability, uint64_t docs, const std::string& phase,
                           int threads = 0) {
  for (const auto& r : results) {
    if (r.engine == engine && r.durability == durability && r.docs == docs && r.phase == phase &&
        (threads == 0 || r.threads == threads)) {
      return &r;
    }
  }
  return nullptr;
}

// A row of the tables: a phase, or a read phase at one thread count when
// the run has several ("search_id x4").
struct Line {
  std::string phase;
  int threads = 0;  // 0: whatever the phase ran with
  std::string label;
};

std::vector<Line> Lines(const RunInfo& run) {
  std::vector<Line> lines;
  for (const auto& phase : run.phases) {
    if (run.thread_list.size() > 1 && ThreadedPhase(phase)) {
      for (int n : run.thread_list) lines.push_back({phase, n, phase + " x" + std::to_string(n)});
    } else {
      lines.push_back({phase, 0, phase});
    }
  }
  return lines;
}

std::string Cell(const PhaseResult* r) {
  if (r == nullptr) return "-";
  if (!r->available) return "n/a";
  return FormatRate(r->ops_per_sec);
}

// The lines printed under a phase's row in the tables.
const std::vector<std::string>& SubRows(const std::string& phase) {
  static const std::vector<std::string> kNone;
  static const std::vector<std::string> kScan = {"  GB/s", "  of mem read"};
  static const std::vector<std::string> kIndex = {"  vs insert"};
  static const std::vector<std::string> kMapping = {"  raw API", "  CPU overhead"};
  if (phase == "search_value") return kScan;
  if (phase == "insert_noindex") return kIndex;
  if (phase == "mapping") return kMapping;
  return kNone;
}

// Sub-row i of phase for the result r; insert is the same engine's insert
// row (for insert_noindex: its ops/s over insert's, what the index costs).
// mem_gb is the memory read bandwidth the run measured (0: unknown).
std::string SubCell(const std::string& phase, size_t i, const PhaseResult* r,
                    const PhaseResult* insert, double mem_gb) {
  if (r == nullptr) return "-";
  if (!r->available) return "n/a";
  char buf[32];
  if (phase == "search_value") {
    if (r->gb_per_sec < 0) return "-";
    if (i == 0) {
      std::snprintf(buf, sizeof buf, "%.2f", r->gb_per_sec);
    } else {
      if (mem_gb <= 0) return "-";
      std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * r->gb_per_sec / mem_gb);
    }
    return buf;
  }
  if (phase == "insert_noindex") {
    if (insert == nullptr || !insert->available || insert->ops_per_sec <= 0) return "-";
    std::snprintf(buf, sizeof buf, "x%.2f", r->ops_per_sec / insert->ops_per_sec);
    return buf;
  }
  if (phase == "mapping") {
    if (r->raw_ops_per_sec < 0) return "-";
    if (i == 0) return FormatRate(r->raw_ops_per_sec);
    std::snprintf(buf, sizeof buf, "%+.1f%%", r->overhead_pct);
    return buf;
  }
  return "-";
}

// Whether the row has the bytes written per op (a write phase that ran):
// then either a figure (io_known) or n/a.
// "2 merges (0.41 s), 0 checkpoints, 0 full-log merges".
std::string WaitsCell(const PhaseResult& r) {
  char b[128];
  std::snprintf(b, sizeof b, "for %llu merge%s (%.2f s), %llu checkpoint%s, %llu full-log merge%s",
                static_cast<unsigned long long>(r.merge_waits), r.merge_waits == 1 ? "" : "s",
                r.merge_wait_seconds, static_cast<unsigned long long>(r.writer_checkpoints),
                r.writer_checkpoints == 1 ? "" : "s",
                static_cast<unsigned long long>(r.log_full_merges),
                r.log_full_merges == 1 ? "" : "s");
  return b;
}

bool HasWriteBytes(const PhaseResult* r) { return r != nullptr && r->available && r->io_measured; }

double PerOp(uint64_t bytes, const PhaseResult& r) {
  return static_cast<double>(bytes) / static_cast<double>(r.ops);
}

// The "  written/op" (cancelled = false) or "  cancelled/op" cell of a row:
// "-" when the phase has no such figure, "n/a" when /proc/self/io could not
// be read.
std::string WriteCell(const PhaseResult* r, bool cancelled) {
  if (!HasWriteBytes(r)) return "-";
  if (!r->io_known || r->ops == 0) return "n/a";
  return FormatBytes(PerOp(cancelled ? r->cancelled_write_bytes : r->write_bytes, *r));
}

// Whether any of these rows cancelled dirty bytes (the "  cancelled/op"
// line is printed only then).
bool AnyCancelled(const std::vector<const PhaseResult*>& rows) {
  for (const PhaseResult* r : rows) {
    if (HasWriteBytes(r) && r->io_known && r->cancelled_write_bytes > 0) return true;
  }
  return false;
}

std::string DocsLabel(uint64_t n) {
  if (n >= 1000000 && n % 1000000 == 0) return std::to_string(n / 1000000) + "M";
  if (n >= 1000 && n % 1000 == 0) return std::to_string(n / 1000) + "k";
  return std::to_string(n);
}

}  // namespace

std::string FormatRate(double v) {
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (v >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  } else if (v >= 100) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f", v);
  }
  return buf;
}

std::string FormatBytes(double v) {
  char buf[32];
  if (v >= 1024.0 * 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024.0 * 1024.0));
  } else if (v >= 1024.0 * 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1024.0 * 1024.0));
  } else if (v >= 10000) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", v);
  }
  return buf;
}

std::string ResultsToJson(const MachineInfo& m, const RunInfo& run,
                          const std::vector<PhaseResult>& results) {
  bson_t root, machine, config, arr;
  bson_init(&root);
  bson_append_document_begin(&root, "machine", -1, &machine);
  AppendString(&machine, "cpu", m.cpu);
  bson_append_int32(&machine, "cores", -1, m.cores);
  bson_append_int64(&machine, "memory_bytes", -1, static_cast<int64_t>(m.memory_bytes));
  AppendString(&machine, "kernel", m.kernel);
  AppendString(&machine, "filesystem", m.filesystem);
  AppendString(&machine, "mount_point", m.mount_point);
  AppendString(&machine, "mount_device", m.mount_device);
  AppendString(&machine, "mount_options", m.mount_options);
  bson_append_double(&machine, "mem_read_gb_per_sec", -1, m.mem_read_gb_per_sec);
  bson_append_double(&machine, "device_syncs_per_sec", -1, m.device_syncs_per_sec);
  bson_append_int64(&machine, "dataset_bytes", -1, static_cast<int64_t>(run.dataset_bytes));
  bson_append_double(
      &machine, "dataset_to_memory", -1,
      m.memory_bytes ? static_cast<double>(run.dataset_bytes) / static_cast<double>(m.memory_bytes)
                     : 0.0);
  bson_append_document_end(&root, &machine);

  bson_append_document_begin(&root, "config", -1, &config);
  if (run.docs.size() == 1) {
    bson_append_int64(&config, "docs", -1, static_cast<int64_t>(run.docs[0]));
  } else {
    bson_t docs;
    bson_append_array_begin(&config, "docs", -1, &docs);
    for (size_t i = 0; i < run.docs.size(); ++i) {
      bson_append_int64(&docs, std::to_string(i).c_str(), -1, static_cast<int64_t>(run.docs[i]));
    }
    bson_append_array_end(&config, &docs);
  }
  AppendString(&config, "durability", run.durabilities.size() == 1 ? run.durabilities[0] : "all");
  AppendStrings(&config, "durabilities", run.durabilities);
  bson_append_int32(&config, "batch", -1, run.batch);
  bson_append_int32(&config, "threads", -1, run.threads);
  {
    bson_t list;
    bson_append_array_begin(&config, "read_threads", -1, &list);
    for (size_t i = 0; i < run.thread_list.size(); ++i)
      bson_append_int32(&list, std::to_string(i).c_str(), -1, run.thread_list[i]);
    bson_append_array_end(&config, &list);
  }
  bson_append_int64(&config, "seed", -1, static_cast<int64_t>(run.seed));
  bson_append_int32(&config, "scans", -1, run.scans);
  bson_append_int64(&config, "mapping_docs", -1, static_cast<int64_t>(run.mapping_docs));
  bson_append_int64(&config, "compound_docs", -1, static_cast<int64_t>(run.compound_docs));
  bson_append_int64(&config, "lookups", -1, static_cast<int64_t>(run.lookups));
  bson_append_bool(&config, "flush_before_writes", -1, run.flush_before_writes);
  AppendStrings(&config, "engines", run.engines);
  AppendStrings(&config, "phases", run.phases);
  AppendString(&config, "rocksdb_build", run.rocksdb_build);
  AppendString(&config, "command", run.command);
  bson_append_document_end(&root, &config);

  bson_append_array_begin(&root, "results", -1, &arr);
  for (size_t i = 0; i < results.size(); ++i) {
    const PhaseResult& r = results[i];
    bson_t row;
    bson_append_document_begin(&arr, std::to_string(i).c_str(), -1, &row);
    AppendString(&row, "engine", r.engine);
    AppendString(&row, "phase", r.phase);
    AppendString(&row, "durability", r.durability);
    bson_append_int64(&row, "docs", -1, static_cast<int64_t>(r.docs));
    bson_append_int32(&row, "batch", -1, r.batch);
    bson_append_int32(&row, "threads", -1, r.threads);
    bson_append_bool(&row, "available", -1, r.available);
    bson_append_int64(&row, "ops", -1, static_cast<int64_t>(r.ops));
    bson_append_double(&row, "seconds", -1, r.seconds);
    bson_append_double(&row, "ops_per_sec", -1, r.ops_per_sec);
    bson_append_double(&row, "p50_us", -1, r.p50_us);
    bson_append_double(&row, "p99_us", -1, r.p99_us);
    if (r.gb_per_sec >= 0) {
      bson_append_double(&row, "gb_per_sec", -1, r.gb_per_sec);
      if (m.mem_read_gb_per_sec > 0) {
        bson_append_double(&row, "mem_bw_fraction", -1, r.gb_per_sec / m.mem_read_gb_per_sec);
      }
    }
    if (r.raw_ops_per_sec >= 0) {
      bson_append_double(&row, "raw_ops_per_sec", -1, r.raw_ops_per_sec);
      bson_append_double(&row, "raw_p50_us", -1, r.raw_p50_us);
      bson_append_double(&row, "raw_p99_us", -1, r.raw_p99_us);
      bson_append_double(&row, "overhead_pct", -1, r.overhead_pct);
      bson_append_double(&row, "insert_overhead_pct", -1, r.insert_overhead_pct);
      bson_append_double(&row, "read_overhead_pct", -1, r.read_overhead_pct);
    }
    bson_append_int64(&row, "store_bytes", -1, static_cast<int64_t>(r.store_bytes));
    bson_append_int64(&row, "peak_rss_bytes", -1, static_cast<int64_t>(r.peak_rss_bytes));
    if (HasWriteBytes(&r)) {
      if (r.io_known && r.ops > 0) {
        bson_append_int64(&row, "write_bytes", -1, static_cast<int64_t>(r.write_bytes));
        bson_append_double(&row, "write_bytes_per_op", -1, PerOp(r.write_bytes, r));
        bson_append_int64(&row, "cancelled_write_bytes", -1,
                          static_cast<int64_t>(r.cancelled_write_bytes));
      } else {  // /proc/self/io unreadable: n/a, never 0
        bson_append_null(&row, "write_bytes", -1);
        bson_append_null(&row, "write_bytes_per_op", -1);
        bson_append_null(&row, "cancelled_write_bytes", -1);
      }
    }
    if (r.waits_known) {
      bson_append_int64(&row, "merge_waits", -1, static_cast<int64_t>(r.merge_waits));
      bson_append_double(&row, "merge_wait_seconds", -1, r.merge_wait_seconds);
      bson_append_int64(&row, "writer_checkpoints", -1, static_cast<int64_t>(r.writer_checkpoints));
      bson_append_int64(&row, "log_full_merges", -1, static_cast<int64_t>(r.log_full_merges));
    }
    if (!r.state_before.empty() || !r.state_after.empty()) {
      AppendString(&row, "state_before", r.state_before);
      AppendString(&row, "state_after", r.state_after);
    }
    AppendString(&row, "notes", r.notes);
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

std::string ResultsToCsv(const std::vector<PhaseResult>& results) {
  std::string out =
      "engine,phase,durability,docs,batch,threads,available,ops,seconds,ops_"
      "per_sec,"
      "p50_us,p99_us,gb_per_sec,store_bytes,notes,raw_ops_per_sec,overhead_"
      "pct,insert_overhead_pct,read_overhead_pct,write_bytes,write_bytes_per_op,"
      "cancelled_write_bytes,merge_waits,merge_wait_seconds,writer_checkpoints,log_full_merges\n";
  char buf[256];
  for (const auto& r : results) {
    std::snprintf(buf, sizeof buf, "%s,%s,%s,%llu,%d,%d,%s,%llu,%.6f,%.2f,%.3f,%.3f,",
                  r.engine.c_str(), r.phase.c_str(), r.durability.c_str(),
                  static_cast<unsigned long long>(r.docs), r.batch, r.threads,
                  r.available ? "true" : "false", static_cast<unsigned long long>(r.ops), r.seconds,
                  r.ops_per_sec, r.p50_us, r.p99_us);
    out += buf;
    if (r.gb_per_sec >= 0) {
      std::snprintf(buf, sizeof buf, "%.4f", r.gb_per_sec);
      out += buf;
    }
    out += "," + std::to_string(r.store_bytes) + "," + CsvField(r.notes);
    if (r.raw_ops_per_sec >= 0) {
      std::snprintf(buf, sizeof buf, ",%.2f,%.2f,%.2f,%.2f", r.raw_ops_per_sec, r.overhead_pct,
                    r.insert_overhead_pct, r.read_overhead_pct);
      out += buf;
    } else {
      out += ",,,,";
    }
    if (!HasWriteBytes(&r)) {
      out += ",,,";
    } else if (!r.io_known || r.ops == 0) {
      out += ",n/a,n/a,n/a";
    } else {
      std::snprintf(buf, sizeof buf, ",%llu,%.1f,%llu",
                    static_cast<unsigned long long>(r.write_bytes), PerOp(r.write_bytes, r),
                    static_cast<unsigned long long>(r.cancelled_write_bytes));
      out += buf;
    }
    if (r.waits_known) {
      std::snprintf(buf, sizeof buf, ",%llu,%.6f,%llu,%llu",
                    static_cast<unsigned long long>(r.merge_waits), r.merge_wait_seconds,
                    static_cast<unsigned long long>(r.writer_checkpoints),
                    static_cast<unsigned long long>(r.log_full_merges));
      out += buf;
    } else {
      out += ",,,,";
    }
    out += "\n";
  }
  return out;
}

void PrintTables(std::FILE* out, const RunInfo& run, const std::vector<PhaseResult>& results) {
  std::vector<std::string> engines;
  for (const auto& r : results) {
    if (std::find(engines.begin(), engines.end(), r.engine) == engines.end()) {
      engines.push_back(r.engine);
    }
  }
  const std::vector<Line> lines = Lines(run);
  // The label column: 16 wide, wider for a long "search_prefix x10".
  int label_w = 16;
  for (const auto& l : lines) label_w = std::max(label_w, static_cast<int>(l.label.size()) + 1);
  std::string threads;
  for (int n : run.thread_list) threads += (threads.empty() ? "" : ",") + std::to_string(n);
  if (threads.empty()) threads = std::to_string(run.threads);
  const uint64_t largest =
      run.docs.empty() ? 0 : *std::max_element(run.docs.begin(), run.docs.end());
  for (const auto& mode : run.durabilities) {
    for (const auto& engine : engines) {
      // The engine's settings from its first row that ran (an n/a row's
      // notes say why it did not instead).
      const PhaseResult* any = nullptr;
      for (const auto& r : results) {
        if (r.engine != engine || r.durability != mode) continue;
        if (any == nullptr || (!any->available && r.available)) any = &r;
      }
      if (any == nullptr) continue;
      // The inserts' writers, which are not the read threads in every mode.
      const auto durability = ParseDurability(mode);
      const int writers = durability ? InsertWriters(*durability, run.threads) : run.threads;
      std::fprintf(out, "\n%s, durability %s, batch %d, threads %s, insert writers %d (ops/s)\n",
                   engine.c_str(), mode.c_str(), run.batch, threads.c_str(), writers);
      std::string settings = any->notes.substr(0, any->notes.find("; "));
      std::fprintf(out, "  %s\n", settings.c_str());
      std::fprintf(out, "%-*s", label_w, "phase");
      for (uint64_t n : run.docs) std::fprintf(out, " %10s", DocsLabel(n).c_str());
      std::fprintf(out, " %10s %10s\n", "p50 us", "p99 us");
      for (const auto& line : lines) {
        const std::string& phase = line.phase;
        std::fprintf(out, "%-*s", label_w, line.label.c_str());
        for (uint64_t n : run.docs) {
          std::fprintf(out, " %10s",
                       Cell(FindRow(results, engine, mode, n, phase, line.threads)).c_str());
        }
        const PhaseResult* r = FindRow(results, engine, mode, largest, phase, line.threads);
        if (r != nullptr && r->available) {
          std::fprintf(out, " %10.1f %10.1f", r->p50_us, r->p99_us);
        }
        std::fprintf(out, "\n");
        const auto& subs = SubRows(phase);
        for (size_t i = 0; i < subs.size(); ++i) {
          std::fprintf(out, "%-*s", label_w, subs[i].c_str());
          for (uint64_t n : run.docs) {
            std::fprintf(
                out, " %10s",
                SubCell(phase, i, FindRow(results, engine, mode, n, phase, line.threads),
                        FindRow(results, engine, mode, n, "insert"), run.mem_read_gb_per_sec)
                    .c_str());
          }
          if (phase == "mapping" && i == 0 && r != nullptr && r->available &&
              r->raw_ops_per_sec >= 0) {
            std::fprintf(out, " %10.1f %10.1f", r->raw_p50_us, r->raw_p99_us);
          }
          std::fprintf(out, "\n");
        }
        // What the phase read through besides the trees (the largest N).
        if (r != nullptr && !r->state_before.empty())
          std::fprintf(out, "%-*s %s; after: %s\n", label_w, "  read through",
                       r->state_before.c_str(), r->state_after.c_str());
        // Bytes written per op (write phases), and the dirty bytes dropped
        // before writeback when there were any.
        if (!WritePhase(phase)) continue;
        std::vector<const PhaseResult*> rows;
        for (uint64_t n : run.docs)
          rows.push_back(FindRow(results, engine, mode, n, phase, line.threads));
        for (bool cancelled : {false, true}) {
          if (cancelled && !AnyCancelled(rows)) continue;
          std::fprintf(out, "%-*s", label_w, cancelled ? "  cancelled/op" : "  written/op");
          for (const PhaseResult* w : rows)
            std::fprintf(out, " %10s", WriteCell(w, cancelled).c_str());
          std::fprintf(out, "\n");
        }
        // What the writer waited on the engine's background work (the
        // largest N), when the engine counts it.
        const PhaseResult* last = rows.empty() ? nullptr : rows.back();
        if (last != nullptr && last->available && last->waits_known)
          std::fprintf(out, "%-*s %s\n", label_w, "  writer waited", WaitsCell(*last).c_str());
      }
    }
  }

  // What each durability mode costs: one table per phase and count.
  if (run.durabilities.size() > 1) {
    for (uint64_t n : run.docs) {
      for (const auto& line : lines) {
        const std::string& phase = line.phase;
        std::fprintf(out, "\n%s by durability mode, %s docs, batch %d (ops/s)\n",
                     line.label.c_str(), DocsLabel(n).c_str(), run.batch);
        std::fprintf(out, "%-*s", label_w, "mode");
        for (const auto& e : engines) std::fprintf(out, " %14s", e.c_str());
        std::fprintf(out, "\n");
        for (const auto& mode : run.durabilities) {
          std::fprintf(out, "%-*s", label_w, mode.c_str());
          for (const auto& e : engines) {
            std::fprintf(out, " %14s",
                         Cell(FindRow(results, e, mode, n, phase, line.threads)).c_str());
          }
          std::fprintf(out, "\n");
          if (!WritePhase(phase)) continue;
          std::vector<const PhaseResult*> rows;
          for (const auto& e : engines)
            rows.push_back(FindRow(results, e, mode, n, phase, line.threads));
          for (bool cancelled : {false, true}) {
            if (cancelled && !AnyCancelled(rows)) continue;
            std::fprintf(out, "%-*s", label_w, cancelled ? "  cancelled/op" : "  written/op");
            for (const PhaseResult* w : rows) {
              std::fprintf(out, " %14s", WriteCell(w, cancelled).c_str());
            }
            std::fprintf(out, "\n");
          }
        }
      }
    }
  }

  if (engines.size() < 2) return;
  std::string base =
      std::find(engines.begin(), engines.end(), "mmdoc") != engines.end() ? "mmdoc" : engines[0];
  for (const auto& mode : run.durabilities) {
    for (uint64_t n : run.docs) {
      std::fprintf(out, "\ncomparison, %s docs, durability %s: ops/s (ratio to %s)\n",
                   DocsLabel(n).c_str(), mode.c_str(), base.c_str());
      std::fprintf(out, "%-*s", label_w, "phase");
      for (const auto& e : engines) std::fprintf(out, " %20s", e.c_str());
      std::fprintf(out, "\n");
      for (const auto& line : lines) {
        const std::string& phase = line.phase;
        std::fprintf(out, "%-*s", label_w, line.label.c_str());
        const PhaseResult* b = FindRow(results, base, mode, n, phase, line.threads);
        for (const auto& e : engines) {
          const PhaseResult* r = FindRow(results, e, mode, n, phase, line.threads);
          std::string cell = Cell(r);
          if (r != nullptr && r->available && b != nullptr && b->available && b->ops_per_sec > 0 &&
              e != base) {
            char ratio[32];
            std::snprintf(ratio, sizeof ratio, " (x%.2f)", r->ops_per_sec / b->ops_per_sec);
            cell += ratio;
          }
          std::fprintf(out, " %20s", cell.c_str());
        }
        std::fprintf(out, "\n");
        const auto& subs = SubRows(phase);
        for (size_t i = 0; i < subs.size(); ++i) {
          std::fprintf(out, "%-*s", label_w, subs[i].c_str());
          for (const auto& e : engines) {
            std::fprintf(out, " %20s",
                         SubCell(phase, i, FindRow(results, e, mode, n, phase, line.threads),
                                 FindRow(results, e, mode, n, "insert"), run.mem_read_gb_per_sec)
                             .c_str());
          }
          std::fprintf(out, "\n");
        }
        // Bytes written per op, with the ratio to the base engine's (lower
        // is less write amplification).
        if (!WritePhase(phase)) continue;
        std::vector<const PhaseResult*> rows;
        for (const auto& e : engines)
          rows.push_back(FindRow(results, e, mode, n, phase, line.threads));
        for (bool cancelled : {false, true}) {
          if (cancelled && !AnyCancelled(rows)) continue;
          std::fprintf(out, "%-*s", label_w, cancelled ? "  cancelled/op" : "  written/op");
          for (size_t k = 0; k < engines.size(); ++k) {
            const PhaseResult* r = rows[k];
            std::string cell = WriteCell(r, cancelled);
            if (!cancelled && engines[k] != base && HasWriteBytes(r) && r->io_known &&
                HasWriteBytes(b) && b->io_known && b->write_bytes > 0 && b->ops > 0 && r->ops > 0) {
              // Two significant digits below 0.1 (a log append against a
              // page rewrite is x0.0042, not x0.00).
              const double x = PerOp(r->write_bytes, *r) / PerOp(b->write_bytes, *b);
              char ratio[32];
              std::snprintf(ratio, sizeof ratio, x > 0 && x < 0.1 ? " (x%.2g)" : " (x%.2f)", x);
              cell += ratio;
            }
            std::fprintf(out, " %20s", cell.c_str());
          }
          std::fprintf(out, "\n");
        }
      }
      // Space: the store's disk use after the insert phase, and each
      // engine's peak resident memory over its run (both with the ratio
      // to the base engine; lower is better here).
      auto space_row = [&](const char* label, auto bytes_of) {
        const PhaseResult* b = FindRow(results, base, mode, n, "insert");
        const uint64_t bb = b != nullptr ? bytes_of(*b) : 0;
        bool any = false;
        std::string line;
        for (const auto& e : engines) {
          const PhaseResult* r = FindRow(results, e, mode, n, "insert");
          std::string cell = "-";
          if (r != nullptr && r->available && bytes_of(*r) > 0) {
            any = true;
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.0f MiB", bytes_of(*r) / 1048576.0);
            cell = buf;
            if (e != base && bb > 0) {
              std::snprintf(buf, sizeof buf, " (x%.2f)", double(bytes_of(*r)) / bb);
              cell += buf;
            }
          }
          char col[32];
          std::snprintf(col, sizeof col, " %20s", cell.c_str());
          line += col;
        }
        if (any) std::fprintf(out, "%-*s%s\n", label_w, label, line.c_str());
      };
      space_row("disk (insert)", [](const PhaseResult& r) { return r.store_bytes; });
      space_row("peak memory", [](const PhaseResult& r) { return r.peak_rss_bytes; });
    }
  }
}

}  // namespace mmdoc::bench
