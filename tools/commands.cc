#include "tools/commands.h"

#include <bson/bson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mmdoc/db.h"
#include "mmdoc/document.h"
#include "mmdoc/durability.h"
#include "mmdoc/options.h"
#include "mmdoc/status.h"
#include "storage/coding.h"
#include "storage/format.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {
namespace {

// Documents per transaction are also capped by their bytes, so that a
// batch of large documents does not become one huge transaction.
constexpr uint64_t kMaxBatchBytes = 32u << 20;

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Whether the file has the mmdoc magic where a meta page keeps it (page 0,
// or page 1 at any legal page size: storage/format.h). A file without it
// is not a database, damaged or not. True when the file cannot be read,
// so that DB::Open says why.
bool HasMetaMagic(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return true;
  std::vector<uint8_t> head(storage::kMaxPageSize + storage::kMetaMagicOffset +
                            8);
  const size_t n = std::fread(head.data(), 1, head.size(), f);
  std::fclose(f);
  auto magic_at = [&](size_t offset) {
    return offset + 8 <= n &&
           storage::DecodeFixed64(head.data() + offset) == storage::kMagic;
  };
  if (magic_at(storage::kMetaMagicOffset)) return true;
  for (size_t ps = storage::kMinPageSize; ps <= storage::kMaxPageSize;
       ps *= 2) {
    if (magic_at(ps + storage::kMetaMagicOffset)) return true;
  }
  return false;
}

// Refuses, before DB::Open can touch anything, a path that cannot be a
// database: missing (unless `create`: a new database), a directory or
// other non-file, an empty file, a file without the mmdoc magic. Prints
// the error, stores the exit status (2) in *code and returns false.
bool CheckDbPath(const std::string& path, bool create, const std::string& what,
                 int* code) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && create) return true;
    *code = Fail(kExitBadInput, what,
                 errno == ENOENT ? "no such database file"
                                 : std::string(std::strerror(errno)));
    return false;
  }
  const char* problem = nullptr;
  if (S_ISDIR(st.st_mode)) {
    problem = "is a directory, not a database file";
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else if (st.st_size == 0) {
    problem = "empty file (0 bytes), not a database";
  } else if (!HasMetaMagic(path)) {
    problem = "not an mmdoc database file (no meta page has the mmdoc magic)";
  }
  if (problem == nullptr) return true;
  *code = Fail(kExitBadInput, what, problem);
  return false;
}

// Opens c.db. `create`: create the file when it is missing (write commands
// that add data); the others refuse a missing file rather than leaving an
// empty database behind a typo, and never pass create_if_missing. On
// failure prints the error, stores the exit status in *code and returns
// null.
std::unique_ptr<DB> OpenDb(const CommonArgs& c, bool create, int* code) {
  const std::string what = "open " + c.db;
  if (!CheckDbPath(c.db, create, what, code)) return nullptr;
  Options options;
  options.create_if_missing = create;
  // mmdoc.cc checks the name; fsync is the default either way.
  options.durability =
      ParseDurability(c.durability).value_or(Durability::kFsync);
  auto db = DB::Open(c.db, options);
  if (!db.ok()) {
    *code = Fail(kExitBadInput, what, Describe(db.status()));
    return nullptr;
  }
  return std::move(db).value();
}

// libbson's parse errors may already say "invalid JSON"; say it once.
std::string JsonError(const Status& s) {
  std::string m = s.message();
  for (const char* prefix : {"invalid JSON: ", "Invalid JSON: "}) {
    if (m.rfind(prefix, 0) == 0) m.erase(0, std::strlen(prefix));
  }
  return "invalid JSON: " + m;
}

