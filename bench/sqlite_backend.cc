// SQLite adapter: one table holding the BSON document with its _id and key
// as indexed columns; one connection (with its prepared statements) per
// session.
//
//   rowid variant ("sqlite"):           docs(id TEXT PRIMARY KEY, key TEXT
//                                       UNIQUE, doc BLOB), a rowid table, so
//                                       id has an index of its own
//   WITHOUT ROWID ("sqlite-norowid"):   the same columns clustered by id
//
// Settings: WAL journal, 256 MiB page cache per connection, 1 GiB mmap for
// reads, prepared statements, BEGIN IMMEDIATE for write transactions.
// search_value steps `SELECT doc FROM docs` and parses every BSON blob in
// C++, as the other engines do (no SQL function, no index on value).
//
// Durability: none = synchronous=OFF, fsync = synchronous=FULL (WAL synced
// on every commit); periodic, msync and group do not exist in SQLite.
//
// Key ranges, each one statement through the key column's index:
// search_prefix = SELECT doc WHERE key >= ?1 AND key < ?2 ORDER BY key
// (?2 the prefix's end; measured at 100k docs, twice each: 30k queries/s,
// p50 28 us, against 20-25k/s, p50 33-37 us, for key GLOB ?1 bound to
// 'abc*', which SQLite also turns into that index range but re-prepares
// for each new pattern and filters each row with), sort_limit = SELECT doc WHERE key >= ?1 ORDER BY
// key LIMIT ?2 (the index gives the order: no sort step); push = the
// document by id, WithTagPushed, UPDATE docs SET doc.
//
// compound (its own store): a table grouped(id TEXT PRIMARY KEY, g INTEGER,
// n INTEGER, doc BLOB) (or WITHOUT ROWID) with an index grouped_g_n on
// (g, n); a query is SELECT doc WHERE g = ?1 AND n >= ?2 AND n < ?3 ORDER
// BY n LIMIT ?4, which SQLite runs as a range of that index in n order (no
// sort step), each row then read from the table by rowid (or id).
//
// Seed 002's operations, each a statement in the session's transaction:
//   build_index   CREATE UNIQUE INDEX docs_key ON docs(key) (the table was
//                 created without UNIQUE on key; SQLite sorts, then builds)
//   delete_value  DELETE FROM docs WHERE bson_value_is(doc, ?1), where
//                 bson_value_is is a deterministic SQL function that tests
//                 the `value` field with FieldEquals, as the other engines'
//                 scans do (the byte pre-check, then the parser)
//   delete_all    DELETE FROM docs (no WHERE: SQLite's truncate
//                 optimization clears the table and its indexes page by page)
#include <sqlite3.h>

#include <string>
#include <vector>

#include "bench/backend.h"
#include "bench/backends.h"
#include "bench/bson_doc.h"

