// The commands that change documents: insert, update, delete.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "mmdoc/status.h"
#include "tools/commands.h"
#include "tools/loader.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {

int RunInsert(const CommonArgs& c, const InsertArgs& a) {
  int code = kExitOk;
  // Opened (and made) at the first valid document: bad input from the start
  // leaves no new database behind.
  std::unique_ptr<DB> db;
  std::unique_ptr<Loader> loader;
  std::string line;
  uint64_t line_no = 0;
  // C stdio, not std::cin: a read error (EIO, a directory as stdin) is
  // told from the end of the input (ferror; iostreams report it as EOF).
  struct LineBuffer {
    char* data = nullptr;
    size_t size = 0;
    ~LineBuffer() { std::free(data); }
  } in;
  for (ssize_t n; (n = ::getline(&in.data, &in.size, stdin)) >= 0;) {
    line.assign(in.data, static_cast<size_t>(n));
    if (!line.empty() && line.back() == '\n') line.pop_back();
    ++line_no;
    if (IsBlank(line)) continue;
    const std::string where = "line " + std::to_string(line_no);
    auto doc = Document::FromJson(line);
    if (!doc.ok()) {
      if (loader == nullptr) return Fail(kExitBadInput, where, JsonError(doc.status()));
      return FailInsert(loader.get(), where, JsonError(doc.status()));
    }
    if (loader == nullptr) {
      db = OpenDb(c, Access::kCreate, &code);
      if (!db) return code;
      loader = std::make_unique<Loader>(db.get(), c.collection, a.batch, a.echo);
    }
    Status s = loader->Add(*doc);
    if (!s.ok()) return FailInsert(loader.get(), where, Describe(s));
  }
  const std::string read_error = std::ferror(stdin) ? std::strerror(errno) : "";
  if (loader == nullptr) {
    if (!read_error.empty()) return Fail(kExitBadInput, "standard input", read_error);
    return kExitOk;  // nothing to insert
  }
  if (!read_error.empty()) return FailInsert(loader.get(), "standard input", read_error);
  Status s = loader->Flush();
  if (!s.ok()) return FailCommit(*loader, "commit", s);
  return CloseDb(db.get());
}

int RunUpdate(const CommonArgs& c, const std::string& filter_json, const std::string& update_json,
              bool many, bool upsert) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto update = ParseDocArg("update", update_json, &code);
  if (!update) return code;
  // An upsert may insert, so it creates the database as insert does.
  auto db = OpenDb(c, upsert ? Access::kCreate : Access::kWrite, &code);
  if (!db) return code;
  UpdateOptions options;
  options.upsert = upsert;
  auto r = many ? db->UpdateMany(c.collection, *filter, *update, options)
                : db->UpdateOne(c.collection, *filter, *update, options);
  if (!r.ok()) return FailStatus("update", r.status());
  std::printf("{\"matched\": %llu, \"modified\": %llu", static_cast<unsigned long long>(r->matched),
              static_cast<unsigned long long>(r->modified));
  if (r->upserted_id) std::printf(", \"upserted\": %s", r->upserted_id->ToJson().c_str());
  std::printf("}\n");
  return CloseDb(db.get());
}

int RunDelete(const CommonArgs& c, const std::string& filter_json, bool many) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto db = OpenDb(c, Access::kWrite, &code);
  if (!db) return code;
  auto r = many ? db->DeleteMany(c.collection, *filter) : db->DeleteOne(c.collection, *filter);
  if (!r.ok()) return FailStatus("delete", r.status());
  std::printf("{\"deleted\": %llu}\n", static_cast<unsigned long long>(*r));
  return CloseDb(db.get());
}

}  // namespace mmdoc::tool