// Parses a JSON document given on the command line (a filter, an update).
std::optional<Document> ParseDocArg(std::string_view what,
                                    const std::string& json, int* code) {
  auto doc = Document::FromJson(json);
  if (!doc.ok()) {
    *code = Fail(kExitBadInput, what, JsonError(doc.status()) + " in " + json);
    return std::nullopt;
  }
  return std::move(doc).value();
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Writes one document in `format` ("json" or "bson"). False on a write
// error or a document that cannot be written as JSON (*error says which).
bool WriteDoc(FILE* out, bool bson, std::string_view raw, std::string* json,
              std::string* error) {
  if (bson) {
    if (std::fwrite(raw.data(), 1, raw.size(), out) != raw.size()) {
      *error = std::strerror(errno);
      return false;
    }
    return true;
  }
  if (!BsonToJson(reinterpret_cast<const uint8_t*>(raw.data()), raw.size(),
                  json)) {
    *error = "document cannot be written as JSON (invalid UTF-8?)";
    return false;
  }
  json->push_back('\n');
  if (std::fwrite(json->data(), 1, json->size(), out) != json->size()) {
    *error = std::strerror(errno);
    return false;
  }
  return true;
}

// The document's _id as JSON, or "" when it has none.
std::string IdJson(const Document& doc) {
  auto id = doc.Get("_id");
  return id.ok() ? id->ToJson() : std::string();
}

// Inserts documents in transactions of up to `batch` documents, as insert
// and import do. With echo, prints each _id on stdout once the commit that
// holds it has returned (so an echoed _id is durable per the mode).
class Loader {
 public:
  Loader(DB* db, std::string collection, uint64_t batch, bool echo)
      : db_(db),
        collection_(std::move(collection)),
        batch_(batch == 0 ? 1 : batch),
        echo_(echo) {}
  ~Loader() {
    // An error path that did not Flush: drop the partial batch. Callers
    // Flush first whenever what came before the error should stay.
    txn_.reset();
  }

  // Inserts one document into the open batch (beginning one if needed),
  // committing the batch when full. A duplicate _id or unique-index
  // violation comes back as AlreadyExists with a message that says which.
  Status Add(const Document& doc) {
    if (!txn_) {
      auto txn = db_->Begin();
      if (!txn.ok()) return txn.status();
      txn_ = std::move(txn).value();
    }
    Value id;
    Status s = txn_->Insert(collection_, doc, &id);
    if (!s.ok()) return Explain(s, doc);
    ids_.push_back(std::move(id));
    bytes_ += doc.size();
    if (ids_.size() >= batch_ || bytes_ >= kMaxBatchBytes) return Flush();
    return Status::OK();
  }

  // Commits the open batch, if any, and echoes its ids.
  Status Flush() {
    if (!txn_) return Status::OK();
    Status s = txn_->Commit();
    txn_.reset();
    if (!s.ok()) {
      ids_.clear();
      return s;
    }
    inserted_ += ids_.size();
    if (echo_) {
      for (const Value& id : ids_) {
        std::string line = id.ToJson();
        line.push_back('\n');
        std::fwrite(line.data(), 1, line.size(), stdout);
      }
      std::fflush(stdout);
    }
    ids_.clear();
    bytes_ = 0;
    return Status::OK();
  }

  uint64_t inserted() const { return inserted_; }

 private:
  // Tells a duplicate _id from a unique-index violation, naming the value.
  Status Explain(const Status& s, const Document& doc) {
    if (!s.IsAlreadyExists()) return s;
    std::string id = IdJson(doc);
    if (!id.empty()) {
      auto existing = doc.Get("_id");
      if (existing.ok() && txn_->Get(collection_, *existing).ok()) {
        return Status::AlreadyExists("duplicate _id " + id);
      }
    }
    return Status::AlreadyExists("unique index violation", s.message());
  }

  DB* db_;
  std::string collection_;
  uint64_t batch_;
  bool echo_;
  std::unique_ptr<Transaction> txn_;
  std::vector<Value> ids_;
  uint64_t bytes_ = 0;
  uint64_t inserted_ = 0;
};

// Reports a failed insert at `where` ("line 7"), after committing what came
// before it in the same batch, so that exactly the input before `where` is
// in the database.
int FailInsert(Loader* loader, const std::string& where,
               const std::string& detail) {
  Status s = loader->Flush();
  if (!s.ok()) {
    return Fail(kExitBadInput, where,
                detail + " (and committing the lines before it failed: " +
                    Describe(s) + ")");
  }
  return Fail(kExitBadInput, where, detail);
}

bool IsBlank(std::string_view line) {
  return line.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// Parses FIELD, -FIELD, FIELD:1 / FIELD:-1 (also :asc / :desc).
bool ParseSort(const std::string& spec, FindOptions* o) {
  std::string field = spec;
  int dir = 1;
  if (!field.empty() && field[0] == '-') {
    dir = -1;
    field.erase(0, 1);
  } else if (!field.empty() && field[0] == '+') {
    field.erase(0, 1);
  }
  size_t colon = field.rfind(':');
  if (colon != std::string::npos) {
    std::string d = field.substr(colon + 1);
    field.resize(colon);
    if (d == "-1" || d == "desc") {
      dir = -dir;
    } else if (d != "1" && d != "asc") {
      return false;
    }
  }
  if (!FieldPathProblem(field).empty()) return false;
  o->sort_field = field;
  o->sort_direction = dir;
  return true;
}

// Where export writes: stdout or a file.
class Output {
 public:
  ~Output() {
    if (file_ != nullptr && file_ != stdout) std::fclose(file_);
  }
  bool Open(const std::string& path, std::string* error) {
    if (path.empty() || path == "-") {
      file_ = stdout;
      return true;
    }
    if (IsDirectory(path)) {
      *error = "is a directory";
      return false;
    }
    file_ = std::fopen(path.c_str(), "wb");
    if (file_ == nullptr) *error = std::strerror(errno);
    return file_ != nullptr;
  }
  FILE* get() const { return file_; }
  bool is_terminal() const { return file_ == stdout && isatty(STDOUT_FILENO); }
  // Flushes and closes; false (with *error) when anything failed.
  bool Close(std::string* error) {
    bool ok = std::fflush(file_) == 0 && !std::ferror(file_);
    if (!ok) *error = std::strerror(errno);
    if (file_ != stdout) {
      if (std::fclose(file_) != 0 && ok) {
        ok = false;
        *error = std::strerror(errno);
      }
    }
    file_ = nullptr;
    return ok;
  }

 private:
  FILE* file_ = nullptr;
};

// Little-endian int32 at p.
uint32_t LoadLe32(const unsigned char* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
         uint32_t{p[3]} << 24;
}

enum class InputFormat { kEmpty, kJson, kJsonArray, kBson, kUnknown };

// Tells JSON lines from concatenated BSON by the first bytes of the file.
InputFormat SniffFormat(const std::string& head, uint64_t file_size) {
  if (head.empty()) return InputFormat::kEmpty;
  const auto* p = reinterpret_cast<const unsigned char*>(head.data());
  // BSON first: a document of 123 bytes starts with '{' too, but then with
  // three NUL bytes, which JSON never has.
  if (head.size() >= 5) {
    uint32_t len = LoadLe32(p);
    unsigned char type = p[4];
    bool type_ok = (type >= 0x01 && type <= 0x13) || type == 0x7f ||
                   type == 0xff || (type == 0x00 && len == 5);
    if (len >= 5 && len <= kMaxDocumentSize && len <= file_size && type_ok &&
        (len > head.size() || p[len - 1] == 0)) {
      return InputFormat::kBson;
    }
  }
  size_t i = 0;
  if (head.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // UTF-8 byte order mark
  i = head.find_first_not_of(" \t\r\n", i);
  if (i == std::string::npos) return InputFormat::kEmpty;
  if (head.find('\0') != std::string::npos) return InputFormat::kUnknown;
  if (head[i] == '{') return InputFormat::kJson;
  if (head[i] == '[') return InputFormat::kJsonArray;
  return InputFormat::kUnknown;
}

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix.data(),
                   suffix.size()) == 0;
}

int ImportJson(FILE* in, const std::string& what, Loader* loader,
               Progress* progress) {
  char* buf = nullptr;
  size_t cap = 0;
  uint64_t line_no = 0;
  uint64_t bytes = 0;
  int code = kExitOk;
  for (;;) {
    ssize_t n = getline(&buf, &cap, in);
    if (n < 0) break;
    ++line_no;
    bytes += static_cast<uint64_t>(n);
    std::string_view line(buf, static_cast<size_t>(n));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r'))
      line.remove_suffix(1);
    if (IsBlank(line)) continue;
    auto doc = Document::FromJson(line);
    if (!doc.ok()) {
      code = FailInsert(loader, what + ": line " + std::to_string(line_no),
                        JsonError(doc.status()));
      break;
    }
    Status s = loader->Add(*doc);
    if (!s.ok()) {
      code = FailInsert(loader, what + ": line " + std::to_string(line_no),
                        Describe(s));
      break;
    }
    progress->Update(bytes, loader->inserted());
  }
  bool read_error = code == kExitOk && std::ferror(in);
  std::free(buf);
  if (read_error) return Fail(kExitBadInput, what, std::strerror(errno));
  return code;
}

int ImportBson(FILE* in, const std::string& what, Loader* loader,
               Progress* progress) {
  std::string buf;
  uint64_t offset = 0;
  uint64_t doc_no = 0;
  for (;;) {
    unsigned char len_bytes[4];
    size_t got = std::fread(len_bytes, 1, 4, in);
    if (got == 0 && std::feof(in)) break;
    ++doc_no;
    const std::string where = what + ": document " + std::to_string(doc_no) +
                              " at byte " + std::to_string(offset);
    if (got < 4) {
      return FailInsert(
          loader, where,
          std::ferror(in) ? std::strerror(errno) : "truncated file");
    }
    uint32_t len = LoadLe32(len_bytes);
    if (len < 5 || len > kMaxDocumentSize) {
      return FailInsert(
          loader, where,
          "invalid BSON: bad document length " + std::to_string(len));
    }
    buf.resize(len);
    std::memcpy(buf.data(), len_bytes, 4);
    if (std::fread(buf.data() + 4, 1, len - 4, in) != len - 4) {
      return FailInsert(
          loader, where,
          std::ferror(in) ? std::strerror(errno) : "truncated file");
    }
    auto doc = Document::FromBson(reinterpret_cast<const uint8_t*>(buf.data()),
                                  buf.size());
    if (!doc.ok()) {
      return FailInsert(loader, where,
                        "invalid BSON: " + doc.status().message());
    }
    Status s = loader->Add(*doc);
    if (!s.ok()) return FailInsert(loader, where, Describe(s));
    offset += len;
    progress->Update(offset, loader->inserted());
  }
  return kExitOk;
}

// export --salvage: DB::Salvage walks the collection's _id tree from its
// root, skips every page that fails its checksum or structure (with the
// subtree below it), and hands over each intact document, in _id order.
// The number lost is the collection's document count less those read.
int Salvage(DB* db, const CommonArgs& c, Output* out, bool bson) {
  const std::string what = "export --salvage";
  uint64_t written = 0;
  uint64_t unwritable = 0;  // read, but not valid UTF-8 for JSON
  std::string json;
  std::string error;
  std::string write_error;
  DB::SalvageReport report;
  Status s = db->Salvage(
      c.collection,
      [&](std::string_view raw) {
        if (!write_error.empty()) return;  // the walk cannot be stopped
        if (WriteDoc(out->get(), bson, raw, &json, &error)) {
          ++written;
        } else if (std::ferror(out->get())) {
          write_error = error;
        } else {
          ++unwritable;
        }
      },
      &report);
  if (s.IsNotFound()) {
    return Fail(kExitNotFound, "export",
                "no collection " + Quote(c.collection));
  }
  if (!s.ok()) return FailStatus(what, s);
  std::string close_error;
  if (!write_error.empty())
    return Fail(kExitBadInput, "export: write", write_error);
  if (!out->Close(&close_error))
    return Fail(kExitBadInput, "export: write", close_error);

  const uint64_t lost = report.lost + unwritable;
  std::string summary = "wrote " + std::to_string(written) + " documents; ";
  summary += report.lost_known ? std::to_string(lost) + " could not be read"
                               : "an unknown number could not be read";
  if (report.damaged_pages > 0) {
    summary += "; " + std::to_string(report.damaged_pages) +
               " damaged page(s) skipped";
  }
  if (!report.problems.empty()) {
    summary += " (first problem: " + report.problems[0] + ")";
  } else if (unwritable > 0) {
    summary += " (first problem: " + error + ")";
  }
  Fail(kExitOk, what, summary);
  const bool complete = report.lost_known && lost == 0 &&
                        report.damaged_pages == 0 && report.problems.empty();
  return complete ? kExitOk : kExitNotFound;
}

}  // namespace

