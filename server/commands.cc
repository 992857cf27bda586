#include "server/commands.h"

#include <bson/bson.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/wire.h"

namespace mmdoc::server {
namespace {

// What the server tells drivers in hello: MongoDB 4.4's wire version, the
// newest that both python3-pymongo 3.11 (2..9) and libmongoc 1.23 (6..)
// in Debian 12 accept, and MongoDB's own size limits.
constexpr int32_t kMinWireVersion = 0;
constexpr int32_t kMaxWireVersion = 9;
constexpr int32_t kMaxBsonObjectSize = 16 * 1024 * 1024;
constexpr int32_t kMaxWriteBatchSize = 100000;
// MongoDB's default first batch of find and aggregate.
constexpr int64_t kDefaultFirstBatch = 101;
// A batch holds at most this many bytes of documents (MongoDB's limit).
constexpr size_t kMaxBatchBytes = 16 * 1024 * 1024;

const char* CodeName(int code) {
  switch (code) {
    case 1:
      return "InternalError";
    case 2:
      return "BadValue";
    case 9:
      return "FailedToParse";
    case 14:
      return "TypeMismatch";
    case 20:
      return "IllegalOperation";
    case 22:
      return "InvalidBSON";
    case 40:
      return "ConflictingUpdateOperators";
    case 66:
      return "ImmutableField";
    case 26:
      return "NamespaceNotFound";
    case 27:
      return "IndexNotFound";
    case 43:
      return "CursorNotFound";
    case 48:
      return "NamespaceExists";
    case 59:
      return "CommandNotFound";
    case 67:
      return "CannotCreateIndex";
    case 72:
      return "InvalidOptions";
    case 73:
      return "InvalidNamespace";
    case 85:
      return "IndexOptionsConflict";
    case 171:
      return "CannotIndexParallelArrays";
    case 31250:
      return "Location31250";
    case 11000:
      return "DuplicateKey";
    case 14031:
      return "OutOfDiskSpace";
  }
  return "UnknownError";
}

// The MongoDB code of an InvalidArgument whose kind MongoDB names with a
// code of its own (drivers and applications test some of them); 2
// (BadValue) for the rest. By the engine's and this file's messages.
int InvalidArgumentCode(const Status& s) {
  static const struct {
    const char* text;
    int code;
  } kKinds[] = {
      {"must be a boolean", 14},
      {"on a non-number field", 14},
      {"immutable field _id", 66},
      {"replacement changes _id", 66},
      {"conflicting update paths", 40},
      {"cannot index parallel arrays", 171},
      {"projection path collision", 31250},
      {"unknown update operator", 9},
  };
  const std::string& m = s.message();
  for (const auto& k : kKinds) {
    if (m.find(k.text) != std::string::npos) return k.code;
  }
  return 2;
}

// The MongoDB error code for an engine error.
int CodeFor(const Status& s) {
  switch (s.code()) {
    case Status::Code::kAlreadyExists:
      return 11000;
    case Status::Code::kInvalidArgument:
      return InvalidArgumentCode(s);
    case Status::Code::kNotFound:
      return 26;
    case Status::Code::kFull:
      return 14031;
    default:
      return 1;
  }
}

std::string Bytes(const bson_t* b) {
  return std::string(reinterpret_cast<const char*>(bson_get_data(b)), b->len);
}

// Takes `b` (initialized) and returns its bytes, destroying it.
std::string Finish(bson_t* b) {
  std::string out = Bytes(b);
  bson_destroy(b);
  return out;
}

std::string Error(int code, const std::string& message) {
  bson_t b;
  bson_init(&b);
  BSON_APPEND_DOUBLE(&b, "ok", 0.0);
  BSON_APPEND_UTF8(&b, "errmsg", message.c_str());
  BSON_APPEND_INT32(&b, "code", code);
  BSON_APPEND_UTF8(&b, "codeName", CodeName(code));
  return Finish(&b);
}

std::string ErrorFor(const Status& s) { return Error(CodeFor(s), s.ToString()); }

std::string Ok() {
  bson_t b;
  bson_init(&b);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string MongoIndexName(const std::vector<IndexKey>& keys);

// A write's error as MongoDB reports it: its code, errmsg and, for a
// duplicate key, the writeError's keyPattern and keyValue (BSON bytes;
// empty otherwise).
struct WriteError {
  int code = 0;
  std::string message;
  std::string key_pattern;
  std::string key_value;
};

// The BSON of {field: value} for each of `keys`, from `values` (the
// engine's JSON of the key: one value for one field, else an object).
bool KeyDocuments(const std::vector<IndexKey>& keys, const std::string& values,
                  std::string* pattern, std::string* value) {
  bson_t p, v;
  bson_init(&p);
  bson_init(&v);
  bool ok = true;
  if (keys.size() == 1) {
    auto one = Value::FromJson(values);
    ok = one.ok();
    if (ok) bson_append_value(&v, keys[0].field.c_str(), -1, one->get());
  } else {
    auto all = Document::FromJson(values);
    ok = all.ok();
    if (ok) {
      bson_t view;
      all->View(&view);
      bson_concat(&v, &view);
    }
  }
  for (const IndexKey& k : keys) BSON_APPEND_INT32(&p, k.field.c_str(), k.direction);
  *pattern = Finish(&p);
  *value = Finish(&v);
  return ok;
}

// MongoDB's shell-like rendering of a key for the errmsg: { a: 1, b: "x" }.
std::string DupKeyText(const std::string& key_value) {
  auto doc =
      Document::FromBson(reinterpret_cast<const uint8_t*>(key_value.data()), key_value.size());
  if (!doc.ok()) return "{}";
  bson_t view;
  doc->View(&view);
  bson_iter_t it;
  std::string out = "{";
  if (bson_iter_init(&it, &view)) {
    while (bson_iter_next(&it)) {
      out += std::string(out.size() > 1 ? ", " : " ") + bson_iter_key(&it) + ": " +
             Value::FromBsonValue(bson_iter_value(&it)).ToJson();
    }
  }
  return out + " }";
}

// The errmsg MongoDB gives a duplicate key ("E11000 duplicate key error
// collection: db.c index: email_1 dup key: { email: "a@x" }"), which
// tools match on, with keyPattern and keyValue; from the engine's messages
// ("duplicate _id: <json>", "duplicate key in unique index '<name>':
// <json>") and the collection's indexes (`indexes`, asked only then).
WriteError WriteErrorFor(const Status& s, const std::string& ns,
                         const std::function<Result<std::vector<IndexInfo>>()>& indexes) {
  WriteError e;
  e.code = CodeFor(s);
  e.message = s.ToString();
  if (!s.IsAlreadyExists()) return e;
  const std::string& m = s.message();
  static const std::string kId = "duplicate _id: ";
  static const std::string kIndex = "duplicate key in unique index '";
  std::vector<IndexKey> keys;
  std::string name, values;
  if (m.compare(0, kId.size(), kId) == 0) {
    keys = {IndexKey{"_id", 1}};
    name = "_id_";
    values = m.substr(kId.size());
  } else if (m.compare(0, kIndex.size(), kIndex) == 0) {
    const size_t end = m.find("': ", kIndex.size());
    if (end != std::string::npos) {
      const std::string field = m.substr(kIndex.size(), end - kIndex.size());
      auto all = indexes();
      if (all.ok()) {
        for (const IndexInfo& i : *all) {
          if (i.field == field) keys = i.keys;
        }
      }
      if (keys.empty()) keys = {IndexKey{field, 1}};
      name = MongoIndexName(keys);
      values = m.substr(end + 3);
    }
  }
  if (keys.empty() || !KeyDocuments(keys, values, &e.key_pattern, &e.key_value)) {
    e.message = "E11000 duplicate key error collection: " + ns + " " + m;
    e.key_pattern.clear();
    e.key_value.clear();
    return e;
  }
  e.message = "E11000 duplicate key error collection: " + ns + " index: " + name +
              " dup key: " + DupKeyText(e.key_value);
  return e;
}

// Appends a WriteError's fields to a writeError or an error reply.
void AppendWriteError(bson_t* b, const WriteError& e) {
  BSON_APPEND_INT32(b, "code", e.code);
  BSON_APPEND_UTF8(b, "codeName", CodeName(e.code));
  BSON_APPEND_UTF8(b, "errmsg", e.message.c_str());
  for (const auto& [key, bytes] :
       {std::pair<const char*, const std::string*>{"keyPattern", &e.key_pattern},
        {"keyValue", &e.key_value}}) {
    if (bytes->empty()) continue;
    bson_t d;
    if (bson_init_static(&d, reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()))
      BSON_APPEND_DOCUMENT(b, key, &d);
  }
}

Document Sub(const bson_iter_t* it) {
  uint32_t n = 0;
  const uint8_t* data = nullptr;
  if (BSON_ITER_HOLDS_DOCUMENT(it)) {
    bson_iter_document(it, &n, &data);
  } else {
    bson_iter_array(it, &n, &data);
  }
  // The whole command was validated when it was parsed.
  return Document::FromTrustedBytes(std::string(reinterpret_cast<const char*>(data), n));
}

// TooLargeSize of the document `it` holds, read in place.
size_t TooLargeSize(const bson_iter_t& it) {
  uint32_t n = 0;
  const uint8_t* data = nullptr;
  bson_iter_document(&it, &n, &data);
  return data == nullptr ? 0 : server::TooLargeSize(data, n);
}

// Whether the document `it` holds is a TooDeepMarker.
bool IsTooDeep(const bson_iter_t& it) {
  uint32_t n = 0;
  const uint8_t* data = nullptr;
  bson_iter_document(&it, &n, &data);
  return data != nullptr && server::IsTooDeep(data, n);
}

bool Lookup(const bson_t* cmd, const char* key, bson_iter_t* it) {
  return bson_iter_init_find(it, cmd, key);
}

// A string value whole: BSON strings may hold NUL, and a name cut at one
// would address another collection.
std::string Utf8(const bson_iter_t* it) {
  uint32_t len = 0;
  const char* s = bson_iter_utf8(it, &len);
  return std::string(s, len);
}

// A number field as int64 (MongoDB accepts int32, int64 and whole doubles).
std::optional<int64_t> Int(const bson_iter_t* it) {
  if (BSON_ITER_HOLDS_INT32(it)) return bson_iter_int32(it);
  if (BSON_ITER_HOLDS_INT64(it)) return bson_iter_int64(it);
  if (BSON_ITER_HOLDS_DOUBLE(it)) {
    double d = bson_iter_double(it);
    if (d >= -9.2e18 && d <= 9.2e18 && d == static_cast<double>(static_cast<int64_t>(d))) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

// A boolean option (upsert, multi, ordered, unique, ...) as MongoDB reads
// one: a bool or a number (non-zero is true); null is false, as absent.
// Anything else, the string "false" among them, is nullopt: refused, never
// taken as true.
std::optional<bool> Flag(const bson_iter_t* it) {
  switch (bson_iter_type(it)) {
    case BSON_TYPE_BOOL:
      return bson_iter_bool(it);
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
      return bson_iter_as_bool(it);  // a NaN is true, as MongoDB's
    case BSON_TYPE_DECIMAL128: {
      bson_decimal128_t d;
      bson_iter_decimal128(it, &d);
      char text[BSON_DECIMAL128_STRING];
      bson_decimal128_to_string(&d, text);
      return std::strtod(text, nullptr) != 0.0;  // NaN != 0 too
    }
    case BSON_TYPE_NULL:
    case BSON_TYPE_UNDEFINED:
      return false;
    default:
      return std::nullopt;
  }
}

// Reads the boolean option `key` of `doc` into *out, which is left alone
// when it is absent. Returns "" or the error reply (14 TypeMismatch).
std::string ReadFlag(const bson_t* doc, const char* command, const char* key, bool* out) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key)) return "";
  auto v = Flag(&it);
  if (!v) return Error(14, std::string(command) + ": " + key + " must be a boolean");
  *out = *v;
  return "";
}

// MongoDB's projection document as FindOptions::projection: {a: 1} is "a",
// {a: 0} is "-a". Returns "" or why it cannot be one.
std::string ProjectionFields(const Document& proj, std::vector<std::string>* out) {
  bson_t pv;
  proj.View(&pv);
  bson_iter_t p;
  if (!bson_iter_init(&p, &pv)) return "projection is not a valid document";
  while (bson_iter_next(&p)) {
    std::string key = bson_iter_key(&p);
    if (!BSON_ITER_HOLDS_BOOL(&p) && !BSON_ITER_HOLDS_NUMBER(&p)) {
      return "projection values must be 1 or 0 (true or false); $slice, $elemMatch and "
             "expressions are not supported, in " +
             proj.ToJson();
    }
    // The engine reads "-a" as {a: 0}: refused rather than misread.
    if (!key.empty() && key[0] == '-')
      return "projecting a field whose name starts with '-' is not supported: " + key;
    out->push_back(Flag(&p).value_or(true) ? key : "-" + key);
  }
  return "";
}

// An optional document field (query, sort): absent or null is {}, any
// other type an error (MongoDB's 14 TypeMismatch), never read as {}.
std::optional<Document> OptionalDoc(const bson_t* cmd, const char* command, const char* key,
                                    std::string* error) {
  bson_iter_t it;
  if (!Lookup(cmd, key, &it) || BSON_ITER_HOLDS_NULL(&it)) return Document();
  if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
    *error = Error(14, std::string(command) + ": " + key + " must be a document");
    return std::nullopt;
  }
  return Sub(&it);
}

// A statement's q: a document, required (an absent or mistyped one must not
// become {}, which matches everything).
Status StatementQuery(const bson_t* statement, const char* command, Document* q) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, statement, "q")) {
    return Status::InvalidArgument(std::string(command) + ": statement without q");
  }
  if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
    return Status::InvalidArgument(std::string(command) + ": q must be a document");
  }
  *q = Sub(&it);
  return Status::OK();
}

