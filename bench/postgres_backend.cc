// PostgreSQL adapter ("postgres"): the relational-server peer. The bench
// starts a private server for each store (bench/pg_server.h: initdb in the
// store's directory, the server as the bench's child on a Unix socket,
// stopped at Close, on Ctrl-C and when the bench dies) and talks to it
// through libpq, one connection per session. "postgres" connects over the
// server's private Unix socket; "postgres-tcp" (mmdoc-bench --clients
// remote) over TCP on 127.0.0.1, a free port, the server listening there
// only: the network stack's cost, as mmdoc-remote's driver pays it.
//
// Schema, in the `postgres` database of the fresh cluster:
//   docs(id text COLLATE "C" PRIMARY KEY, key text COLLATE "C" UNIQUE,
//        doc bytea NOT NULL)
// doc holds the workload's BSON bytes unchanged, as SQLite's BLOB does, so
// every engine hands back the same bytes and the `value` is read from them
// with the same parser (FieldOf) in C++. The table keeps PostgreSQL's
// default fillfactor (100): 90, room for HOT updates, measured 7% faster
// updates at 100k documents (p50 23.5 against 25.3 us, on a busy machine)
// for a 10% bigger table that every scan reads. A jsonb column instead
// (measured at 50k, twice: the bench converting BSON to JSON for the
// insert, the server returning doc->>'value', matching doc->>'value' = $1
// in the scan, updating with jsonb_set in one statement) gave inserts 0.85x
// (JSON made and parsed per document), point reads 1.0x, scans 1.18x and
// updates 1.5x, the last from one round trip instead of a read and a
// write. bytea is kept for parity: every engine reads the stored BSON and
// parses it in the bench, and every update is a read-modify-write of the
// document; with jsonb the server would do that work instead, differently.
// COLLATE "C" compares bytes, as every other engine's keys do.
//
// Statements: prepared once per connection (PQprepare), run with binary
// parameters and binary results (PQexecPrepared), so no text escaping or hex
// decoding of bytea. Inserts are `INSERT ... ON CONFLICT DO NOTHING`: a
// duplicate _id or key inserts nothing (0 rows, reported as AlreadyExists)
// without aborting the batch's transaction, as the other engines' refused
// inserts do; a plain INSERT's unique violation would abort it.
//
// Durability: none = synchronous_commit=off (commits do not wait for the WAL
// flush; the WAL writer flushes in the background, a crash of the machine
// loses the last commits and nothing else: fsync stays on, so the cluster is
// never corrupted); fsync = synchronous_commit=on (each commit waits for
// the WAL's fsync); group = synchronous_commit=on with the workload's
// concurrent writers, whose commits PostgreSQL's WAL flush groups (a flush
// covers every commit record written before it). periodic and msync have no
// PostgreSQL counterpart.
//
// Phases:
//   search_value  SELECT doc FROM docs WHERE position($1 in doc) > 0, $1 the
//                 value's BSON string bytes: FieldEquals' byte pre-check run
//                 by the server over every document, then FieldEquals in C++
//                 on the candidates that come back (the BSON parse), so the
//                 work is the other engines'. Measured at 50k documents:
//                 118 scans/s this way, 41/s fetching every document through
//                 a binary cursor (FETCH 10000) and checking all in C++, as
//                 SQLite's adapter does in-process: the socket and libpq's
//                 row handling cost more than the scan. One core per scan
//                 (max_parallel_workers_per_gather=0), like every engine's.
//   search_prefix SELECT doc FROM docs WHERE key >= $1 AND key < $2 ORDER
//                 BY key ($2 the prefix's end): an index range scan of the
//                 key index; LIKE 'abc%' (which COLLATE "C" lets use the
//                 index) is the same range plus a LIKE filter on each row
//   sort_limit    SELECT doc FROM docs WHERE key >= $1 ORDER BY key LIMIT
//                 $2: the index walked in order, stopped at the limit
//   push          SELECT doc by id, WithTagPushed in C++, UPDATE by id (as
//                 update: every engine reads, changes and writes the BSON)
//   delete_value  the same select (id, doc) in the caller's transaction,
//                 then DELETE by id for the documents FieldEquals accepts
//   delete_all    TRUNCATE docs (transactional in PostgreSQL; the table and
//                 its indexes get new empty files)
//   build_index   CREATE UNIQUE INDEX docs_key ON docs(key) inside a
//                 savepoint, so a duplicate key fails the build, not the
//                 transaction
//   compound      its own store: grouped(id text COLLATE "C" PRIMARY KEY,
//                 g int4, n int4, doc bytea) with a btree index grouped_g_n
//                 on (g, n); a query is SELECT doc FROM grouped WHERE g = $1
//                 AND n >= $2 AND n < $3 ORDER BY n LIMIT $4 (an index scan
//                 in n order, stopped at the limit)
#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/backend.h"
#include "bench/backends.h"
#include "bench/bson_doc.h"
#include "bench/pg_server.h"