int RunInsert(const CommonArgs& c, const InsertArgs& a) {
  int code = kExitOk;
  auto db = OpenDb(c, /*create=*/true, &code);
  if (!db) return code;
  Loader loader(db.get(), c.collection, a.batch, a.echo);
  std::string line;
  uint64_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (IsBlank(line)) continue;
    auto doc = Document::FromJson(line);
    if (!doc.ok()) {
      return FailInsert(&loader, "line " + std::to_string(line_no),
                        JsonError(doc.status()));
    }
    Status s = loader.Add(*doc);
    if (!s.ok())
      return FailInsert(&loader, "line " + std::to_string(line_no),
                        Describe(s));
  }
  if (std::cin.bad()) return FailInsert(&loader, "stdin", "read error");
  Status s = loader.Flush();
  if (!s.ok()) return FailStatus("commit", s);
  return kExitOk;
}

int RunGet(const CommonArgs& c, const std::string& id_arg) {
  auto id = Value::FromJson(id_arg);
  if (!id.ok()) {
    // A bare word is a string; something that meant to be JSON is an error.
    size_t i = id_arg.find_first_not_of(" \t");
    if (i != std::string::npos && std::strchr("{[\"", id_arg[i]) != nullptr) {
      return Fail(kExitBadInput, "id",
                  JsonError(id.status()) + " in " + id_arg);
    }
    id = Value::String(id_arg);
  }
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto doc = db->Get(c.collection, *id);
  if (!doc.ok()) {
    if (doc.status().IsNotFound()) {
      return Fail(kExitNotFound, "get",
                  "no document with _id " + id->ToJson() + " in collection " +
                      Quote(c.collection));
    }
    return FailStatus("get", doc.status());
  }
  std::string json;
  if (!BsonToJson(doc->data(), doc->size(), &json)) {
    return Fail(kExitBadInput, "get", "document cannot be written as JSON");
  }
  std::printf("%s\n", json.c_str());
  return kExitOk;
}

