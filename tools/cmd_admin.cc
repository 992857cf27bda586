// The commands about the database file as a whole: stats, check, compact.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "mmdoc/db.h"
#include "mmdoc/options.h"
#include "mmdoc/status.h"
#include "tools/commands.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {

int RunStats(const CommonArgs& c, bool json) {
  int code = kExitOk;
  auto db = OpenDb(c, Access::kRead, &code);
  if (!db) return code;
  auto r = db->Stats();
  if (!r.ok()) return FailStatus("stats", r.status());
  DBStats& s = *r;
  if (c.collection_given) {
    auto it = std::find_if(s.collections.begin(), s.collections.end(),
                           [&](const CollectionStats& cs) { return cs.name == c.collection; });
    if (it == s.collections.end()) {
      return Fail(kExitNotFound, "stats", "no collection " + Quote(c.collection));
    }
    std::vector<CollectionStats> only;
    only.push_back(std::move(*it));
    s.collections = std::move(only);
  }
  if (json) {
    std::printf("%s\n", s.ToJson().c_str());
    return kExitOk;
  }
  auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("file size     %llu bytes (%llu pages of %u bytes, %llu free)\n", u(s.file_size),
              u(s.page_count), s.page_size, u(s.free_pages));
  std::printf("log size      %llu bytes (grows to at most %llu)\n", u(s.log_file_size),
              u(s.log_size));
  std::printf("fill factor   %.1f%%\n", s.fill_factor * 100);
  std::printf("last txid     %llu\n", u(s.txid));
  if (s.write_buffer_bytes + s.key_filter_bytes > 0) {
    std::printf("write buffer  %llu bytes unmerged, key filters %llu bytes (%llu ready)\n",
                u(s.write_buffer_bytes), u(s.key_filter_bytes), u(s.key_filters_ready));
  }
  if (s.runs > 0) {
    std::printf("runs          %llu, %llu changes, %llu being merged\n", u(s.runs),
                u(s.run_entries), u(s.runs_merging));
  }
  if (s.readers > 0) {
    std::printf("readers       %llu (oldest at txid %llu)\n", u(s.readers),
                u(s.oldest_reader_txid));
  }
  std::printf("\n%-24s %12s %12s\n", "collection / index", "documents", "pages");
  for (const CollectionStats& cs : s.collections) {
    std::printf("%-24s %12llu %12llu\n", Printable(cs.name).c_str(), u(cs.documents),
                u(cs.data_pages));
    for (size_t i = 0; i < cs.indexes.size(); ++i) {
      const IndexInfo& ix = cs.indexes[i];
      std::string label = "  " + Printable(ix.field) + (ix.unique ? " (unique)" : "");
      uint64_t pages = i < cs.index_pages.size() ? cs.index_pages[i] : 0;
      std::printf("%-24s %12llu %12llu\n", label.c_str(), u(ix.entries), u(pages));
    }
  }
  return kExitOk;
}

// check and compact work on the whole database; a collection given with
// -c must exist (exit 1 when not, as stats -c), and is covered. Returns
// true to go on, or false with *code set.
bool CollectionGivenExists(DB* db, const CommonArgs& c, const std::string& what, int* code) {
  if (!c.collection_given) return true;
  auto names = db->ListCollections();
  if (!names.ok()) {
    *code = FailStatus(what, names.status());
    return false;
  }
  if (std::find(names->begin(), names->end(), c.collection) != names->end()) return true;
  *code = Fail(kExitNotFound, what, "no collection " + Quote(c.collection));
  return false;
}

int RunCheck(const CommonArgs& c) {
  const std::string what = "check " + c.db;
  int code = kExitOk;
  if (!CheckDbPath(c.db, false, what, &code)) return code;
  // Read-only, as the other reads: a check changes nothing.
  auto db = OpenWith(c, Access::kRead);
  if (!db.ok()) {
    // A file too damaged to open fails the check; anything else (locked,
    // unreadable) is an error running it.
    const std::string why = OpenError(c, db.status(), Access::kRead);
    if (db.status().IsCorruption()) {
      std::printf("problem: %s\n", why.c_str());
      return Fail(kExitNotFound, what, "cannot open: " + why);
    }
    return Fail(kExitBadInput, what, why);
  }
  if (!CollectionGivenExists(db->get(), c, what, &code)) return code;
  CheckReport report;
  Status s = (*db)->Check(&report);
  if (s.ok()) {
    std::printf("ok: %llu pages, %llu documents, %llu index entries checked\n",
                static_cast<unsigned long long>(report.pages_checked),
                static_cast<unsigned long long>(report.documents_checked),
                static_cast<unsigned long long>(report.index_entries_checked));
    return kExitOk;
  }
  if (!s.IsCorruption()) return FailStatus(what, s);
  if (report.problems.empty()) report.problems.push_back(s.message());
  for (const std::string& p : report.problems) std::printf("problem: %s\n", Printable(p).c_str());
  return Fail(
      kExitNotFound, what,
      std::to_string(report.problems.size()) + " problem(s) found; first: " + report.problems[0]);
}

int RunCompact(const CommonArgs& c) {
  int code = kExitOk;
  auto db = OpenDb(c, Access::kWrite, &code);
  if (!db) return code;
  if (!CollectionGivenExists(db.get(), c, "compact", &code)) return code;
  uint64_t before = FileSize(c.db);
  Status s = (*db).Compact();
  if (!s.ok()) return FailStatus("compact", s);
  NoteCommitted();
  std::printf("compacted %s: %llu -> %llu bytes\n", c.db.c_str(),
              static_cast<unsigned long long>(before),
              static_cast<unsigned long long>(FileSize(c.db)));
  return CloseDb(db.get());
}

}  // namespace mmdoc::tool