namespace mmdoc::bench {
namespace {

// Type OIDs (pg_type.dat): parameters are declared, not inferred.
constexpr Oid kTextOid = 25;
constexpr Oid kByteaOid = 17;
constexpr Oid kInt4Oid = 23;
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result_ = std::unique_ptr<PGresult, ResultDeleter>;

// A failed statement as a Status: a unique violation is AlreadyExists, a
// full disk Full, anything else IOError with the server's message.
Status PgError(const char* what, PGconn* conn, const PGresult* res) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = res != nullptr ? PQresultErrorMessage(res) : PQerrorMessage(conn);
  if (message.empty()) message = PQerrorMessage(conn);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  if (state != nullptr && std::strcmp(state, "23505") == 0) {
    return Status::AlreadyExists(what, message);
  }
  if (state != nullptr && std::strcmp(state, "53100") == 0) return Status::Full(what, message);
  return Status::IOError(what, message);
}

// The command's row count ("INSERT 0 1" -> 1).
uint64_t RowsOf(PGresult* res) { return std::strtoull(PQcmdTuples(res), nullptr, 10); }

class PgSession : public Session {
 public:
  PgSession() = default;
  ~PgSession() override {
    if (conn_ != nullptr) PQfinish(conn_);
  }

  Status Init(const std::string& conninfo);

  Status Begin() override { return Exec("BEGIN"); }
  Status Commit() override {
    Result_ res(PQexec(conn_, "COMMIT"));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return PgError("COMMIT", conn_, res.get());
    // COMMIT of a transaction an earlier error aborted rolls it back.
    if (std::strcmp(PQcmdStatus(res.get()), "ROLLBACK") == 0) {
      return Status::IOError("commit", "an earlier error aborted the transaction: rolled back");
    }
    return Status::OK();
  }
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
  // The compound store's statements, prepared on first use: the main
  // store has no table `grouped`.
  Status PrepareGrouped();