int RunFind(const CommonArgs& c, const FindArgs& a) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", a.filter, &code);
  if (!filter) return code;
  FindOptions options;
  if (!a.sort.empty() && !ParseSort(a.sort, &options)) {
    return Fail(
        kExitBadInput, "sort",
        "expected FIELD, -FIELD, FIELD:1 or FIELD:-1, got " + Quote(a.sort));
  }
  for (const auto& [name, value] :
       {std::pair{"--limit", a.limit}, std::pair{"--skip", a.skip}}) {
    if (value < 0) {
      return Fail(kExitBadInput, "find",
                  std::string(name) + " must not be negative, got " +
                      std::to_string(value));
    }
  }
  options.limit = static_cast<decltype(options.limit)>(a.limit);
  options.skip = static_cast<decltype(options.skip)>(a.skip);
  // Checked here too, not only by the API: an exclusion (-FIELD) or an
  // operator must not quietly project nothing but _id.
  for (const std::string& field : a.project) {
    std::string problem =
        !field.empty() && field[0] == '-'
            ? "excluding fields (-FIELD) is not supported; name the fields to "
              "keep"
            : FieldPathProblem(field);
    if (!problem.empty()) {
      return Fail(kExitBadInput, "find",
                  "--project " + Quote(field) + ": " + problem);
    }
  }
  options.projection = a.project;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto txn = db->BeginRead();
  if (!txn.ok()) return FailStatus("find", txn.status());
  if (a.explain) {
    auto info = (*txn)->Explain(c.collection, *filter, options);
    if (!info.ok()) return FailStatus("find", info.status());
    std::printf("%s\n", info->ToJson().c_str());
    return kExitOk;
  }
  auto cursor = (*txn)->Find(c.collection, *filter, options);
  if (!cursor.ok()) return FailStatus("find", cursor.status());
  std::string json;
  std::string error;
  while ((*cursor)->Next()) {
    if (!WriteDoc(stdout, false, (*cursor)->raw(), &json, &error)) {
      return Fail(kExitBadInput, "find", error);
    }
  }
  if (!(*cursor)->status().ok()) return FailStatus("find", (*cursor)->status());
  return kExitOk;
}