// Fields any command may carry that change nothing here: the driver's
// session, cluster time, read preference and API version, and a comment or
// time limit. (readConcern and writeConcern are checked where they apply.)
bool GenericField(std::string_view key) {
  for (std::string_view f :
       {"$db", "lsid", "$clusterTime", "$readPreference", "comment", "maxTimeMS", "readConcern",
        "writeConcern", "apiVersion", "apiStrict", "apiDeprecationErrors"}) {
    if (key == f) return true;
  }
  return false;
}

// The first field of `doc` that neither `known` nor (for a command, whose
// first field is its name) GenericField takes; "" when every one is known.
// MongoDB's parsers refuse an unknown field, so that a typo ("upset") is
// never a silent no-op.
std::string UnknownField(const bson_t* doc, std::initializer_list<std::string_view> known,
                         bool command) {
  bson_iter_t it;
  if (!bson_iter_init(&it, doc)) return "";
  bool first = command;
  while (bson_iter_next(&it)) {
    const std::string_view key(bson_iter_key(&it), bson_iter_key_len(&it));
    if (std::exchange(first, false) || (command && GenericField(key))) continue;
    if (std::find(known.begin(), known.end(), key) == known.end()) return std::string(key);
  }
  return "";
}

// Why "db.coll" is not a namespace this server takes, or "".
std::string NamespaceProblem(const std::string& db, const std::string& coll) {
  if (db.empty() || db.find_first_of(std::string_view("./\\ \"$\0", 7)) != std::string::npos) {
    return "invalid database name \"" + db + "\"";
  }
  if (coll.empty() || coll.find_first_of(std::string_view("$\0", 2)) != std::string::npos) {
    return "invalid collection name \"" + coll + "\"";
  }
  return "";
}

// The collection a command names by its first value, as "db.coll"; an
// error reply in *error otherwise. A command that writes may not name a
// system collection ("system.*"), as in MongoDB.
std::optional<std::string> Namespace(const std::string& db, const bson_t* cmd, std::string* error,
                                     bool write = false) {
  bson_iter_t it;
  if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_UTF8(&it)) {
    *error = Error(73, "the command's first value must be a collection name (a string)");
    return std::nullopt;
  }
  std::string coll = Utf8(&it);
  std::string problem = NamespaceProblem(db, coll);
  if (problem.empty() && write && coll.compare(0, 7, "system.") == 0) {
    problem = "cannot write to '" + db + "." + coll + "': a system collection";
  }
  if (!problem.empty()) {
    *error = Error(73, problem);
    return std::nullopt;
  }
  return db + "." + coll;
}

// Appends {id, ns, <batch_name>: [docs]} as "cursor".
void AppendCursor(bson_t* reply, int64_t id, const std::string& ns, const char* batch_name,
                  const bson_t* batch) {
  bson_t cursor;
  BSON_APPEND_DOCUMENT_BEGIN(reply, "cursor", &cursor);
  BSON_APPEND_INT64(&cursor, "id", id);
  BSON_APPEND_UTF8(&cursor, "ns", ns.c_str());
  BSON_APPEND_ARRAY(&cursor, batch_name, batch);
  bson_append_document_end(reply, &cursor);
}

// A reply {cursor: {id: 0, ns, firstBatch: docs}, ok: 1} for results that
// are never large (collections, indexes, a count).
std::string OneBatch(const std::string& ns, const std::vector<std::string>& docs) {
  bson_t arr;
  bson_init(&arr);
  for (size_t i = 0; i < docs.size(); i++) {
    bson_t d;
    bson_init_static(&d, reinterpret_cast<const uint8_t*>(docs[i].data()), docs[i].size());
    std::string key = std::to_string(i);
    bson_append_document(&arr, key.c_str(), static_cast<int>(key.size()), &d);
  }
  bson_t b;
  bson_init(&b);
  AppendCursor(&b, 0, ns, "firstBatch", &arr);
  bson_destroy(&arr);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

// MongoDB's default index name, "<field>_<dir>" joined by '_' ("a_1_b_-1").
std::string MongoIndexName(const std::vector<IndexKey>& keys) {
  std::string name;
  for (const IndexKey& k : keys) {
    if (!name.empty()) name += "_";
    name += k.field + "_" + std::to_string(k.direction);
  }
  return name;
}

// The listIndexes entry of an index ({v, key, name, unique, sparse,
// partialFilterExpression}); keys empty: the _id index.
std::string IndexSpec(const std::string& ns, const IndexInfo* info) {
  bson_t b;
  bson_init(&b);
  BSON_APPEND_INT32(&b, "v", 2);
  bson_t key;
  BSON_APPEND_DOCUMENT_BEGIN(&b, "key", &key);
  if (info == nullptr) {
    BSON_APPEND_INT32(&key, "_id", 1);
  } else {
    for (const IndexKey& k : info->keys) BSON_APPEND_INT32(&key, k.field.c_str(), k.direction);
  }
  bson_append_document_end(&b, &key);
  BSON_APPEND_UTF8(&b, "name", info == nullptr ? "_id_" : MongoIndexName(info->keys).c_str());
  if (info != nullptr && info->unique) BSON_APPEND_BOOL(&b, "unique", true);
  if (info != nullptr && info->sparse) BSON_APPEND_BOOL(&b, "sparse", true);
  if (info != nullptr && !info->partial_filter.empty()) {
    auto pf = Document::FromJson(info->partial_filter);
    if (pf.ok()) {
      bson_t v;
      pf->View(&v);
      BSON_APPEND_DOCUMENT(&b, "partialFilterExpression", &v);
    }
  }
  BSON_APPEND_UTF8(&b, "ns", ns.c_str());
  return Finish(&b);
}

// The key pattern {field: 1 or -1, ...}; empty with *error set otherwise
// (text, 2dsphere, hashed and other special keys are refused).
std::vector<IndexKey> KeyPattern(const bson_iter_t* key_it, std::string* error) {
  if (!BSON_ITER_HOLDS_DOCUMENT(key_it)) {
    *error = "index key must be a document";
    return {};
  }
  Document key = Sub(key_it);
  bson_t k;
  key.View(&k);
  bson_iter_t it;
  std::vector<IndexKey> keys;
  if (bson_iter_init(&it, &k)) {
    while (bson_iter_next(&it)) {
      auto dir = Int(&it);
      if (!dir || (*dir != 1 && *dir != -1)) {
        *error = "only ascending (1) and descending (-1) keys are supported, not " + key.ToJson();
        return {};
      }
      keys.push_back(IndexKey{bson_iter_key(&it), static_cast<int>(*dir)});
    }
  }
  if (keys.empty()) *error = "index key is empty";
  return keys;
}

bool SameKeys(const std::vector<IndexKey>& a, const std::vector<IndexKey>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i].field != b[i].field || a[i].direction != b[i].direction) return false;
  }
  return true;
}