  // A statement without parameters or rows (simple protocol).
  Status Exec(const char* sql) {
    Result_ res(PQexec(conn_, sql));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return PgError(sql, conn_, res.get());
    return Status::OK();
  }
  // A prepared statement with binary parameters and binary results; *res
  // gets the result of a statement that succeeded.
  Status Run(const char* name, std::initializer_list<std::string_view> params, Result_* res) {
    const char* values[4];
    int lengths[4];
    const int formats[4] = {1, 1, 1, 1};
    int n = 0;
    for (std::string_view p : params) {
      values[n] = p.data();
      lengths[n] = static_cast<int>(p.size());
      ++n;
    }
    res->reset(PQexecPrepared(conn_, name, n, values, lengths, formats, 1));
    ExecStatusType st = PQresultStatus(res->get());
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return PgError(name, conn_, res->get());
    return Status::OK();
  }
  // The `value` of the one document a select returned; NotFound for none.
  Status ValueOf(const PGresult* res, const char* what, std::string* value) {
    if (PQntuples(res) == 0) return Status::NotFound(what);
    std::string_view field;
    if (!FieldOf(PQgetvalue(res, 0, 0), static_cast<size_t>(PQgetlength(res, 0, 0)), "value",
                 &field)) {
      return Status::Corruption("bad BSON");
    }
    value->assign(field);
    return Status::OK();
  }
  // The `value` of every document (column 0) a select returned.
  static Status ValuesOf(const PGresult* res, std::vector<std::string>* values) {
    values->clear();
    std::string_view field;
    for (int i = 0; i < PQntuples(res); ++i) {
      if (!FieldOf(PQgetvalue(res, i, 0), static_cast<size_t>(PQgetlength(res, i, 0)), "value",
                   &field)) {
        return Status::Corruption("bad BSON");
      }
      values->emplace_back(field);
    }
    return Status::OK();
  }
  PGconn* conn_ = nullptr;
  bool grouped_prepared_ = false;
  std::string scratch_;
};

// A binary int4 parameter: 4 bytes, big-endian.
struct Int4 {
  explicit Int4(int32_t v) {
    const uint32_t u = static_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>(u >> (24 - 8 * i));
  }
  std::string_view view() const { return std::string_view(bytes, 4); }
  char bytes[4];
};

Status PgSession::Init(const std::string& conninfo) {
  conn_ = PQconnectdb(conninfo.c_str());
  if (PQstatus(conn_) != CONNECTION_OK) {
    return Status::IOError("connect to postgres", PQerrorMessage(conn_));
  }
  struct {
    const char* name;
    const char* sql;
    int params;
    Oid types[3];
  } stmts[] = {
      {"insert",
       "INSERT INTO docs(id, key, doc) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
       3,
       {kTextOid, kTextOid, kByteaOid}},
      {"by_id", "SELECT doc FROM docs WHERE id = $1", 1, {kTextOid}},
      {"by_key", "SELECT doc FROM docs WHERE key = $1", 1, {kTextOid}},
      {"update", "UPDATE docs SET doc = $2 WHERE id = $1", 2, {kTextOid, kByteaOid}},
      {"delete", "DELETE FROM docs WHERE id = $1", 1, {kTextOid}},
      {"scan_match", "SELECT doc FROM docs WHERE position($1 in doc) > 0", 1, {kByteaOid}},
      {"scan_match_id", "SELECT id, doc FROM docs WHERE position($1 in doc) > 0", 1, {kByteaOid}},
      {"key_prefix",
       "SELECT doc FROM docs WHERE key >= $1 AND key < $2 ORDER BY key",
       2,
       {kTextOid, kTextOid}},
      {"keys_from",
       "SELECT doc FROM docs WHERE key >= $1 ORDER BY key LIMIT $2",
       2,
       {kTextOid, kInt4Oid}},
  };
  for (const auto& s : stmts) {
    Result_ res(PQprepare(conn_, s.name, s.sql, s.params, s.types));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return PgError(s.sql, conn_, res.get());
  }
  return Status::OK();
}

Status PgSession::Insert(const DocRef& doc) {
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("insert", {doc.id, doc.key, doc.bson}, &res));
  if (RowsOf(res.get()) == 0) return Status::AlreadyExists("insert", "duplicate _id or key");
  return Status::OK();
}

Status PgSession::UpdateValue(std::string_view id, std::string_view value) {
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("by_id", {id}, &res));
  if (PQntuples(res.get()) == 0) return Status::NotFound("update");
  std::string_view doc(PQgetvalue(res.get(), 0, 0),
                       static_cast<size_t>(PQgetlength(res.get(), 0, 0)));
  if (!WithValue(doc, value, &scratch_)) return Status::Corruption("bad BSON");
  // The key column is unchanged: a HOT update when the page has room.
  MMDOC_RETURN_IF_ERROR(Run("update", {id, scratch_}, &res));
  return RowsOf(res.get()) == 0 ? Status::NotFound("update") : Status::OK();
}