int RunUpdate(const CommonArgs& c, const std::string& filter_json,
              const std::string& update_json, bool many) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto update = ParseDocArg("update", update_json, &code);
  if (!update) return code;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto r = db->Update(c.collection, *filter, *update, many);
  if (!r.ok()) return FailStatus("update", r.status());
  std::printf("{\"matched\": %llu, \"modified\": %llu}\n",
              static_cast<unsigned long long>(r->matched),
              static_cast<unsigned long long>(r->modified));
  return kExitOk;
}

int RunDelete(const CommonArgs& c, const std::string& filter_json, bool many) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto r = db->DeleteMany(c.collection, *filter, many);
  if (!r.ok()) return FailStatus("delete", r.status());
  std::printf("{\"deleted\": %llu}\n", static_cast<unsigned long long>(*r));
  return kExitOk;
}

int RunCount(const CommonArgs& c, const std::string& filter_json) {
  int code = kExitOk;
  auto filter = ParseDocArg("filter", filter_json, &code);
  if (!filter) return code;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto r = db->Count(c.collection, *filter);
  if (!r.ok()) return FailStatus("count", r.status());
  std::printf("%llu\n", static_cast<unsigned long long>(*r));
  return kExitOk;
}

int RunIndexCreate(const CommonArgs& c, const std::string& field, bool unique) {
  const std::string what =
      field.empty() ? "index create" : "index create " + field;
  // MongoDB allows ',' in a field name, but 'a,b' here means a compound
  // index far more often than a field named "a,b".
  if (field.find(',') != std::string::npos) {
    return Fail(kExitBadInput, what,
                "compound indexes are not supported (index one field; a "
                "field name with ',' is refused for the same reason)");
  }
  if (std::string problem = FieldPathProblem(field); !problem.empty())
    return Fail(kExitBadInput, what, problem);
  int code = kExitOk;
  auto db = OpenDb(c, true, &code);
  if (!db) return code;
  IndexOptions options;
  options.unique = unique;
  Status s = db->CreateIndex(c.collection, field, options);
  if (!s.ok()) return FailStatus(what, s);
  return kExitOk;
}