// The document less its top-level _id.
Document WithoutId(const Document& d) {
  bson_t view;
  d.View(&view);
  bson_t out;
  bson_init(&out);
  bson_copy_to_excluding_noinit(&view, &out, "_id", nullptr);
  Document result = Document::FromTrustedBytes(
      std::string(reinterpret_cast<const char*>(bson_get_data(&out)), out.len));
  bson_destroy(&out);
  return result;
}

// "" when the read concern is one every read here keeps: each reads a
// snapshot of committed writes, so local, available and majority (a
// standalone's) hold; snapshot, linearizable and cluster times do not.
std::string ReadConcernProblem(const bson_iter_t* rc) {
  if (!BSON_ITER_HOLDS_DOCUMENT(rc)) return "readConcern must be a document";
  bson_iter_t f;
  if (!bson_iter_recurse(rc, &f)) return "readConcern is not a valid document";
  while (bson_iter_next(&f)) {
    const std::string key = bson_iter_key(&f);
    if (key == "provenance") continue;
    if (key != "level") return "readConcern " + key + " is not supported";
    if (!BSON_ITER_HOLDS_UTF8(&f)) return "readConcern level must be a string";
    const std::string level = Utf8(&f);
    if (level != "local" && level != "available" && level != "majority") {
      return "readConcern level " + level +
             " is not supported (local, available and majority are; there are no transactions)";
    }
  }
  return "";
}

}  // namespace

struct Commands::ServerCursor {
  int64_t id = 0;
  std::string ns;
  std::unique_ptr<Transaction> txn;  // the snapshot the cursor reads
  std::unique_ptr<Cursor> cursor;
  bool pending = false;  // the cursor is on a document no batch took yet
  bool in_use = false;   // a getMore is reading it
  std::chrono::steady_clock::time_point last_used;
  int64_t connection = 0;  // the connection that opened it
  bool orphaned = false;   // that connection is closed
};

Commands::Commands(DB* db, const CommandOptions& options)
    : db_(db), options_(options), rng_(std::random_device{}()) {}

Commands::~Commands() { CloseAllCursors(); }

std::string Commands::ErrorReply(int code, const std::string& message) {
  return Error(code, message);
}

std::string Commands::Run(const Request& request, int64_t connection_id) {
  bson_t cmd;
  request.command.View(&cmd);
  bson_iter_t it;
  if (!bson_iter_init(&it, &cmd) || !bson_iter_next(&it)) {
    return Error(59, "empty command document");
  }
  std::string name = bson_iter_key(&it);
  // No sessions or replicas: a transaction or a read concern this server
  // cannot keep is refused, never run as a plain command (whose writes
  // would stand after an abortTransaction).
  for (const char* field : {"txnNumber", "startTransaction", "autocommit"}) {
    if (Lookup(&cmd, field, &it)) {
      return Error(20,
                   "Transaction numbers are only allowed on a replica set member or mongos "
                   "(mmdoc serve has no transactions; " +
                       std::string(field) + " given)");
    }
  }
  if (Lookup(&cmd, "readConcern", &it)) {
    std::string problem = ReadConcernProblem(&it);
    if (!problem.empty()) return Error(72, name + ": " + problem);
  }
  return Dispatch(name, request, connection_id);
}

std::string Commands::Dispatch(const std::string& name, const Request& request,
                               int64_t connection_id) {
  bson_t cmd;
  request.command.View(&cmd);
  const std::string& db = request.database;
  if (name == "hello" || name == "isMaster" || name == "ismaster") {
    return Hello(name, connection_id);
  }
  if (name == "ping") return Ok();
  if (name == "buildInfo" || name == "buildinfo") return BuildInfo();
  if (name == "endSessions") return Ok();  // hello gives no sessions; nothing to end
  if (name == "listDatabases") return ListDatabases(&cmd);
  if (name == "listCollections") return ListCollections(db, &cmd);
  if (name == "create") return Create(db, &cmd);
  if (name == "drop") return Drop(db, &cmd);
  if (name == "dropDatabase") return DropDatabase(db);
  if (name == "insert") return Insert(db, &cmd);
  if (name == "update") return Update(db, &cmd);
  if (name == "delete") return Delete(db, &cmd);
  if (name == "find") return Find(db, &cmd, connection_id);
  if (name == "getMore") return GetMore(db, &cmd);
  if (name == "killCursors") return KillCursors(db, &cmd);
  if (name == "findAndModify" || name == "findandmodify") return FindAndModify(db, &cmd);
  if (name == "count") return Count(db, &cmd);
  if (name == "distinct") return Distinct(db, &cmd);
  if (name == "aggregate") return Aggregate(db, &cmd);
  if (name == "createIndexes") return CreateIndexes(db, &cmd);
  if (name == "dropIndexes" || name == "deleteIndexes") return DropIndexes(db, &cmd);
  if (name == "listIndexes") return ListIndexes(db, &cmd);
  return Error(59, "no such command: '" + name + "' (mmdoc serve supports a subset: see " +
                       "docs/server.md)");
}