Status PgSession::Delete(std::string_view id) {
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("delete", {id}, &res));
  return RowsOf(res.get()) == 0 ? Status::NotFound("delete") : Status::OK();
}

Status PgSession::GetById(std::string_view id, std::string* value) {
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("by_id", {id}, &res));
  return ValueOf(res.get(), "get _id", value);
}

Status PgSession::FindByKey(std::string_view key, std::string* value) {
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("by_key", {key}, &res));
  return ValueOf(res.get(), "find key", value);
}

// BSON's encoding of a string value: int32 length (with the NUL), bytes,
// NUL: the bytes FieldEquals searches for first.
std::string Needle(std::string_view value) {
  std::string n;
  const uint32_t len = static_cast<uint32_t>(value.size()) + 1;
  for (int i = 0; i < 4; ++i) n.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  n.append(value);
  n.push_back('\0');
  return n;
}

Status PgSession::ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) {
  *found = false;
  const FieldEquals matches("value", value);
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("scan_match", {Needle(value)}, &res));
  for (int i = 0; i < PQntuples(res.get()); ++i) {
    bool bad = false;
    if (matches(PQgetvalue(res.get(), i, 0), static_cast<size_t>(PQgetlength(res.get(), i, 0)),
                &bad)) {
      *found = true;
    }
    if (bad) return Status::Corruption("bad BSON");
  }
  // The server read the documents; the bench saw only the candidates.
  if (scanned_bytes != nullptr) *scanned_bytes = 0;
  return Status::OK();
}

Status PgSession::FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) {
  const std::string end = PrefixEnd(prefix);
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("key_prefix", {prefix, end}, &res));
  return ValuesOf(res.get(), values);
}

Status PgSession::FindKeysFrom(std::string_view from, int limit, std::vector<std::string>* values) {
  // A binary int4 parameter: 4 bytes, big-endian.
  const uint32_t n = static_cast<uint32_t>(limit);
  const char be[4] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                      static_cast<char>(n >> 8), static_cast<char>(n)};
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("keys_from", {from, std::string_view(be, 4)}, &res));
  return ValuesOf(res.get(), values);
}

Status PgSession::PrepareGrouped() {
  if (grouped_prepared_) return Status::OK();
  struct {
    const char* name;
    const char* sql;
    Oid types[4];
  } stmts[] = {
      {"insert_grouped",
       "INSERT INTO grouped(id, g, n, doc) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
       {kTextOid, kInt4Oid, kInt4Oid, kByteaOid}},
      {"group_range",
       "SELECT doc FROM grouped WHERE g = $1 AND n >= $2 AND n < $3 ORDER BY n LIMIT $4",
       {kInt4Oid, kInt4Oid, kInt4Oid, kInt4Oid}},
  };
  for (const auto& s : stmts) {
    Result_ res(PQprepare(conn_, s.name, s.sql, 4, s.types));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) return PgError(s.sql, conn_, res.get());
  }
  grouped_prepared_ = true;
  return Status::OK();
}

Status PgSession::InsertGrouped(const GroupDocRef& doc) {
  MMDOC_RETURN_IF_ERROR(PrepareGrouped());
  const Int4 g(doc.g), n(doc.n);
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("insert_grouped", {doc.id, g.view(), n.view(), doc.bson}, &res));
  if (RowsOf(res.get()) == 0) return Status::AlreadyExists("insert grouped", "duplicate _id");
  return Status::OK();
}