int RunIndexDrop(const CommonArgs& c, const std::string& field) {
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  Status s = db->DropIndex(c.collection, field);
  if (!s.ok()) return FailStatus("index drop " + field, s);
  return kExitOk;
}

int RunIndexList(const CommonArgs& c) {
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto r = db->ListIndexes(c.collection);
  if (!r.ok()) return FailStatus("index list", r.status());
  for (const IndexInfo& index : *r) {
    bson_t b = BSON_INITIALIZER;
    bson_append_utf8(&b, "field", 5, index.field.data(),
                     static_cast<int>(index.field.size()));
    bson_append_bool(&b, "unique", 6, index.unique);
    bson_append_int64(&b, "entries", 7, static_cast<int64_t>(index.entries));
    std::string json;
    BsonToJson(bson_get_data(&b), b.len, &json);
    bson_destroy(&b);
    std::printf("%s\n", json.c_str());
  }
  return kExitOk;
}

int RunImport(const CommonArgs& c, const ImportArgs& a) {
  const std::string what = a.file;
  if (IsDirectory(a.file)) return Fail(kExitBadInput, what, "is a directory");
  FILE* in = std::fopen(a.file.c_str(), "rb");
  if (in == nullptr) return Fail(kExitBadInput, what, std::strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE*)> closer(in, &std::fclose);
  uint64_t size = FileSize(a.file);

  std::string head(4096, '\0');
  head.resize(std::fread(head.data(), 1, head.size(), in));
  std::rewind(in);
  InputFormat format = SniffFormat(head, size);
  if (format == InputFormat::kEmpty)
    return Fail(kExitBadInput, what, "file is empty");
  if (a.format == "bson" || (a.format == "auto" && EndsWith(a.file, ".bson"))) {
    format = InputFormat::kBson;
  } else if (a.format == "json") {
    format = InputFormat::kJson;
  }
  if (format == InputFormat::kJsonArray) {
    return Fail(kExitBadInput, what,
                "a JSON array; give one document per line (as mongoexport "
                "writes without "
                "--jsonArray)");
  }
  if (format == InputFormat::kUnknown) {
    return Fail(kExitBadInput, what,
                "neither JSON lines nor BSON documents (binary data at the "
                "start of the file)");
  }

  int code = kExitOk;
  auto db = OpenDb(c, true, &code);
  if (!db) return code;
  Loader loader(db.get(), c.collection, a.batch, false);
  Progress progress("import", size, a.progress && isatty(STDERR_FILENO));
  code = format == InputFormat::kBson
             ? ImportBson(in, what, &loader, &progress)
             : ImportJson(in, what, &loader, &progress);
  if (code != kExitOk) return code;
  Status s = loader.Flush();
  progress.Finish();
  if (!s.ok()) return FailStatus("import: commit", s);
  if (a.progress && isatty(STDERR_FILENO)) {
    std::fprintf(stderr, "imported %llu documents into %s\n",
                 static_cast<unsigned long long>(loader.inserted()),
                 c.collection.c_str());
  }
  return kExitOk;
}