std::string Commands::Hello(const std::string& name, int64_t connection_id) {
  bson_t b;
  bson_init(&b);
  if (name == "hello") {
    BSON_APPEND_BOOL(&b, "isWritablePrimary", true);
  } else {
    BSON_APPEND_BOOL(&b, "ismaster", true);
  }
  BSON_APPEND_BOOL(&b, "helloOk", true);
  BSON_APPEND_INT32(&b, "maxBsonObjectSize", kMaxBsonObjectSize);
  BSON_APPEND_INT32(&b, "maxMessageSizeBytes", static_cast<int32_t>(kMaxMessageSize));
  BSON_APPEND_INT32(&b, "maxWriteBatchSize", kMaxWriteBatchSize);
  BSON_APPEND_DATE_TIME(&b, "localTime",
                        std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
  BSON_APPEND_INT32(&b, "minWireVersion", kMinWireVersion);
  BSON_APPEND_INT32(&b, "maxWireVersion", kMaxWireVersion);
  BSON_APPEND_BOOL(&b, "readOnly", false);
  BSON_APPEND_INT64(&b, "connectionId", connection_id);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::BuildInfo() {
  bson_t b;
  bson_init(&b);
  // The MongoDB release whose wire version hello reports.
  BSON_APPEND_UTF8(&b, "version", "4.4.0");
  bson_t arr;
  BSON_APPEND_ARRAY_BEGIN(&b, "versionArray", &arr);
  BSON_APPEND_INT32(&arr, "0", 4);
  BSON_APPEND_INT32(&arr, "1", 4);
  BSON_APPEND_INT32(&arr, "2", 0);
  BSON_APPEND_INT32(&arr, "3", 0);
  bson_append_array_end(&b, &arr);
  BSON_APPEND_UTF8(&b, "gitVersion", ("mmdoc " + options_.version).c_str());
  BSON_APPEND_UTF8(&b, "mmdocVersion", options_.version.c_str());
  BSON_APPEND_INT32(&b, "bits", 64);
  BSON_APPEND_BOOL(&b, "debug", false);
  BSON_APPEND_INT32(&b, "maxBsonObjectSize", kMaxBsonObjectSize);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::ListDatabases(const bson_t* cmd) {
  auto stats = db_->Stats();
  if (!stats.ok()) return ErrorFor(stats.status());
  bson_iter_t it;
  if (Lookup(cmd, "filter", &it) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
      Sub(&it).size() > 5) {  // 5 bytes: the empty document
    return Error(2, "listDatabases: filter is not supported");
  }
  bool name_only = false;
  std::string bad = ReadFlag(cmd, "listDatabases", "nameOnly", &name_only);
  if (!bad.empty()) return bad;
  std::map<std::string, uint64_t> sizes;  // database -> bytes of its pages
  for (const CollectionStats& c : stats->collections) {
    size_t dot = c.name.find('.');
    if (dot == std::string::npos || dot == 0) continue;  // not a namespace
    uint64_t pages = c.data_pages;
    for (uint64_t p : c.index_pages) pages += p;
    sizes[c.name.substr(0, dot)] += pages * stats->page_size;
  }
  bson_t b;
  bson_init(&b);
  bson_t arr;
  BSON_APPEND_ARRAY_BEGIN(&b, "databases", &arr);
  int i = 0;
  for (const auto& [name, size] : sizes) {
    std::string key = std::to_string(i++);
    bson_t d;
    BSON_APPEND_DOCUMENT_BEGIN(&arr, key.c_str(), &d);
    BSON_APPEND_UTF8(&d, "name", name.c_str());
    if (!name_only) {
      BSON_APPEND_INT64(&d, "sizeOnDisk", static_cast<int64_t>(size));
      BSON_APPEND_BOOL(&d, "empty", false);
    }
    bson_append_document_end(&arr, &d);
  }
  bson_append_array_end(&b, &arr);
  if (!name_only) BSON_APPEND_INT64(&b, "totalSize", static_cast<int64_t>(stats->file_size));
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::ListCollections(const std::string& db, const bson_t* cmd) {
  if (!NamespaceProblem(db, "x").empty()) return Error(73, NamespaceProblem(db, "x"));
  // The filter drivers send: none, or {name: "<coll>"}.
  std::optional<std::string> only;
  bson_iter_t it;
  if (Lookup(cmd, "filter", &it) && BSON_ITER_HOLDS_DOCUMENT(&it)) {
    Document filter = Sub(&it);
    bson_t f;
    filter.View(&f);
    bson_iter_t fit;
    if (bson_iter_init(&fit, &f)) {
      while (bson_iter_next(&fit)) {
        if (std::strcmp(bson_iter_key(&fit), "name") == 0 && BSON_ITER_HOLDS_UTF8(&fit)) {
          only = Utf8(&fit);
        } else {
          return Error(
              2, "listCollections: only a filter on the name is supported, not " + filter.ToJson());
        }
      }
    }
  }
  bool name_only = false;
  std::string bad = ReadFlag(cmd, "listCollections", "nameOnly", &name_only);
  if (!bad.empty()) return bad;
  auto names = db_->ListCollections();
  if (!names.ok()) return ErrorFor(names.status());
  std::vector<std::string> docs;
  const std::string prefix = db + ".";
  for (const std::string& full : *names) {
    if (full.compare(0, prefix.size(), prefix) != 0) continue;
    std::string coll = full.substr(prefix.size());
    if (only && coll != *only) continue;
    bson_t d;
    bson_init(&d);
    BSON_APPEND_UTF8(&d, "name", coll.c_str());
    BSON_APPEND_UTF8(&d, "type", "collection");
    if (!name_only) {
      bson_t sub;
      BSON_APPEND_DOCUMENT_BEGIN(&d, "options", &sub);
      bson_append_document_end(&d, &sub);
      BSON_APPEND_DOCUMENT_BEGIN(&d, "info", &sub);
      BSON_APPEND_BOOL(&sub, "readOnly", false);
      bson_append_document_end(&d, &sub);
      BSON_APPEND_DOCUMENT_BEGIN(&d, "idIndex", &sub);
      BSON_APPEND_INT32(&sub, "v", 2);
      bson_t key;
      BSON_APPEND_DOCUMENT_BEGIN(&sub, "key", &key);
      BSON_APPEND_INT32(&key, "_id", 1);
      bson_append_document_end(&sub, &key);
      BSON_APPEND_UTF8(&sub, "name", "_id_");
      bson_append_document_end(&d, &sub);
    }
    docs.push_back(Finish(&d));
  }
  return OneBatch(db + ".$cmd.listCollections", docs);
}

std::string Commands::Create(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error, /*write=*/true);
  if (!ns) return error;
  bson_iter_t it;
  for (const char* opt : {"validator", "viewOn", "timeseries", "clusteredIndex"}) {
    if (Lookup(cmd, opt, &it)) {
      return Error(72, std::string("create: option ") + opt + " is not supported");
    }
  }
  if (const std::string f = UnknownField(cmd, {"capped"}, true); !f.empty()) {
    return Error(72, "create: option " + f + " is not supported");
  }
  bool capped = false;
  std::string bad = ReadFlag(cmd, "create", "capped", &capped);
  if (!bad.empty()) return bad;
  if (capped) return Error(72, "create: option capped is not supported");
  Status s = db_->CreateCollection(*ns);
  if (s.IsAlreadyExists()) return Error(48, "Collection already exists. NS: " + *ns);
  if (!s.ok()) return ErrorFor(s);
  return Ok();
}

std::string Commands::Drop(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  auto indexes = db_->ListIndexes(*ns);
  Status s = db_->DropCollection(*ns);
  // pymongo's drop_collection looks for this message.
  if (s.IsNotFound()) return Error(26, "ns not found");
  if (!s.ok()) return ErrorFor(s);
  bson_t b;
  bson_init(&b);
  BSON_APPEND_INT32(&b, "nIndexesWas",
                    indexes.ok() ? static_cast<int32_t>(indexes->size() + 1) : 1);
  BSON_APPEND_UTF8(&b, "ns", ns->c_str());
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::DropDatabase(const std::string& db) {
  if (!NamespaceProblem(db, "x").empty()) return Error(73, NamespaceProblem(db, "x"));
  auto names = db_->ListCollections();
  if (!names.ok()) return ErrorFor(names.status());
  const std::string prefix = db + ".";
  for (const std::string& full : *names) {
    if (full.compare(0, prefix.size(), prefix) != 0) continue;
    Status s = db_->DropCollection(full);
    if (!s.ok() && !s.IsNotFound()) return ErrorFor(s);
  }
  bson_t b;
  bson_init(&b);
  BSON_APPEND_UTF8(&b, "dropped", db.c_str());
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

Result<WriteOptions> Commands::WriteConcern(const bson_t* cmd) const {
  WriteOptions w;
  bson_iter_t it;
  if (!Lookup(cmd, "writeConcern", &it)) return w;
  if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return Status::InvalidArgument("writeConcern not a document");
  Document wc = Sub(&it);
  bson_t view;
  wc.View(&view);
  bool durable = false;
  bson_iter_t f;
  // j and fsync both ask for a durable write (fsync: MongoDB's older name).
  if (bson_iter_init(&f, &view)) {
    while (bson_iter_next(&f)) {
      const std::string_view key = bson_iter_key(&f);
      if (key == "j" || key == "fsync") {
        auto v = Flag(&f);
        if (!v)
          return Status::InvalidArgument("writeConcern " + std::string(key) + " must be a boolean");
        durable = durable || *v;
      } else if (key != "w" && key != "wtimeout" && key != "provenance" && key != "getLastError") {
        return Status::InvalidArgument("writeConcern has an unknown field " + std::string(key));
      }
    }
  }
  if (bson_iter_init_find(&f, &view, "w")) {
    if (BSON_ITER_HOLDS_UTF8(&f)) {
      if (std::strcmp(bson_iter_utf8(&f, nullptr), "majority") != 0) {
        return Status::InvalidArgument("writeConcern w must be 0, 1 or \"majority\"");
      }
      durable = true;  // a standalone's majority is its journal
    } else {
      auto n = Int(&f);
      if (!n || *n < 0 || *n > 1) {
        return Status::InvalidArgument(
            "writeConcern w must be 0, 1 or \"majority\" on a server "
            "without replicas");
      }
    }
  }
  if (durable) {
    Durability d = options_.durability;
    // msync and fsync are durable already; the others share group's sync.
    if (d != Durability::kMsync && d != Durability::kFsync) d = Durability::kGroup;
    w.durability = d;
  }
  return w;
}

// Collects the writeErrors of a write command.
class Commands::Reply {
 public:
  void AddError(size_t index, WriteError e) { errors_.push_back({index, std::move(e)}); }
  bool has_errors() const { return !errors_.empty(); }
  void AppendErrors(bson_t* b) const {
    if (errors_.empty()) return;
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(b, "writeErrors", &arr);
    for (size_t i = 0; i < errors_.size(); i++) {
      std::string key = std::to_string(i);
      bson_t e;
      BSON_APPEND_DOCUMENT_BEGIN(&arr, key.c_str(), &e);
      BSON_APPEND_INT32(&e, "index", static_cast<int32_t>(errors_[i].index));
      AppendWriteError(&e, errors_[i].error);
      bson_append_document_end(&arr, &e);
    }
    bson_append_array_end(b, &arr);
  }

 private:
  struct Entry {
    size_t index;
    WriteError error;
  };
  std::vector<Entry> errors_;
};

std::string Commands::WriteStatements(const std::string& db, const bson_t* cmd, const char* command,
                                      const char* field,
                                      std::initializer_list<std::string_view> statement_fields,
                                      const Statement& statement,
                                      const std::function<void()>& reset,
                                      const std::function<void(bson_t* reply)>& counts) {
  std::string error;
  auto ns = Namespace(db, cmd, &error, /*write=*/true);
  if (!ns) return error;
  if (const std::string f = UnknownField(cmd, {field, "ordered", "bypassDocumentValidation"}, true);
      !f.empty()) {
    return Error(2, std::string(command) + ": option " + f + " is not supported");
  }
  auto wo = WriteConcern(cmd);
  if (!wo.ok()) return Error(CodeFor(wo.status()), wo.status().message());
  bson_iter_t it;
  bool ordered = true;
  std::string bad = ReadFlag(cmd, command, "ordered", &ordered);
  if (!bad.empty()) return bad;
  if (!Lookup(cmd, field, &it) || !BSON_ITER_HOLDS_ARRAY(&it)) {
    return Error(9, std::string(command) + ": " + field + " must be an array");
  }
  Document statements = Sub(&it);
  bson_t arr;
  statements.View(&arr);
  // The whole command is refused for an unknown field in any statement,
  // before any runs, as MongoDB parses it whole.
  if (statement_fields.size() > 0 && bson_iter_init(&it, &arr)) {
    for (size_t index = 0; bson_iter_next(&it); index++) {
      bson_t one;
      uint32_t len = 0;
      const uint8_t* data = nullptr;
      if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;  // a write error of its own below
      bson_iter_document(&it, &len, &data);
      if (!bson_init_static(&one, data, len) || TooLargeSize(it) != 0 || IsTooDeep(it)) continue;
      if (const std::string f = UnknownField(&one, statement_fields, false); !f.empty()) {
        return Error(2, std::string(command) + ": option " + f + " of " + field + "[" +
                            std::to_string(index) + "] is not supported");
      }
    }
  }
  // Statements that failed after changing documents: a rerun fails them
  // without running them. Each rerun adds one, so the loop ends.
  std::map<size_t, Status> undone;
  for (;;) {
    reset();
    // One transaction and one commit for the whole batch: a failed statement
    // changes nothing, so the ones before it (and, unordered, after) stand.
    auto txn = db_->Begin(*wo);
    if (!txn.ok()) return ErrorFor(txn.status());
    Reply reply;
    bool rerun = false;
    size_t index = 0;
    bson_iter_t e;
    if (bson_iter_init(&e, &arr)) {
      for (; bson_iter_next(&e); index++) {
        Status s;
        auto failed = undone.find(index);
        if (failed != undone.end()) {
          s = failed->second;
        } else if (!BSON_ITER_HOLDS_DOCUMENT(&e)) {
          s = Status::InvalidArgument(std::string(command) + ": " + field + "[" +
                                      std::to_string(index) + "] is not a document");
        } else if (const size_t big = TooLargeSize(e); big != 0) {
          // MongoDB's words and code (BadValue) for it.
          s = Status::InvalidArgument(std::string(command) == "insert"
                                          ? "object to insert too large"
                                          : std::string(command) + " statement too large",
                                      "size in bytes: " + std::to_string(big) +
                                          ", max size: " + std::to_string(kMaxBsonObjectSize));
        } else if (IsTooDeep(e)) {
          s = Status::InvalidArgument(
              std::string(command) == "insert" ? "document" : "statement",
              "nested deeper than " + std::to_string(kMaxNestingDepth) + " levels");
        } else {
          bool left_changes = false;
          s = statement(txn->get(), *ns, index, Sub(&e), &left_changes);
          if (!s.ok() && left_changes) {
            undone.emplace(index, s);
            rerun = true;
            break;
          }
        }
        if (!s.ok()) {
          reply.AddError(index, WriteErrorFor(s, *ns, [&] { return (*txn)->ListIndexes(*ns); }));
          if (ordered) break;
        }
      }
    }
    if (rerun) {
      (*txn)->Abort();
      continue;
    }
    Status s = (*txn)->Commit();
    if (!s.ok()) return ErrorFor(s);
    bson_t b;
    bson_init(&b);
    counts(&b);
    reply.AppendErrors(&b);
    BSON_APPEND_DOUBLE(&b, "ok", 1.0);
    return Finish(&b);
  }
}

std::string Commands::Insert(const std::string& db, const bson_t* cmd) {
  int64_t n = 0;
  return WriteStatements(
      db, cmd, "insert", "documents", {},
      [&](Transaction* txn, const std::string& ns, size_t, const Document& doc, bool*) {
        Status s = txn->Insert(ns, doc);
        if (s.ok()) n++;
        return s;
      },
      [&] { n = 0; }, [&](bson_t* b) { BSON_APPEND_INT32(b, "n", static_cast<int32_t>(n)); });
}

std::string Commands::Update(const std::string& db, const bson_t* cmd) {
  int64_t n = 0;
  int64_t modified = 0;
  std::vector<std::pair<size_t, Value>> upserted;
  auto statement = [&](Transaction* txn, const std::string& ns, size_t index, const Document& stmt,
                       bool* left_changes) {
    Status s;
    bson_t sv;
    stmt.View(&sv);
    bson_iter_t f;
    Document q;
    Document change;
    UpdateOptions uo;
    bool multi = false;
    MMDOC_RETURN_IF_ERROR(StatementQuery(&sv, "update", &q));
    if (!bson_iter_init_find(&f, &sv, "u")) {
      s = Status::InvalidArgument("update: statement without u");
    } else if (BSON_ITER_HOLDS_ARRAY(&f)) {
      s = Status::InvalidArgument("update: aggregation pipelines as updates are not supported");
    } else if (!BSON_ITER_HOLDS_DOCUMENT(&f)) {
      s = Status::InvalidArgument("update: u must be a document");
    } else {
      change = Sub(&f);
    }
    for (const char* flag : {"upsert", "multi"}) {
      if (!bson_iter_init_find(&f, &sv, flag)) continue;
      auto v = Flag(&f);
      if (!v) return Status::InvalidArgument(std::string("update: ") + flag + " must be a boolean");
      (std::strcmp(flag, "multi") == 0 ? multi : uo.upsert) = *v;
    }
    for (const char* opt : {"arrayFilters", "collation"}) {
      if (s.ok() && bson_iter_init_find(&f, &sv, opt)) {
        s = Status::InvalidArgument(std::string("update: ") + opt + " is not supported");
      }
    }
    if (!s.ok()) return s;
    auto r = multi ? txn->UpdateMany(ns, q, change, uo) : txn->UpdateOne(ns, q, change, uo);
    if (!r.ok()) {
      *left_changes = multi;  // UpdateOne changes nothing when it fails
      return r.status();
    }
    n += static_cast<int64_t>(r->matched);
    modified += static_cast<int64_t>(r->modified);
    if (r->upserted_id) {
      n++;
      upserted.emplace_back(index, *r->upserted_id);
    }
    return Status::OK();
  };
  auto counts = [&](bson_t* b) {
    BSON_APPEND_INT32(b, "n", static_cast<int32_t>(n));
    BSON_APPEND_INT32(b, "nModified", static_cast<int32_t>(modified));
    if (upserted.empty()) return;
    bson_t ua;
    BSON_APPEND_ARRAY_BEGIN(b, "upserted", &ua);
    for (size_t i = 0; i < upserted.size(); i++) {
      std::string key = std::to_string(i);
      bson_t e;
      BSON_APPEND_DOCUMENT_BEGIN(&ua, key.c_str(), &e);
      BSON_APPEND_INT32(&e, "index", static_cast<int32_t>(upserted[i].first));
      BSON_APPEND_VALUE(&e, "_id", upserted[i].second.get());
      bson_append_document_end(&ua, &e);
    }
    bson_append_array_end(b, &ua);
  };
  auto reset = [&] {
    n = 0;
    modified = 0;
    upserted.clear();
  };
  // hint: ignored, as find's.
  return WriteStatements(db, cmd, "update", "updates",
                         {"q", "u", "upsert", "multi", "arrayFilters", "collation", "hint"},
                         statement, reset, counts);
}

std::string Commands::Delete(const std::string& db, const bson_t* cmd) {
  int64_t n = 0;
  return WriteStatements(
      db, cmd, "delete", "deletes", {"q", "limit", "collation", "hint"},
      [&](Transaction* txn, const std::string& ns, size_t, const Document& stmt,
          bool* left_changes) {
        bson_t sv;
        stmt.View(&sv);
        bson_iter_t f;
        Document q;
        std::optional<int64_t> limit;
        MMDOC_RETURN_IF_ERROR(StatementQuery(&sv, "delete", &q));
        if (bson_iter_init_find(&f, &sv, "limit")) limit = Int(&f);
        if (!limit || (*limit != 0 && *limit != 1)) {
          return Status::InvalidArgument("delete: limit must be 0 (all) or 1");
        }
        if (bson_iter_init_find(&f, &sv, "collation")) {
          return Status::InvalidArgument("delete: collation is not supported");
        }
        auto r = *limit == 1 ? txn->DeleteOne(ns, q) : txn->DeleteMany(ns, q);
        if (!r.ok()) {
          *left_changes = *limit == 0;
          return r.status();
        }
        n += static_cast<int64_t>(*r);
        return Status::OK();
      },
      [&] { n = 0; }, [&](bson_t* b) { BSON_APPEND_INT32(b, "n", static_cast<int32_t>(n)); });
}

bool Commands::FillBatch(ServerCursor* c, int64_t batch_size, bson_t* arr, Status* error) {
  size_t bytes = 0;
  int64_t count = 0;
  while (batch_size == 0 || count < batch_size) {
    if (!c->pending) {
      if (!c->cursor->Next()) {
        *error = c->cursor->status();
        return true;
      }
      c->pending = true;
    }
    std::string_view raw = c->cursor->raw();
    // The first document always goes; later ones only within 16 MiB.
    if (count > 0 && bytes + raw.size() > kMaxBatchBytes) return false;
    std::string key = std::to_string(count);
    bson_t doc;
    bson_init_static(&doc, reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
    bson_append_document(arr, key.c_str(), static_cast<int>(key.size()), &doc);
    bytes += raw.size();
    count++;
    c->pending = false;
  }
  // A full batch by count: the next Next() says whether more remain.
  if (!c->cursor->Next()) {
    *error = c->cursor->status();
    return true;
  }
  c->pending = true;
  return false;
}

Result<int64_t> Commands::AddCursor(std::unique_ptr<ServerCursor> c) {
  std::unique_ptr<ServerCursor> evicted;  // closed after the lock is let go
  std::lock_guard<std::mutex> lock(mu_);
  if (cursors_.size() >= options_.max_cursors) {
    auto oldest = cursors_.end();
    for (auto it = cursors_.begin(); it != cursors_.end(); ++it) {
      const ServerCursor& o = *it->second;
      if (o.orphaned && !o.in_use &&
          (oldest == cursors_.end() || o.last_used < oldest->second->last_used)) {
        oldest = it;
      }
    }
    if (oldest == cursors_.end()) {
      return Status::Busy("too many open cursors (" + std::to_string(options_.max_cursors) +
                          "): exhaust or kill cursors, or raise --max-cursors");
    }
    evicted = std::move(oldest->second);
    cursors_.erase(oldest);
  }
  int64_t id;
  do {
    id = static_cast<int64_t>(rng_() >> 1);  // positive, never 0
  } while (id == 0 || cursors_.count(id) != 0);
  c->id = id;
  c->last_used = std::chrono::steady_clock::now();
  cursors_[id] = std::move(c);
  return id;
}

std::string Commands::Find(const std::string& db, const bson_t* cmd, int64_t connection_id) {
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  bson_iter_t it;
  Document filter;
  if (Lookup(cmd, "filter", &it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return Error(14, "find: filter must be a document");
    filter = Sub(&it);
  }
  FindOptions fo;
  auto c = std::make_unique<ServerCursor>();
  c->ns = *ns;
  if (Lookup(cmd, "sort", &it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return Error(14, "find: sort must be a document");
    Document sort = Sub(&it);
    bson_t sv;
    sort.View(&sv);
    bson_iter_t s;
    if (bson_iter_init(&s, &sv)) {
      while (bson_iter_next(&s)) {
        auto dir = Int(&s);
        if (!dir || (*dir != 1 && *dir != -1)) {
          return Error(2, "find: sort directions must be 1 or -1 ($meta is not supported)");
        }
        fo.sort.push_back(SortSpec{bson_iter_key(&s), static_cast<int>(*dir)});
      }
    }
  }
  if (Lookup(cmd, "projection", &it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) return Error(14, "find: projection must be a document");
    // One that both keeps and drops fields is refused when the cursor opens.
    const std::string problem = ProjectionFields(Sub(&it), &fo.projection);
    if (!problem.empty()) return Error(2, "find: " + problem);
  }
  int64_t batch = kDefaultFirstBatch;
  bool single_batch = false;
  std::string bad = ReadFlag(cmd, "find", "singleBatch", &single_batch);
  if (!bad.empty()) return bad;
  for (const char* opt : {"skip", "limit", "batchSize"}) {
    if (!Lookup(cmd, opt, &it)) continue;
    auto v = Int(&it);
    if (!v) return Error(14, std::string("find: ") + opt + " must be a number");
    if (*v < 0 && std::strcmp(opt, "limit") != 0) {
      return Error(2, std::string("find: ") + opt + " must be >= 0");
    }
    if (std::strcmp(opt, "skip") == 0) fo.skip = *v;
    if (std::strcmp(opt, "batchSize") == 0) batch = *v;
    if (std::strcmp(opt, "limit") == 0) {
      // A negative limit is the legacy "one batch of at most -limit".
      if (*v < 0) single_batch = true;
      fo.limit = *v < 0 ? -*v : *v;
    }
  }
  if (Lookup(cmd, "collation", &it)) return Error(2, "find: collation is not supported");
  // Options that would change the answer (min, max, returnKey, tailable,
  // ...) are refused rather than ignored; these only shape the cursor or
  // the driver's conversation.
  static const char* const kFindFields[] = {"find",
                                            "filter",
                                            "sort",
                                            "projection",
                                            "skip",
                                            "limit",
                                            "batchSize",
                                            "singleBatch",
                                            "hint",
                                            "comment",
                                            "maxTimeMS",
                                            "readConcern",
                                            "$db",
                                            "$readPreference",
                                            "lsid",
                                            "$clusterTime",
                                            "allowDiskUse",
                                            "noCursorTimeout",
                                            "allowPartialResults"};
  bson_iter_t field;
  if (bson_iter_init(&field, cmd)) {
    while (bson_iter_next(&field)) {
      const char* key = bson_iter_key(&field);
      if (std::none_of(std::begin(kFindFields), std::end(kFindFields),
                       [key](const char* f) { return std::strcmp(f, key) == 0; })) {
        return Error(2, std::string("find: option ") + key + " is not supported");
      }
    }
  }
  auto txn = db_->BeginRead();
  if (!txn.ok()) return ErrorFor(txn.status());
  auto cursor = (*txn)->Find(*ns, filter, fo);
  if (!cursor.ok()) return ErrorFor(cursor.status());
  c->txn = std::move(txn).value();
  c->cursor = std::move(cursor).value();

  bson_t arr;
  bson_init(&arr);
  Status read_error;
  // batchSize 0 opens the cursor and returns nothing yet, as MongoDB does.
  bool done = batch == 0 ? false : FillBatch(c.get(), batch, &arr, &read_error);
  if (!read_error.ok()) {
    bson_destroy(&arr);
    return ErrorFor(read_error);
  }
  int64_t id = 0;
  if (!done && !single_batch) {
    c->connection = connection_id;
    auto added = AddCursor(std::move(c));
    if (!added.ok()) {
      bson_destroy(&arr);
      return Error(2, added.status().message());
    }
    id = *added;
  }
  bson_t b;
  bson_init(&b);
  AppendCursor(&b, id, *ns, "firstBatch", &arr);
  bson_destroy(&arr);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::GetMore(const std::string& db, const bson_t* cmd) {
  bson_iter_t it;
  if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it) || !BSON_ITER_HOLDS_INT64(&it)) {
    return Error(14, "getMore: the cursor id must be an int64");
  }
  int64_t id = bson_iter_int64(&it);
  if (!Lookup(cmd, "collection", &it) || !BSON_ITER_HOLDS_UTF8(&it)) {
    return Error(14, "getMore: collection must be a string");
  }
  std::string ns = db + "." + Utf8(&it);
  int64_t batch = 0;
  if (Lookup(cmd, "batchSize", &it)) {
    auto v = Int(&it);
    if (!v || *v < 0) return Error(2, "getMore: batchSize must be a number >= 0");
    batch = *v;
  }
  ServerCursor* c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto found = cursors_.find(id);
    if (found == cursors_.end()) {
      return Error(43, "cursor id " + std::to_string(id) + " not found");
    }
    c = found->second.get();
    if (c->ns != ns) {
      return Error(
          2, "getMore: cursor " + std::to_string(id) + " belongs to " + c->ns + ", not " + ns);
    }
    if (c->in_use) return Error(2, "getMore: cursor " + std::to_string(id) + " is in use");
    c->in_use = true;
  }
  bson_t arr;
  bson_init(&arr);
  Status read_error;
  bool done = FillBatch(c, batch, &arr, &read_error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    c->in_use = false;
    c->last_used = std::chrono::steady_clock::now();
    if (done || !read_error.ok()) cursors_.erase(id);
  }
  if (!read_error.ok()) {
    bson_destroy(&arr);
    return ErrorFor(read_error);
  }
  bson_t b;
  bson_init(&b);
  AppendCursor(&b, done ? 0 : id, ns, "nextBatch", &arr);
  bson_destroy(&arr);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::KillCursors(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  bson_iter_t it;
  if (!Lookup(cmd, "cursors", &it) || !BSON_ITER_HOLDS_ARRAY(&it)) {
    return Error(14, "killCursors: cursors must be an array");
  }
  Document list = Sub(&it);
  bson_t arr;
  list.View(&arr);
  // All checked before any is killed: a bad id fails the whole command.
  std::vector<int64_t> ids;
  bson_iter_t c;
  if (bson_iter_init(&c, &arr)) {
    while (bson_iter_next(&c)) {
      if (!BSON_ITER_HOLDS_INT64(&c) && !BSON_ITER_HOLDS_INT32(&c)) {
        return Error(14, "killCursors: cursor ids must be integers");
      }
      ids.push_back(bson_iter_as_int64(&c));
    }
  }
  std::vector<int64_t> killed;
  std::vector<int64_t> not_found;
  std::vector<std::unique_ptr<ServerCursor>> dead;  // destroyed outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const int64_t id : ids) {
      auto found = cursors_.find(id);
      if (found == cursors_.end() || found->second->ns != *ns || found->second->in_use) {
        not_found.push_back(id);
        continue;
      }
      dead.push_back(std::move(found->second));
      cursors_.erase(found);
      killed.push_back(id);
    }
  }
  dead.clear();
  bson_t b;
  bson_init(&b);
  for (const auto& [name, list] :
       {std::pair<const char*, const std::vector<int64_t>*>{"cursorsKilled", &killed},
        {"cursorsNotFound", &not_found}}) {
    bson_t a;
    BSON_APPEND_ARRAY_BEGIN(&b, name, &a);
    for (size_t i = 0; i < list->size(); i++) {
      std::string key = std::to_string(i);
      BSON_APPEND_INT64(&a, key.c_str(), (*list)[i]);
    }
    bson_append_array_end(&b, &a);
  }
  bson_t empty;
  BSON_APPEND_ARRAY_BEGIN(&b, "cursorsAlive", &empty);
  bson_append_array_end(&b, &empty);
  BSON_APPEND_ARRAY_BEGIN(&b, "cursorsUnknown", &empty);
  bson_append_array_end(&b, &empty);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::Count(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  bson_iter_t it;
  // hint: ignored, as find's (it picks an index, never the answer).
  if (const std::string f = UnknownField(cmd, {"query", "skip", "limit", "hint"}, true);
      !f.empty()) {
    return Error(2, "count: option " + f + " is not supported");
  }
  auto query = OptionalDoc(cmd, "count", "query", &error);
  if (!query) return error;
  int64_t skip = 0;
  int64_t limit = 0;
  if (Lookup(cmd, "skip", &it)) {
    auto v = Int(&it);
    if (!v || *v < 0) return Error(2, "count: skip must be a number >= 0");
    skip = *v;
  }
  if (Lookup(cmd, "limit", &it)) {
    auto v = Int(&it);
    if (!v) return Error(2, "count: limit must be a number");
    if (*v == INT64_MIN) return Error(2, "count: limit is out of range");
    limit = *v < 0 ? -*v : *v;
  }
  auto n = db_->Count(*ns, *query);
  if (!n.ok()) return ErrorFor(n.status());
  int64_t count = std::max<int64_t>(0, static_cast<int64_t>(*n) - skip);
  if (limit > 0) count = std::min(count, limit);
  bson_t b;
  bson_init(&b);
  BSON_APPEND_INT64(&b, "n", count);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::FindAndModify(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error, /*write=*/true);
  if (!ns) return error;
  auto wo = WriteConcern(cmd);
  if (!wo.ok()) return Error(CodeFor(wo.status()), wo.status().message());
  bson_iter_t it;
  auto opt_query = OptionalDoc(cmd, "findAndModify", "query", &error);
  if (!opt_query) return error;
  const Document& query = *opt_query;
  FindAndModifyOptions fo;
  auto opt_sort = OptionalDoc(cmd, "findAndModify", "sort", &error);
  if (!opt_sort) return error;
  {
    const Document& sort = *opt_sort;
    bson_t sv;
    sort.View(&sv);
    bson_iter_t k;
    if (bson_iter_init(&k, &sv) && bson_iter_next(&k)) {
      auto dir = Int(&k);
      if (!dir || (*dir != 1 && *dir != -1) || bson_count_keys(&sv) != 1) {
        return Error(2, "findAndModify: sort must be one field, 1 or -1");
      }
      fo.sort_field = bson_iter_key(&k);
      fo.sort_direction = static_cast<int>(*dir);
    }
  }
  if (Lookup(cmd, "fields", &it)) {
    if (!BSON_ITER_HOLDS_DOCUMENT(&it))
      return Error(14, "findAndModify: fields must be a document");
    const std::string problem = ProjectionFields(Sub(&it), &fo.projection);
    if (!problem.empty()) return Error(2, "findAndModify: " + problem);
  }
  for (const char* opt : {"arrayFilters", "collation"}) {
    if (Lookup(cmd, opt, &it))
      return Error(2, std::string("findAndModify: ") + opt + " is not supported");
  }
  if (const std::string f = UnknownField(cmd,
                                         {"query", "sort", "fields", "remove", "new", "upsert",
                                          "update", "bypassDocumentValidation", "hint"},
                                         true);
      !f.empty()) {
    return Error(2, "findAndModify: option " + f + " is not supported");
  }
  bool remove = false;
  for (const auto& [key, out] : {std::pair<const char*, bool*>{"remove", &remove},
                                 {"new", &fo.return_after},
                                 {"upsert", &fo.upsert}}) {
    std::string bad = ReadFlag(cmd, "findAndModify", key, out);
    if (!bad.empty()) return bad;
  }
  if (remove && fo.return_after)
    return Error(9, "findAndModify: remove and new cannot be combined");
  if (remove && fo.upsert) return Error(9, "findAndModify: remove and upsert cannot be combined");
  Result<std::optional<Document>> r = std::optional<Document>();
  bool upserted = false;
  std::optional<Value> upserted_id;
  if (remove) {
    if (Lookup(cmd, "update", &it)) return Error(9, "findAndModify: both remove and update");
    r = db_->FindOneAndDelete(*ns, query, fo, *wo);
  } else {
    if (!Lookup(cmd, "update", &it)) return Error(9, "findAndModify: needs remove or update");
    if (!BSON_ITER_HOLDS_DOCUMENT(&it)) {
      return Error(2, "findAndModify: update must be a document (pipelines are not supported)");
    }
    Document update = Sub(&it);
    // First without upsert, so that lastErrorObject can tell an update from
    // an insert; then, when nothing matched, the upsert (itself atomic).
    FindAndModifyOptions no_upsert = fo;
    no_upsert.upsert = false;
    r = db_->FindOneAndUpdate(*ns, query, update, no_upsert, *wo);
    if (r.ok() && !r->has_value() && fo.upsert) {
      // Asked for the document after, whatever `new` says, for its _id.
      // A projection that drops _id is applied here, after the _id is read.
      FindAndModifyOptions after = fo;
      after.return_after = true;
      auto& fields = after.projection;
      const auto drop_id = std::remove(fields.begin(), fields.end(), "-_id");
      const bool strip_id = drop_id != fields.end();
      fields.erase(drop_id, fields.end());
      r = db_->FindOneAndUpdate(*ns, query, update, after, *wo);
      upserted = true;
      if (r.ok() && r->has_value()) {
        auto id = (*r)->Get("_id");
        if (id.ok()) upserted_id = std::move(id).value();
        if (!fo.return_after) {
          *r = std::nullopt;
        } else if (strip_id) {
          **r = WithoutId(**r);
        }
      }
    }
  }
  if (!r.ok()) {
    const WriteError e = WriteErrorFor(r.status(), *ns, [&] { return db_->ListIndexes(*ns); });
    bson_t b;
    bson_init(&b);
    BSON_APPEND_DOUBLE(&b, "ok", 0.0);
    AppendWriteError(&b, e);
    return Finish(&b);
  }
  bson_t b;
  bson_init(&b);
  bson_t last;
  BSON_APPEND_DOCUMENT_BEGIN(&b, "lastErrorObject", &last);
  BSON_APPEND_INT32(&last, "n", r->has_value() || upserted ? 1 : 0);
  if (!remove) BSON_APPEND_BOOL(&last, "updatedExisting", r->has_value() && !upserted);
  if (upserted_id) BSON_APPEND_VALUE(&last, "upserted", upserted_id->get());
  bson_append_document_end(&b, &last);
  if (r->has_value()) {
    bson_t v;
    (*r)->View(&v);
    BSON_APPEND_DOCUMENT(&b, "value", &v);
  } else {
    BSON_APPEND_NULL(&b, "value");
  }
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::Distinct(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  bson_iter_t it;
  if (const std::string f = UnknownField(cmd, {"key", "query"}, true); !f.empty()) {
    return Error(2, "distinct: option " + f + " is not supported");
  }
  if (!Lookup(cmd, "key", &it) || !BSON_ITER_HOLDS_UTF8(&it)) {
    return Error(14, "distinct: key must be a string");
  }
  std::string key = Utf8(&it);
  auto query = OptionalDoc(cmd, "distinct", "query", &error);
  if (!query) return error;
  auto values = db_->Distinct(*ns, key, *query);
  if (!values.ok()) return ErrorFor(values.status());
  bson_t b;
  bson_init(&b);
  bson_t arr;
  BSON_APPEND_ARRAY_BEGIN(&b, "values", &arr);
  for (size_t i = 0; i < values->size(); i++) {
    std::string k = std::to_string(i);
    BSON_APPEND_VALUE(&arr, k.c_str(), (*values)[i].get());
  }
  bson_append_array_end(&b, &arr);
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::Aggregate(const std::string& db, const bson_t* cmd) {
  static const char* kSupported =
      "mmdoc serve runs only countDocuments' pipeline: [{$match}, {$skip}, {$limit}, "
      "{$group: {_id: <constant>, <name>: {$sum: 1}}}]";
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  bson_iter_t it;
  if (!Lookup(cmd, "pipeline", &it) || !BSON_ITER_HOLDS_ARRAY(&it)) {
    return Error(14, "aggregate: pipeline must be an array");
  }
  Document pipeline = Sub(&it);
  bson_t pv;
  pipeline.View(&pv);
  Document match;
  int64_t skip = 0;
  int64_t limit = 0;
  std::optional<Document> group;
  int stage_no = 0;  // $match, $skip, $limit, $group must come in this order
  bson_iter_t s;
  if (bson_iter_init(&s, &pv)) {
    while (bson_iter_next(&s)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&s)) return Error(14, "aggregate: a stage is not a document");
      Document stage = Sub(&s);
      bson_t sv;
      stage.View(&sv);
      bson_iter_t op;
      if (!bson_iter_init(&op, &sv) || !bson_iter_next(&op)) return Error(2, kSupported);
      std::string name = bson_iter_key(&op);
      int order = name == "$match"   ? 1
                  : name == "$skip"  ? 2
                  : name == "$limit" ? 3
                  : name == "$group" ? 4
                                     : 0;
      if (order <= stage_no || group) return Error(2, kSupported);
      stage_no = order;
      if (order == 1) {
        if (!BSON_ITER_HOLDS_DOCUMENT(&op)) return Error(14, "aggregate: $match not a document");
        match = Sub(&op);
      } else if (order == 2 || order == 3) {
        auto v = Int(&op);
        if (!v || *v < 0 || (order == 3 && *v == 0)) {
          return Error(2, "aggregate: " + name + " must be a positive number");
        }
        (order == 2 ? skip : limit) = *v;
      } else {
        if (!BSON_ITER_HOLDS_DOCUMENT(&op)) return Error(2, kSupported);
        group = Sub(&op);
      }
    }
  }
  if (!group) return Error(2, kSupported);
  // {_id: <constant>, <name>: {$sum: 1}}
  bson_t gv;
  group->View(&gv);
  bson_iter_t g;
  const bson_value_t* id_value = nullptr;
  std::string sum_name;
  int fields = 0;
  if (bson_iter_init(&g, &gv)) {
    while (bson_iter_next(&g)) {
      fields++;
      std::string key = bson_iter_key(&g);
      if (key == "_id") {
        id_value = bson_iter_value(&g);
        if (BSON_ITER_HOLDS_UTF8(&g) && bson_iter_utf8(&g, nullptr)[0] == '$') {
          return Error(2, kSupported);  // grouping by a field
        }
        if (BSON_ITER_HOLDS_DOCUMENT(&g) || BSON_ITER_HOLDS_ARRAY(&g)) return Error(2, kSupported);
      } else {
        Document acc = BSON_ITER_HOLDS_DOCUMENT(&g) ? Sub(&g) : Document();
        bson_t av;
        acc.View(&av);
        bson_iter_t a;
        if (!bson_iter_init_find(&a, &av, "$sum") || Int(&a).value_or(0) != 1 ||
            bson_count_keys(&av) != 1) {
          return Error(2, kSupported);
        }
        sum_name = key;
      }
    }
  }
  if (id_value == nullptr || sum_name.empty() || fields != 2) return Error(2, kSupported);
  auto n = db_->Count(*ns, match);
  if (!n.ok()) return ErrorFor(n.status());
  int64_t count = std::max<int64_t>(0, static_cast<int64_t>(*n) - skip);
  if (limit > 0) count = std::min(count, limit);
  std::vector<std::string> docs;
  if (count > 0) {  // MongoDB's $group gives no document for no input
    bson_t d;
    bson_init(&d);
    BSON_APPEND_VALUE(&d, "_id", id_value);
    if (count <= INT32_MAX) {
      BSON_APPEND_INT32(&d, sum_name.c_str(), static_cast<int32_t>(count));
    } else {
      BSON_APPEND_INT64(&d, sum_name.c_str(), count);
    }
    docs.push_back(Finish(&d));
  }
  return OneBatch(*ns, docs);
}

std::string Commands::CreateIndexes(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error, /*write=*/true);
  if (!ns) return error;
  bson_iter_t it;
  if (!Lookup(cmd, "indexes", &it) || !BSON_ITER_HOLDS_ARRAY(&it)) {
    return Error(14, "createIndexes: indexes must be an array");
  }
  Document specs = Sub(&it);
  bson_t sv;
  specs.View(&sv);
  struct Want {
    std::vector<IndexKey> keys;
    IndexOptions options;
  };
  std::vector<Want> wants;
  bson_iter_t s;
  if (bson_iter_init(&s, &sv)) {
    while (bson_iter_next(&s)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&s)) return Error(14, "createIndexes: spec not a document");
      Document spec = Sub(&s);
      bson_t spv;
      spec.View(&spv);
      bson_iter_t f;
      Want w;
      if (bson_iter_init(&f, &spv)) {
        while (bson_iter_next(&f)) {
          std::string key = bson_iter_key(&f);
          if (key == "key") {
            std::string problem;
            w.keys = KeyPattern(&f, &problem);
            if (w.keys.empty()) return Error(67, "createIndexes: " + problem);
          } else if (key == "unique" || key == "sparse") {
            auto v = Flag(&f);
            if (!v) return Error(14, "createIndexes: " + key + " must be a boolean");
            (key == "unique" ? w.options.unique : w.options.sparse) = *v;
          } else if (key == "partialFilterExpression" && BSON_ITER_HOLDS_DOCUMENT(&f)) {
            w.options.partial_filter = Sub(&f);
          } else if (key != "name" && key != "v" && key != "background" && key != "ns") {
            return Error(67, "createIndexes: index option " + key + " is not supported (" +
                                 spec.ToJson() + ")");
          }
        }
      }
      if (w.keys.empty()) return Error(9, "createIndexes: index spec without key");
      wants.push_back(std::move(w));
    }
  }
  auto collections = db_->ListCollections();
  if (!collections.ok()) return ErrorFor(collections.status());
  bool existed = std::find(collections->begin(), collections->end(), *ns) != collections->end();
  if (!existed) {
    Status st = db_->CreateCollection(*ns);
    if (!st.ok() && !st.IsAlreadyExists()) return ErrorFor(st);
  }
  auto before = db_->ListIndexes(*ns);
  if (!before.ok()) return ErrorFor(before.status());
  size_t n_before = before->size() + 1;
  size_t created = 0;
  for (const Want& w : wants) {
    if (w.keys.size() == 1 && w.keys[0].field == "_id") {
      // The _id index is always there; it serves either direction.
      if (w.keys[0].direction != 1 || w.options.sparse || w.options.partial_filter.size() > 5) {
        return Error(67,
                     "createIndexes: the only index on _id is {_id: 1}, which serves both "
                     "directions; one with another direction or sparse or partial is not "
                     "supported");
      }
      continue;
    }
    const IndexInfo* have = nullptr;
    for (const IndexInfo& i : *before) {
      if (SameKeys(i.keys, w.keys)) have = &i;
    }
    if (have != nullptr) {
      // The engine gives the partial filter back as Extended JSON.
      auto had = Document::FromJson(have->partial_filter.empty() ? "{}" : have->partial_filter);
      bool same_partial = had.ok() && had->ToJson() == w.options.partial_filter.ToJson();
      if (have->unique != w.options.unique || have->sparse != w.options.sparse || !same_partial) {
        return Error(85, "an index on " + MongoIndexName(w.keys) +
                             " exists with different options (unique, sparse or partial)");
      }
      continue;
    }
    Status st = db_->CreateIndex(*ns, w.keys, w.options);
    if (st.IsAlreadyExists()) {
      return Error(11000, "E11000 duplicate key error collection: " + *ns +
                              " index: " + MongoIndexName(w.keys) + " " + st.message());
    }
    if (!st.ok()) return Error(CodeFor(st) == 2 ? 67 : CodeFor(st), st.ToString());
    created++;
  }
  bson_t b;
  bson_init(&b);
  BSON_APPEND_BOOL(&b, "createdCollectionAutomatically", !existed);
  BSON_APPEND_INT32(&b, "numIndexesBefore", static_cast<int32_t>(n_before));
  BSON_APPEND_INT32(&b, "numIndexesAfter", static_cast<int32_t>(n_before + created));
  if (created == 0) BSON_APPEND_UTF8(&b, "note", "all indexes already exist");
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::DropIndexes(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  auto indexes = db_->ListIndexes(*ns);
  if (indexes.status().IsNotFound()) return Error(26, "ns not found " + *ns);
  if (!indexes.ok()) return ErrorFor(indexes.status());
  bson_iter_t it;
  if (!Lookup(cmd, "index", &it)) return Error(9, "dropIndexes: index is missing");
  // The fields to drop, from "*", a name, a list of names or a key pattern.
  std::vector<std::string> fields;
  auto by_name = [&](const std::string& name) -> std::string {
    if (name == "_id_") return Error(72, "cannot drop _id index");
    for (const IndexInfo& i : *indexes) {
      // MongoDB's default name ("a_1_b_-1"), or mmdoc's own (IndexInfo::field).
      if (name == MongoIndexName(i.keys) || name == i.field) {
        fields.push_back(i.field);
        return "";
      }
    }
    return Error(27, "index not found with name [" + name + "]");
  };
  if (BSON_ITER_HOLDS_UTF8(&it) && std::strcmp(bson_iter_utf8(&it, nullptr), "*") == 0) {
    for (const IndexInfo& i : *indexes) fields.push_back(i.field);
  } else if (BSON_ITER_HOLDS_UTF8(&it)) {
    std::string e = by_name(bson_iter_utf8(&it, nullptr));
    if (!e.empty()) return e;
  } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
    Document names = Sub(&it);
    bson_t nv;
    names.View(&nv);
    bson_iter_t n;
    if (bson_iter_init(&n, &nv)) {
      while (bson_iter_next(&n)) {
        if (!BSON_ITER_HOLDS_UTF8(&n)) return Error(14, "dropIndexes: names must be strings");
        std::string e = by_name(bson_iter_utf8(&n, nullptr));
        if (!e.empty()) return e;
      }
    }
  } else if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
    std::string problem;
    std::vector<IndexKey> keys = KeyPattern(&it, &problem);
    if (keys.empty()) return Error(27, "dropIndexes: " + problem);
    for (const IndexInfo& i : *indexes) {
      if (SameKeys(i.keys, keys)) fields.push_back(i.field);
    }
    if (fields.empty()) return Error(27, "can't find index with key " + MongoIndexName(keys));
  } else {
    return Error(14, "dropIndexes: index must be a name, a list of names, a key or \"*\"");
  }
  for (const std::string& f : fields) {
    Status s = db_->DropIndex(*ns, f);
    if (!s.ok() && !s.IsNotFound()) return ErrorFor(s);
  }
  bson_t b;
  bson_init(&b);
  BSON_APPEND_INT32(&b, "nIndexesWas", static_cast<int32_t>(indexes->size() + 1));
  BSON_APPEND_DOUBLE(&b, "ok", 1.0);
  return Finish(&b);
}

std::string Commands::ListIndexes(const std::string& db, const bson_t* cmd) {
  std::string error;
  auto ns = Namespace(db, cmd, &error);
  if (!ns) return error;
  auto indexes = db_->ListIndexes(*ns);
  if (indexes.status().IsNotFound()) return Error(26, "ns does not exist: " + *ns);
  if (!indexes.ok()) return ErrorFor(indexes.status());
  std::vector<std::string> docs;
  docs.push_back(IndexSpec(*ns, nullptr));
  for (const IndexInfo& i : *indexes) docs.push_back(IndexSpec(*ns, &i));
  return OneBatch(*ns, docs);
}

size_t Commands::ReapIdleCursors() {
  auto now = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<ServerCursor>> dead;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = cursors_.begin(); it != cursors_.end();) {
      if (!it->second->in_use && now - it->second->last_used >= options_.cursor_timeout) {
        dead.push_back(std::move(it->second));
        it = cursors_.erase(it);
      } else {
        ++it;
      }
    }
  }
  return dead.size();
}

void Commands::ConnectionClosed(int64_t connection_id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : cursors_) {
    if (c->connection == connection_id) c->orphaned = true;
  }
}

void Commands::CloseAllCursors() {
  std::map<int64_t, std::unique_ptr<ServerCursor>> dead;
  std::lock_guard<std::mutex> lock(mu_);
  dead.swap(cursors_);
}

size_t Commands::open_cursors() {
  std::lock_guard<std::mutex> lock(mu_);
  return cursors_.size();
}

}  // namespace mmdoc::server