Status PgSession::FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                 std::vector<std::string>* docs) {
  MMDOC_RETURN_IF_ERROR(PrepareGrouped());
  const Int4 pg(g), plo(lo), phi(hi), plimit(limit);
  Result_ res;
  MMDOC_RETURN_IF_ERROR(
      Run("group_range", {pg.view(), plo.view(), phi.view(), plimit.view()}, &res));
  docs->clear();
  for (int i = 0; i < PQntuples(res.get()); ++i) {
    docs->emplace_back(PQgetvalue(res.get(), i, 0),
                       static_cast<size_t>(PQgetlength(res.get(), i, 0)));
  }
  return Status::OK();
}

Status PgSession::ExplainGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                                    std::string* plan) {
  const std::string sql = "EXPLAIN SELECT doc FROM grouped WHERE g = " + std::to_string(g) +
                          " AND n >= " + std::to_string(lo) + " AND n < " + std::to_string(hi) +
                          " ORDER BY n LIMIT " + std::to_string(limit);
  Result_ res(PQexec(conn_, sql.c_str()));
  if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) return PgError("explain", conn_, res.get());
  plan->clear();
  for (int i = 0; i < PQntuples(res.get()); ++i) {
    if (!plan->empty()) *plan += "\n";
    *plan += PQgetvalue(res.get(), i, 0);
  }
  return Status::OK();
}

Status PgSession::GetDocument(std::string_view id, std::string* bson) {
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("by_id", {id}, &res));
  if (PQntuples(res.get()) == 0) return Status::NotFound("get document");
  bson->assign(PQgetvalue(res.get(), 0, 0), static_cast<size_t>(PQgetlength(res.get(), 0, 0)));
  return Status::OK();
}

Status PgSession::PushTag(std::string_view id, std::string_view tag) {
  Result_ res;
  MMDOC_RETURN_IF_ERROR(Run("by_id", {id}, &res));
  if (PQntuples(res.get()) == 0) return Status::NotFound("push");
  std::string_view doc(PQgetvalue(res.get(), 0, 0),
                       static_cast<size_t>(PQgetlength(res.get(), 0, 0)));
  if (!WithTagPushed(doc, tag, &scratch_)) return Status::Corruption("bad BSON");
  MMDOC_RETURN_IF_ERROR(Run("update", {id, scratch_}, &res));
  return RowsOf(res.get()) == 0 ? Status::NotFound("push") : Status::OK();
}

Status PgSession::BuildKeyIndex() {
  MMDOC_RETURN_IF_ERROR(Exec("SAVEPOINT build_index"));
  Result_ res(PQexec(conn_, "CREATE UNIQUE INDEX docs_key ON docs(key)"));
  if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
    Status s = PgError("create index", conn_, res.get());
    Status undo = Exec("ROLLBACK TO SAVEPOINT build_index");
    return undo.ok() ? s : undo;
  }
  return Exec("RELEASE SAVEPOINT build_index");
}

Status PgSession::DeleteByValue(std::string_view value, uint64_t* deleted) {
  *deleted = 0;
  const FieldEquals matches("value", value);
  Result_ found;
  MMDOC_RETURN_IF_ERROR(Run("scan_match_id", {Needle(value)}, &found));
  for (int i = 0; i < PQntuples(found.get()); ++i) {
    bool bad = false;
    if (!matches(PQgetvalue(found.get(), i, 1), static_cast<size_t>(PQgetlength(found.get(), i, 1)),
                 &bad)) {
      if (bad) return Status::Corruption("bad BSON");
      continue;
    }
    const std::string_view id(PQgetvalue(found.get(), i, 0),
                              static_cast<size_t>(PQgetlength(found.get(), i, 0)));
    Result_ res;
    MMDOC_RETURN_IF_ERROR(Run("delete", {id}, &res));
    *deleted += RowsOf(res.get());
  }
  return Status::OK();
}

Status PgSession::DeleteAll() { return Exec("TRUNCATE docs"); }