int RunExport(const CommonArgs& c, const ExportArgs& a) {
  const bool bson = a.format == "bson";
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  // A missing collection is "not found" (exit 1), salvage or not, and
  // leaves no output file behind. A catalog that cannot be read is damage
  // for --salvage to read past.
  auto collections = db->ListCollections();
  if (collections.ok()) {
    bool found = false;
    for (const std::string& name : *collections)
      found = found || name == c.collection;
    if (!found)
      return Fail(kExitNotFound, "export",
                  "no collection " + Quote(c.collection));
  } else if (!a.salvage) {
    return FailStatus("export", collections.status());
  }
  Output out;
  std::string error;
  if (!out.Open(a.output, &error)) return Fail(kExitBadInput, a.output, error);
  if (bson && out.is_terminal()) {
    return Fail(
        kExitBadInput, "export",
        "will not write BSON to a terminal; use -o FILE or redirect stdout");
  }
  if (a.salvage) return Salvage(db.get(), c, &out, bson);

  auto txn = db->BeginRead();
  if (!txn.ok()) return FailStatus("export", txn.status());
  auto total = (*txn)->Count(c.collection, Document());
  Progress progress("export", total.ok() ? *total : 0,
                    a.progress && isatty(STDERR_FILENO));
  auto cursor = (*txn)->Find(c.collection, Document());
  if (!cursor.ok()) return FailStatus("export", cursor.status());
  std::string json;
  uint64_t n = 0;
  while ((*cursor)->Next()) {
    if (!WriteDoc(out.get(), bson, (*cursor)->raw(), &json, &error)) {
      return Fail(kExitBadInput, "export", error);
    }
    ++n;
    progress.Update(n, n);
  }
  progress.Finish();
  if (!(*cursor)->status().ok()) {
    return Fail(kExitBadInput, "export",
                Describe((*cursor)->status()) + " (after " + std::to_string(n) +
                    " documents; try export --salvage)");
  }
  if (!out.Close(&error)) return Fail(kExitBadInput, "export: write", error);
  return kExitOk;
}