namespace mmdoc::bench {
namespace {

Status SqliteError(const char* what, sqlite3* db) {
  int rc = sqlite3_extended_errcode(db);
  if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
    return Status::AlreadyExists(what, sqlite3_errmsg(db));
  }
  if (rc == SQLITE_FULL) return Status::Full(what, sqlite3_errmsg(db));
  return Status::IOError(what, sqlite3_errmsg(db));
}

class SqliteBackend;

// A prepared statement, reset after every use.
class Stmt {
 public:
  Stmt() = default;
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  int Prepare(sqlite3* db, const char* sql) {
    return sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  }
  sqlite3_stmt* get() const { return stmt_; }
  void BindText(int i, std::string_view s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
  }
  void BindBlob(int i, std::string_view s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_STATIC);
  }
  int Step() { return sqlite3_step(stmt_); }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string_view Blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return std::string_view(static_cast<const char*>(p), static_cast<size_t>(n));
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteSession : public Session {
 public:
  SqliteSession() = default;

  Status Init(const std::string& path, const char* synchronous);

  Status Begin() override { return Exec(&begin_, "BEGIN"); }
  Status Commit() override { return Exec(&commit_, "COMMIT"); }
  Status Insert(const DocRef& doc) override;
  Status UpdateValue(std::string_view id, std::string_view value) override;
  Status Delete(std::string_view id) override;
  Status GetById(std::string_view id, std::string* value) override;
  Status FindByKey(std::string_view key, std::string* value) override;
  Status ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) override;
  Status FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) override;
  Status FindKeysFrom(std::string_view from, int limit, std::vector<std::string>* values) override;
  Status GetDocument(std::string_view id, std::string* bson) override;
  Status PushTag(std::string_view id, std::string_view tag) override;
  Status BuildKeyIndex() override;
  Status DeleteByValue(std::string_view value, uint64_t* deleted) override;
  Status DeleteAll() override;
  Status Count(uint64_t* docs, uint64_t* key_entries) override;
  Status InsertGrouped(const GroupDocRef& doc) override;
  Status FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                        std::vector<std::string>* docs) override;
  Status ExplainGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                           std::string* plan) override;

 private:
  Status Exec(Stmt* stmt, const char* what) {
    int rc = stmt->Step();
    stmt->Reset();
    return rc == SQLITE_DONE ? Status::OK() : SqliteError(what, db_);
  }
  // Steps a statement that selects one doc column and copies its `value`.
  Status SelectValue(Stmt* stmt, const char* what, std::string* value);
  // Steps a bound statement that selects doc columns; the `value` of each.
  Status SelectValues(Stmt* stmt, const char* what, std::vector<std::string>* values);

  struct Db {
    sqlite3* db = nullptr;
    ~Db() { sqlite3_close_v2(db); }
  };
  // Declared first so it is destroyed last, after every statement.
  Db holder_;
  sqlite3*& db_ = holder_.db;
  Stmt begin_, commit_, insert_, select_by_id_, select_by_key_, update_, delete_, scan_,
      delete_by_value_, delete_all_, key_prefix_, keys_from_;
  // The compound store's, prepared on first use: the main store has no
  // table `grouped`.
  Stmt insert_grouped_, group_range_;
  std::string scratch_;
};

// bson_value_is(doc, v): 1 when the BSON blob's `value` field is the text
// v, else 0. The FieldEquals for v is kept as the argument's auxdata, so a
// statement builds it once, not once per row.
void BsonValueIsFunction(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto* m = static_cast<FieldEquals*>(sqlite3_get_auxdata(ctx, 1));
  if (m == nullptr) {
    const unsigned char* t = sqlite3_value_text(argv[1]);
    int tn = sqlite3_value_bytes(argv[1]);
    m = new FieldEquals(
        "value", std::string_view(reinterpret_cast<const char*>(t), static_cast<size_t>(tn)));
    sqlite3_set_auxdata(ctx, 1, m, [](void* p) { delete static_cast<FieldEquals*>(p); });
    m = static_cast<FieldEquals*>(sqlite3_get_auxdata(ctx, 1));
    if (m == nullptr) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
  }
  const void* p = sqlite3_value_blob(argv[0]);
  int n = sqlite3_value_bytes(argv[0]);
  bool bad = false;
  bool hit = p != nullptr && (*m)(p, static_cast<size_t>(n), &bad);
  if (bad) {
    sqlite3_result_error(ctx, "bad BSON", -1);
    return;
  }
  sqlite3_result_int(ctx, hit ? 1 : 0);
}