Status PgSession::Count(uint64_t* docs, uint64_t* key_entries) {
  // One snapshot. The key index is whichever valid index leads with `key`
  // (the UNIQUE constraint's, or docs_key after build_index); its entries
  // are counted by an index-only scan of it (the planner is kept off the
  // table's own scan).
  auto one = [&](const char* sql, std::string* out) -> Status {
    Result_ res(PQexec(conn_, sql));
    if (PQresultStatus(res.get()) != PGRES_TUPLES_OK) return PgError(sql, conn_, res.get());
    out->clear();
    if (PQntuples(res.get()) > 0) out->assign(PQgetvalue(res.get(), 0, 0));
    return Status::OK();
  };
  MMDOC_RETURN_IF_ERROR(Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  std::string text, index;
  Status s = one("SELECT count(*) FROM docs", &text);
  *docs = std::strtoull(text.c_str(), nullptr, 10);
  if (s.ok()) {
    s =
        one("SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_attribute a"
            " ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]"
            " WHERE i.indrelid = 'docs'::regclass AND a.attname = 'key' AND i.indisvalid",
            &index);
  }
  *key_entries = 0;
  if (s.ok() && !index.empty()) {
    s = Exec("SET LOCAL enable_seqscan = off");
    if (s.ok()) s = Exec("SET LOCAL enable_bitmapscan = off");
    if (s.ok()) s = one("SELECT count(*) FROM docs WHERE key >= ''", &text);
    *key_entries = std::strtoull(text.c_str(), nullptr, 10);
  }
  Status end = Exec("COMMIT");
  return s.ok() ? end : s;
}

class PgBackend : public Backend {
 public:
  explicit PgBackend(PgTransport transport) : transport_(transport) {}
  ~PgBackend() override { (void)Close(); }

  std::string name() const override {
    return transport_ == PgTransport::kTcp ? "postgres-tcp" : "postgres";
  }

  bool InProcess() const override { return false; }  // the server's processes
  bool Supports(Durability d) const override {
    return d == Durability::kNone || d == Durability::kFsync || d == Durability::kGroup;
  }

  Status Open(const std::string& dir, const BackendConfig& config) override;
  std::string settings() const override;

  Result<std::unique_ptr<Session>> NewSession() override {
    auto session = std::make_unique<PgSession>();
    Status s = session->Init(server_.conninfo());
    if (!s.ok()) return s;
    return std::unique_ptr<Session>(std::move(session));
  }

  Status Close() override { return server_.Stop(); }

 private:
  const PgTransport transport_;
  PgServer server_;
  std::vector<std::pair<std::string, std::string>> settings_;
  bool key_index_ = true;
  bool group_index_ = false;
  int version_ = 0;  // PQserverVersion: 150018 for 15.18
};

Status PgBackend::Open(const std::string& dir, const BackendConfig& config) {
  key_index_ = config.key_index;
  group_index_ = config.group_index;
  // shared_buffers: room for the whole store (BSON bytes, row overhead and
  // two indexes: about 3x the documents' bytes), at least 256 MB (the
  // usual small-server setting), at most a quarter of memory (PostgreSQL's
  // documented starting point).
  const uint64_t memory =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t buffers_mb = std::max<uint64_t>(256, config.expected_bytes * 3 >> 20);
  if (memory > 0)
    buffers_mb = std::min<uint64_t>(buffers_mb, std::max<uint64_t>(128, memory / 4 >> 20));
  const bool durable = config.durability != Durability::kNone;
  settings_ = {
      {"synchronous_commit", durable ? "on" : "off"},
      {"fsync", "on"},
      {"shared_buffers", std::to_string(buffers_mb) + "MB"},
      // A standalone server: no replication, so the least WAL (and COPY or
      // CREATE INDEX in a new table's transaction skip it).
      {"wal_level", "minimal"},
      {"max_wal_senders", "0"},
      {"max_wal_size", "1GB"},
      {"maintenance_work_mem", "256MB"},
      // A JIT compile of a scan costs more than this workload's queries.
      {"jit", "off"},
      // One core per scan, as every engine's scan runs on its session's
      // thread (a parallel seq scan would add workers on other cores).
      {"max_parallel_workers_per_gather", "0"},
      {"max_connections", std::to_string(std::max(20, config.max_sessions + 10))},
      {"autovacuum", "on"},
  };
  MMDOC_RETURN_IF_ERROR(server_.Start(dir, settings_, transport_));

  PGconn* conn = PQconnectdb(server_.conninfo().c_str());
  Status s;
  if (PQstatus(conn) != CONNECTION_OK) {
    s = Status::IOError("connect to postgres", PQerrorMessage(conn));
  } else {
    version_ = PQserverVersion(conn);
    const char* schema = key_index_
                             ? "CREATE TABLE docs (id text COLLATE \"C\" PRIMARY KEY, key text "
                               "COLLATE \"C\" NOT NULL UNIQUE, doc bytea NOT NULL)"
                             : "CREATE TABLE docs (id text COLLATE \"C\" PRIMARY KEY, key text "
                               "COLLATE \"C\" NOT NULL, doc bytea NOT NULL)";
    Result_ res(PQexec(conn, schema));
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) s = PgError("create table", conn, res.get());
    if (s.ok() && group_index_) {
      res.reset(PQexec(conn,
                       "CREATE TABLE grouped (id text COLLATE \"C\" PRIMARY KEY, g int4 NOT NULL, "
                       "n int4 NOT NULL, doc bytea NOT NULL); CREATE INDEX grouped_g_n ON "
                       "grouped(g, n)"));
      if (PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
        s = PgError("create table grouped", conn, res.get());
      }
    }
  }
  PQfinish(conn);
  if (!s.ok()) (void)server_.Stop();
  return s;
}