int RunStats(const CommonArgs& c, bool json) {
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  auto r = db->Stats();
  if (!r.ok()) return FailStatus("stats", r.status());
  DBStats& s = *r;
  if (c.collection_given) {
    auto it = std::find_if(
        s.collections.begin(), s.collections.end(),
        [&](const CollectionStats& cs) { return cs.name == c.collection; });
    if (it == s.collections.end()) {
      return Fail(kExitNotFound, "stats",
                  "no collection " + Quote(c.collection));
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
  std::printf("file size     %llu bytes (%llu pages of %u bytes, %llu free)\n",
              u(s.file_size), u(s.page_count), s.page_size, u(s.free_pages));
  std::printf("log size      %llu bytes\n", u(s.log_size));
  std::printf("fill factor   %.1f%%\n", s.fill_factor * 100);
  std::printf("last txid     %llu\n", u(s.txid));
  if (s.readers > 0) {
    std::printf("readers       %llu (oldest at txid %llu)\n", u(s.readers),
                u(s.oldest_reader_txid));
  }
  std::printf("\n%-24s %12s %12s\n", "collection / index", "documents",
              "pages");
  for (const CollectionStats& cs : s.collections) {
    std::printf("%-24s %12llu %12llu\n", cs.name.c_str(), u(cs.documents),
                u(cs.data_pages));
    for (size_t i = 0; i < cs.indexes.size(); ++i) {
      const IndexInfo& ix = cs.indexes[i];
      std::string label = "  " + ix.field + (ix.unique ? " (unique)" : "");
      uint64_t pages = i < cs.index_pages.size() ? cs.index_pages[i] : 0;
      std::printf("%-24s %12llu %12llu\n", label.c_str(), u(ix.entries),
                  u(pages));
    }
  }
  return kExitOk;
}

int RunCheck(const CommonArgs& c) {
  const std::string what = "check " + c.db;
  int code = kExitOk;
  if (!CheckDbPath(c.db, false, what, &code)) return code;
  Options options;
  options.create_if_missing = false;
  auto db = DB::Open(c.db, options);
  if (!db.ok()) {
    // A file too damaged to open fails the check; anything else (locked,
    // unreadable) is an error running it.
    if (db.status().IsCorruption()) {
      std::printf("problem: %s\n", db.status().message().c_str());
      return Fail(kExitNotFound, what,
                  "cannot open: " + db.status().ToString());
    }
    return Fail(kExitBadInput, what, Describe(db.status()));
  }
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
  for (const std::string& p : report.problems)
    std::printf("problem: %s\n", p.c_str());
  return Fail(kExitNotFound, what,
              std::to_string(report.problems.size()) +
                  " problem(s) found; first: " + report.problems[0]);
}

int RunCompact(const CommonArgs& c) {
  int code = kExitOk;
  auto db = OpenDb(c, false, &code);
  if (!db) return code;
  uint64_t before = FileSize(c.db);
  Status s = (*db).Compact();
  if (!s.ok()) return FailStatus("compact", s);
  std::printf("compacted %s: %llu -> %llu bytes\n", c.db.c_str(),
              static_cast<unsigned long long>(before),
              static_cast<unsigned long long>(FileSize(c.db)));
  return kExitOk;
}

}  // namespace mmdoc::tool