Status SqliteSession::Init(const std::string& path, const char* synchronous) {
  int rc =
      sqlite3_open_v2(path.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return SqliteError("sqlite3_open", db_);
  std::string pragmas = "PRAGMA synchronous=" + std::string(synchronous) +
                        "; PRAGMA cache_size=-262144; PRAGMA mmap_size=1073741824;"
                        " PRAGMA temp_store=MEMORY;";
  if (sqlite3_exec(db_, pragmas.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteError("pragmas", db_);
  }
  sqlite3_busy_timeout(db_, 60000);
  if (sqlite3_create_function_v2(db_, "bson_value_is", 2,
                                 SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nullptr,
                                 BsonValueIsFunction, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteError("bson_value_is function", db_);
  }
  struct {
    Stmt* stmt;
    const char* sql;
  } stmts[] = {
      {&begin_, "BEGIN IMMEDIATE"},
      {&commit_, "COMMIT"},
      {&insert_, "INSERT INTO docs(id, key, doc) VALUES (?1, ?2, ?3)"},
      {&select_by_id_, "SELECT doc FROM docs WHERE id = ?1"},
      {&select_by_key_, "SELECT doc FROM docs WHERE key = ?1"},
      {&update_, "UPDATE docs SET doc = ?2 WHERE id = ?1"},
      {&delete_, "DELETE FROM docs WHERE id = ?1"},
      {&scan_, "SELECT doc FROM docs"},
      {&delete_by_value_, "DELETE FROM docs WHERE bson_value_is(doc, ?1)"},
      {&delete_all_, "DELETE FROM docs"},
      {&key_prefix_, "SELECT doc FROM docs WHERE key >= ?1 AND key < ?2 ORDER BY key"},
      {&keys_from_, "SELECT doc FROM docs WHERE key >= ?1 ORDER BY key LIMIT ?2"},
  };
  for (auto& s : stmts) {
    if (s.stmt->Prepare(db_, s.sql) != SQLITE_OK) return SqliteError(s.sql, db_);
  }
  return Status::OK();
}

Status SqliteSession::Insert(const DocRef& doc) {
  insert_.BindText(1, doc.id);
  insert_.BindText(2, doc.key);
  insert_.BindBlob(3, doc.bson);
  return Exec(&insert_, "insert");
}

Status SqliteSession::SelectValue(Stmt* stmt, const char* what, std::string* value) {
  int rc = stmt->Step();
  Status s;
  if (rc == SQLITE_ROW) {
    std::string_view doc = stmt->Blob(0), field;
    if (FieldOf(doc.data(), doc.size(), "value", &field)) {
      value->assign(field);
    } else {
      s = Status::Corruption("bad BSON");
    }
  } else if (rc == SQLITE_DONE) {
    s = Status::NotFound(what);
  } else {
    s = SqliteError(what, db_);
  }
  stmt->Reset();
  return s;
}

Status SqliteSession::UpdateValue(std::string_view id, std::string_view value) {
  select_by_id_.BindText(1, id);
  int rc = select_by_id_.Step();
  Status s;
  if (rc == SQLITE_ROW) {
    if (!WithValue(select_by_id_.Blob(0), value, &scratch_)) s = Status::Corruption("bad BSON");
  } else {
    s = rc == SQLITE_DONE ? Status::NotFound("update") : SqliteError("update get", db_);
  }
  select_by_id_.Reset();
  MMDOC_RETURN_IF_ERROR(s);
  // The key column is unchanged, so its index is not touched.
  update_.BindText(1, id);
  update_.BindBlob(2, scratch_);
  return Exec(&update_, "update");
}

Status SqliteSession::Delete(std::string_view id) {
  // The key index entry goes with the row.
  delete_.BindText(1, id);
  MMDOC_RETURN_IF_ERROR(Exec(&delete_, "delete"));
  if (sqlite3_changes(db_) == 0) return Status::NotFound("delete");
  return Status::OK();
}

Status SqliteSession::GetById(std::string_view id, std::string* value) {
  select_by_id_.BindText(1, id);
  return SelectValue(&select_by_id_, "get _id", value);
}

Status SqliteSession::FindByKey(std::string_view key, std::string* value) {
  select_by_key_.BindText(1, key);
  return SelectValue(&select_by_key_, "find key", value);
}

Status SqliteSession::ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) {
  *found = false;
  uint64_t bytes = 0;
  int rc;
  Status s;
  const FieldEquals matches("value", value);
  bool bad = false;
  while ((rc = scan_.Step()) == SQLITE_ROW) {
    std::string_view doc = scan_.Blob(0);
    bytes += doc.size();
    if (matches(doc.data(), doc.size(), &bad)) *found = true;
    if (bad) {
      s = Status::Corruption("bad BSON");
      break;
    }
  }
  if (s.ok() && rc != SQLITE_DONE) s = SqliteError("scan", db_);
  scan_.Reset();
  if (scanned_bytes != nullptr) *scanned_bytes = bytes;
  return s;
}

Status SqliteSession::SelectValues(Stmt* stmt, const char* what, std::vector<std::string>* values) {
  values->clear();
  int rc;
  Status s;
  std::string_view field;
  while ((rc = stmt->Step()) == SQLITE_ROW) {
    std::string_view doc = stmt->Blob(0);
    if (!FieldOf(doc.data(), doc.size(), "value", &field)) {
      s = Status::Corruption("bad BSON");
      break;
    }
    values->emplace_back(field);
  }
  if (s.ok() && rc != SQLITE_DONE) s = SqliteError(what, db_);
  stmt->Reset();
  return s;
}

Status SqliteSession::FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) {
  const std::string end = PrefixEnd(prefix);
  key_prefix_.BindText(1, prefix);
  key_prefix_.BindText(2, end);
  return SelectValues(&key_prefix_, "key prefix", values);
}

Status SqliteSession::FindKeysFrom(std::string_view from, int limit,
                                   std::vector<std::string>* values) {
  keys_from_.BindText(1, from);
  sqlite3_bind_int(keys_from_.get(), 2, limit);
  return SelectValues(&keys_from_, "keys from", values);
}

constexpr char kGroupRangeSql[] =
    "SELECT doc FROM grouped WHERE g = ?1 AND n >= ?2 AND n < ?3 ORDER BY n LIMIT ?4";

Status SqliteSession::InsertGrouped(const GroupDocRef& doc) {
  if (insert_grouped_.get() == nullptr) {
    const char* sql = "INSERT INTO grouped(id, g, n, doc) VALUES (?1, ?2, ?3, ?4)";
    if (insert_grouped_.Prepare(db_, sql) != SQLITE_OK) return SqliteError(sql, db_);
  }
  insert_grouped_.BindText(1, doc.id);
  sqlite3_bind_int(insert_grouped_.get(), 2, doc.g);
  sqlite3_bind_int(insert_grouped_.get(), 3, doc.n);
  insert_grouped_.BindBlob(4, doc.bson);
  return Exec(&insert_grouped_, "insert grouped");
}

Status SqliteSession::FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                     std::vector<std::string>* docs) {
  if (group_range_.get() == nullptr && group_range_.Prepare(db_, kGroupRangeSql) != SQLITE_OK) {
    return SqliteError(kGroupRangeSql, db_);
  }
  sqlite3_stmt* st = group_range_.get();
  sqlite3_bind_int(st, 1, g);
  sqlite3_bind_int(st, 2, lo);
  sqlite3_bind_int(st, 3, hi);
  sqlite3_bind_int(st, 4, limit);
  docs->clear();
  int rc;
  while ((rc = group_range_.Step()) == SQLITE_ROW) docs->emplace_back(group_range_.Blob(0));
  Status s = rc == SQLITE_DONE ? Status::OK() : SqliteError("group range", db_);
  group_range_.Reset();
  return s;
}