std::string PgBackend::settings() const {
  std::string s = "PostgreSQL " + std::to_string(version_ / 10000) + "." +
                  std::to_string(version_ % 10000) +
                  (transport_ == PgTransport::kTcp
                       ? " over TCP loopback (127.0.0.1:" + std::to_string(server_.port()) + ")"
                       : std::string(" over a Unix socket")) +
                  ", " + server_.Describe() + ": ";
  s += "docs(id text PRIMARY KEY, key text UNIQUE, doc bytea) COLLATE \"C\"";
  if (group_index_) {
    s += ", compound store: grouped(id text PRIMARY KEY, g int4, n int4, doc bytea) with btree "
         "INDEX grouped_g_n(g, n), query = SELECT doc WHERE g = $1 AND n >= $2 AND n < $3 ORDER "
         "BY n LIMIT $4";
  } else if (!key_index_) {
    s += ", key not UNIQUE (until build_index)";
  }
  for (const auto& [name, value] : settings_) s += ", " + name + "=" + value;
  s += ", libpq prepared statements with binary parameters and results, one connection per "
       "thread, BEGIN/COMMIT per batch, insert = INSERT ... ON CONFLICT DO NOTHING (0 rows = "
       "duplicate), scan = SELECT doc WHERE position(the value's BSON bytes in doc) > 0 (the "
       "byte pre-check, in the server) + BSON parse of the candidates in C++, build_index = "
       "CREATE UNIQUE INDEX, search_prefix = SELECT doc WHERE key >= prefix AND key < its end "
       "ORDER BY key, sort_limit = SELECT doc WHERE key >= $1 ORDER BY key LIMIT 10, push = "
       "SELECT doc + append in C++ + UPDATE, delete_value = that scan (SELECT id, doc) then DELETE "
       "by id, "
       "delete_all = TRUNCATE, disk use includes the cluster's catalogs and its WAL, written/op "
       "includes the server's processes' writes, peak memory is the bench's alone";
  return s;
}

}  // namespace

std::unique_ptr<Backend> NewPostgresBackend(PgTransport transport) {
  if (PgServer::FindBinDir().empty()) return nullptr;
  return std::make_unique<PgBackend>(transport);
}

}  // namespace mmdoc::bench