Status SqliteSession::ExplainGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                        std::string* plan) {
  // EXPLAIN QUERY PLAN's detail column, one line per step; SQLite's plan
  // does not depend on the bound values.
  (void)g;
  (void)lo;
  (void)hi;
  (void)limit;
  Stmt stmt;
  const std::string sql = std::string("EXPLAIN QUERY PLAN ") + kGroupRangeSql;
  if (stmt.Prepare(db_, sql.c_str()) != SQLITE_OK) return SqliteError(sql.c_str(), db_);
  plan->clear();
  int rc;
  while ((rc = stmt.Step()) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(stmt.get(), 3);
    if (!plan->empty()) *plan += "\n";
    if (t != nullptr) *plan += reinterpret_cast<const char*>(t);
  }
  return rc == SQLITE_DONE ? Status::OK() : SqliteError("explain", db_);
}

Status SqliteSession::GetDocument(std::string_view id, std::string* bson) {
  select_by_id_.BindText(1, id);
  int rc = select_by_id_.Step();
  Status s;
  if (rc == SQLITE_ROW) {
    bson->assign(select_by_id_.Blob(0));
  } else {
    s = rc == SQLITE_DONE ? Status::NotFound("get document") : SqliteError("get document", db_);
  }
  select_by_id_.Reset();
  return s;
}

Status SqliteSession::PushTag(std::string_view id, std::string_view tag) {
  select_by_id_.BindText(1, id);
  int rc = select_by_id_.Step();
  Status s;
  if (rc == SQLITE_ROW) {
    if (!WithTagPushed(select_by_id_.Blob(0), tag, &scratch_)) s = Status::Corruption("bad BSON");
  } else {
    s = rc == SQLITE_DONE ? Status::NotFound("push") : SqliteError("push get", db_);
  }
  select_by_id_.Reset();
  MMDOC_RETURN_IF_ERROR(s);
  update_.BindText(1, id);
  update_.BindBlob(2, scratch_);
  return Exec(&update_, "push");
}

Status SqliteSession::BuildKeyIndex() {
  if (sqlite3_exec(db_, "CREATE UNIQUE INDEX docs_key ON docs(key)", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    return SqliteError("create index", db_);
  }
  return Status::OK();
}

Status SqliteSession::DeleteByValue(std::string_view value, uint64_t* deleted) {
  delete_by_value_.BindText(1, value);
  MMDOC_RETURN_IF_ERROR(Exec(&delete_by_value_, "delete_value"));
  *deleted = static_cast<uint64_t>(sqlite3_changes64(db_));
  return Status::OK();
}

Status SqliteSession::DeleteAll() { return Exec(&delete_all_, "delete_all"); }

Status SqliteSession::Count(uint64_t* docs, uint64_t* key_entries) {
  // One read transaction; the key index is whichever index covers `key`
  // (the UNIQUE constraint's, or docs_key after build_index), counted
  // through that index.
  auto query = [&](const std::string& sql, std::string* text, uint64_t* number) -> Status {
    Stmt stmt;
    if (stmt.Prepare(db_, sql.c_str()) != SQLITE_OK) return SqliteError(sql.c_str(), db_);
    int rc = stmt.Step();
    if (rc == SQLITE_ROW) {
      if (text != nullptr) {
        const unsigned char* t = sqlite3_column_text(stmt.get(), 0);
        if (t != nullptr) text->assign(reinterpret_cast<const char*>(t));
      }
      if (number != nullptr) *number = static_cast<uint64_t>(sqlite3_column_int64(stmt.get(), 0));
    } else if (rc != SQLITE_DONE) {
      return SqliteError(sql.c_str(), db_);
    }
    return Status::OK();
  };
  MMDOC_RETURN_IF_ERROR(query("BEGIN", nullptr, nullptr));
  std::string index;
  Status s = query("SELECT count(*) FROM docs", nullptr, docs);
  if (s.ok()) {
    s = query(
        "SELECT il.name FROM pragma_index_list('docs') AS il, "
        "pragma_index_info(il.name) AS ii WHERE ii.name = 'key'",
        &index, nullptr);
  }
  *key_entries = 0;
  if (s.ok() && !index.empty()) {
    s = query("SELECT count(*) FROM docs INDEXED BY \"" + index + "\"", nullptr, key_entries);
  }
  Status end = query("COMMIT", nullptr, nullptr);
  return s.ok() ? end : s;
}

class SqliteBackend : public Backend {
 public:
  explicit SqliteBackend(bool rowid) : rowid_(rowid) {}

  std::string name() const override { return rowid_ ? "sqlite" : "sqlite-norowid"; }

  bool Supports(Durability d) const override {
    return d == Durability::kNone || d == Durability::kFsync;
  }

  Status Open(const std::string& dir, const BackendConfig& config) override {
    path_ = dir + "/bench.sqlite";
    synchronous_ = config.durability == Durability::kNone ? "OFF" : "FULL";
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      Status s = SqliteError("sqlite3_open", db);
      sqlite3_close_v2(db);
      return s;
    }
    key_index_ = config.key_index;
    group_index_ = config.group_index;
    std::string schema = "PRAGMA journal_mode=WAL; CREATE TABLE docs(";
    schema += key_index_ ? "id TEXT PRIMARY KEY NOT NULL, key TEXT NOT NULL "
                           "UNIQUE, doc BLOB NOT NULL)"
                         : "id TEXT PRIMARY KEY NOT NULL, key TEXT NOT NULL, "
                           "doc BLOB NOT NULL)";
    if (!rowid_) schema += " WITHOUT ROWID";
    schema += ";";
    if (group_index_) {
      schema +=
          " CREATE TABLE grouped(id TEXT PRIMARY KEY NOT NULL, g INTEGER NOT NULL, n INTEGER "
          "NOT NULL, doc BLOB NOT NULL)";
      if (!rowid_) schema += " WITHOUT ROWID";
      schema += "; CREATE INDEX grouped_g_n ON grouped(g, n);";
    }
    Status s;
    if (sqlite3_exec(db, schema.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
      s = SqliteError("create table", db);
    }
    sqlite3_close_v2(db);
    return s;
  }

  std::string settings() const override {
    std::string s = "SQLite " + std::string(sqlite3_libversion()) + ": ";
    s += rowid_ ? "rowid table docs(id TEXT PRIMARY KEY, key TEXT UNIQUE, doc BLOB)"
                : "docs(id TEXT PRIMARY KEY, key TEXT UNIQUE, doc BLOB) WITHOUT "
                  "ROWID";
    s += ", journal_mode=WAL, synchronous=" + synchronous_ +
         ", cache_size 256 MiB, mmap_size 1 GiB, prepared statements, BEGIN "
         "IMMEDIATE, "
         "one connection per thread, scan = SELECT doc + byte pre-check + BSON "
         "parse in C++";
    if (group_index_) {
      s += ", compound store: grouped(id TEXT PRIMARY KEY, g INTEGER, n INTEGER, doc BLOB) with "
           "INDEX grouped_g_n(g, n), query = SELECT doc WHERE g = ? AND n >= ? AND n < ? ORDER "
           "BY n LIMIT ?";
    } else if (!key_index_) {
      s += ", key not UNIQUE (until build_index)";
    }
    s += ", search_prefix = SELECT doc WHERE key >= prefix AND key < its end ORDER BY key, "
         "sort_limit = SELECT doc WHERE key >= ? ORDER BY key LIMIT 10, push = SELECT doc + "
         "append + UPDATE";
    s += ", build_index = CREATE UNIQUE INDEX, delete_value = DELETE WHERE "
         "bson_value_is(doc, ?), delete_all = DELETE FROM docs";
    return s;
  }

  Result<std::unique_ptr<Session>> NewSession() override {
    auto session = std::make_unique<SqliteSession>();
    Status s = session->Init(path_, synchronous_.c_str());
    if (!s.ok()) return s;
    return std::unique_ptr<Session>(std::move(session));
  }

  Status Close() override { return Status::OK(); }

 private:
  const bool rowid_;
  bool key_index_ = true;
  bool group_index_ = false;
  std::string path_;
  std::string synchronous_;
};

}  // namespace

std::unique_ptr<Backend> NewSqliteBackend(bool rowid) {
  return std::make_unique<SqliteBackend>(rowid);
}

}  // namespace mmdoc::bench
