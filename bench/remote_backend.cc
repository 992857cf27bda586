// mmdoc-remote adapter: mmdoc through a socket, as an application on
// MongoDB's driver sees it. Open starts `mmdoc serve` (server/) on a free
// loopback port with the run's durability, and every session is a
// libmongoc client (one connection) on collection bench.docs with the
// unique index on key:
//
//   search_id     find({_id: id}, limit 1)
//   search_key    find({key: k}, limit 1) (the server's IXSCAN)
//   search_value  find({value: v}) (a full scan on the server)
//   update        update_one({_id: id}, {$set: {value: v}})
//   search_prefix find({key: {$regex: "^abc"}}) (an index range there)
//   sort_limit    find({key: {$gte: g}}, sort key, limit 10)
//   push          update_one({_id: id}, {$push: {tags: t}})
//   delete        delete_one({_id: id})
//   build_index   createIndexes {key: 1} unique
//   delete_value  delete_many({value: v}); delete_all delete_many({})
//   compound      its own store: createIndexes {g: 1, n: 1} at Open,
//                 insert_one of each document, then find({g: G, n: {$gte:
//                 A, $lt: B}}, sort n, limit) (the server's walk of g_1_n_1)
//
// There are no transactions over the wire: each write is one command and
// one server-side commit, acknowledged (w:1, "mmdoc-remote": one round
// trip each, its status comes back) or not ("mmdoc-remote-w0": w:0, the
// seed's driver setting; inserts, updates, pushes and deletes return OK
// without knowing, so a duplicate or a missing document goes unnoticed,
// as it does for such a client; Commit then waits for one ping, so the
// batch's writes are applied before the clock stops). The other calls are
// acknowledged in both. The server's writes count as the bench's
// (WatchIo); peak memory is the bench's alone.
//
// The server is the bench's child with PR_SET_PDEATHSIG = SIGTERM, so it
// never outlives the bench; Close stops it with SIGTERM (a checkpoint).
#include <fcntl.h>
#include <mongoc/mongoc.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/backend.h"
#include "bench/backends.h"
#include "bench/bson_doc.h"
#include "bench/machine.h"

namespace mmdoc::bench {
namespace {

constexpr char kDatabase[] = "bench";
constexpr char kCollection[] = "docs";

// The mmdoc tool that serves: $MMDOC_SERVE_BINARY, else the one built with
// the bench.
std::string ServeBinary() {
  const char* env = getenv("MMDOC_SERVE_BINARY");
  if (env != nullptr && env[0] != '\0') return env;
  return MMDOC_SERVE_BINARY;
}

Status ErrorOf(const bson_error_t& e, std::string_view what) {
  if (e.code == 11000) return Status::AlreadyExists(what, e.message);
  return Status::IOError(what, e.message);
}

int64_t ReplyInt(const bson_t* reply, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, reply, key)) return -1;
  return bson_iter_as_int64(&it);
}

// {field: s}
void StringDoc(bson_t* b, const char* field, std::string_view s) {
  bson_init(b);
  bson_append_utf8(b, field, -1, s.data(), static_cast<int>(s.size()));
}

// {key: {op: s}}
void KeyOp(bson_t* b, const char* op, std::string_view s) {
  bson_init(b);
  bson_t child;
  bson_append_document_begin(b, "key", 3, &child);
  bson_append_utf8(&child, op, -1, s.data(), static_cast<int>(s.size()));
  bson_append_document_end(b, &child);
}

// {op: {field: s}}
void UpdateDoc(bson_t* b, const char* op, const char* field, std::string_view s) {
  bson_init(b);
  bson_t child;
  bson_append_document_begin(b, op, -1, &child);
  bson_append_utf8(&child, field, -1, s.data(), static_cast<int>(s.size()));
  bson_append_document_end(b, &child);
}

class RemoteSession : public Session {
 public:
  RemoteSession(const std::string& uri, bool w0) : w0_(w0) {
    client_ = mongoc_client_new(uri.c_str());
    if (client_ == nullptr) return;
    mongoc_client_set_error_api(client_, MONGOC_ERROR_API_VERSION_2);
    coll_ = mongoc_client_get_collection(client_, kDatabase, kCollection);
    writes_ = mongoc_client_get_collection(client_, kDatabase, kCollection);
    if (w0_) {
      mongoc_write_concern_t* wc = mongoc_write_concern_new();
      mongoc_write_concern_set_w(wc, MONGOC_WRITE_CONCERN_W_UNACKNOWLEDGED);
      mongoc_collection_set_write_concern(writes_, wc);
      mongoc_write_concern_destroy(wc);
    }
  }
  ~RemoteSession() override {
    if (writes_ != nullptr) mongoc_collection_destroy(writes_);
    if (coll_ != nullptr) mongoc_collection_destroy(coll_);
    if (client_ != nullptr) mongoc_client_destroy(client_);
  }
  bool ok() const { return client_ != nullptr; }

  Status Begin() override { return Status::OK(); }
  // w:0: a ping on the same connection, answered only after the server has
  // applied the writes sent before it, so a phase times writes applied,
  // not merely sent.
  Status Commit() override {
    if (!w0_) return Status::OK();
    bson_t* ping = BCON_NEW("ping", BCON_INT32(1));
    bson_error_t e;
    bool ok = mongoc_client_command_simple(client_, kDatabase, ping, nullptr, nullptr, &e);
    bson_destroy(ping);
    return ok ? Status::OK() : ErrorOf(e, "ping after w:0 writes");
  }

  Status Insert(const DocRef& doc) override {
    bson_t b;
    if (!bson_init_static(&b, reinterpret_cast<const uint8_t*>(doc.bson.data()), doc.bson.size()))
      return Status::InvalidArgument("bad BSON");
    bson_error_t e;
    if (!mongoc_collection_insert_one(writes_, &b, nullptr, nullptr, &e)) {
      return ErrorOf(e, "insert");
    }
    return Status::OK();
  }

  Status UpdateValue(std::string_view id, std::string_view value) override {
    return UpdateById(id, "$set", "value", value, "update");
  }

  Status PushTag(std::string_view id, std::string_view tag) override {
    return UpdateById(id, "$push", "tags", tag, "push");
  }

  Status Delete(std::string_view id) override {
    bson_t q;
    StringDoc(&q, "_id", id);
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_collection_delete_one(writes_, &q, nullptr, &reply, &e);
    int64_t n = ReplyInt(&reply, "deletedCount");
    bson_destroy(&reply);
    bson_destroy(&q);
    if (!ok) return ErrorOf(e, "delete");
    if (!w0_ && n == 0) return Status::NotFound("delete", id);
    return Status::OK();
  }

  Status GetById(std::string_view id, std::string* value) override {
    std::string doc;
    MMDOC_RETURN_IF_ERROR(FindOne("_id", id, &doc));
    return ValueOf(doc, value);
  }

  Status FindByKey(std::string_view key, std::string* value) override {
    std::string doc;
    MMDOC_RETURN_IF_ERROR(FindOne("key", key, &doc));
    return ValueOf(doc, value);
  }

  Status ScanByValue(std::string_view value, bool* found, uint64_t* scanned_bytes) override {
    bson_t q;
    StringDoc(&q, "value", value);
    std::vector<std::string> docs;
    Status s = Query(&q, nullptr, &docs);
    bson_destroy(&q);
    *found = !docs.empty();
    // The server scans; the bytes it read are not reported over the wire.
    if (scanned_bytes != nullptr) *scanned_bytes = 0;
    return s;
  }

  Status FindKeyPrefix(std::string_view prefix, std::vector<std::string>* values) override {
    bson_t q;
    KeyOp(&q, "$regex", "^" + std::string(prefix));
    std::vector<std::string> docs;
    Status s = Query(&q, nullptr, &docs);
    bson_destroy(&q);
    return s.ok() ? ValuesOf(docs, values) : s;
  }

  Status FindKeysFrom(std::string_view from, int limit, std::vector<std::string>* values) override {
    bson_t q;
    KeyOp(&q, "$gte", from);
    bson_t* opts = BCON_NEW("sort", "{", "key", BCON_INT32(1), "}", "limit", BCON_INT64(limit));
    std::vector<std::string> docs;
    Status s = Query(&q, opts, &docs);
    bson_destroy(opts);
    bson_destroy(&q);
    return s.ok() ? ValuesOf(docs, values) : s;
  }

  Status GetDocument(std::string_view id, std::string* bson) override {
    return FindOne("_id", id, bson);
  }

  Status InsertGrouped(const GroupDocRef& doc) override {
    return Insert(DocRef{doc.id, "", doc.bson});
  }

  Status FindGroupRange(int32_t g, int32_t lo, int32_t hi, int limit,
                        std::vector<std::string>* docs) override {
    bson_t* q =
        BCON_NEW("g", BCON_INT32(g), "n", "{", "$gte", BCON_INT32(lo), "$lt", BCON_INT32(hi), "}");
    bson_t* opts = BCON_NEW("sort", "{", "n", BCON_INT32(1), "}", "limit", BCON_INT64(limit));
    docs->clear();
    Status s = Query(q, opts, docs);
    bson_destroy(opts);
    bson_destroy(q);
    return s;
  }

  Status CreateGroupIndex() {
    bson_t* cmd =
        BCON_NEW("createIndexes", BCON_UTF8(kCollection), "indexes", "[", "{", "key", "{", "g",
                 BCON_INT32(1), "n", BCON_INT32(1), "}", "name", BCON_UTF8("g_1_n_1"), "}", "]");
    bson_error_t e;
    bool ok = mongoc_collection_write_command_with_opts(coll_, cmd, nullptr, nullptr, &e);
    bson_destroy(cmd);
    return ok ? Status::OK() : ErrorOf(e, "createIndexes");
  }

  Status BuildKeyIndex() override {
    bson_t* cmd = BCON_NEW("createIndexes", BCON_UTF8(kCollection), "indexes", "[", "{", "key", "{",
                           "key", BCON_INT32(1), "}", "name", BCON_UTF8("key_1"), "unique",
                           BCON_BOOL(true), "}", "]");
    bson_error_t e;
    bool ok = mongoc_collection_write_command_with_opts(coll_, cmd, nullptr, nullptr, &e);
    bson_destroy(cmd);
    return ok ? Status::OK() : ErrorOf(e, "createIndexes");
  }

  Status DeleteByValue(std::string_view value, uint64_t* deleted) override {
    bson_t q;
    StringDoc(&q, "value", value);
    Status s = DeleteMany(&q, deleted);
    bson_destroy(&q);
    return s;
  }

  Status DeleteAll() override {
    bson_t q = BSON_INITIALIZER;
    uint64_t n = 0;
    return DeleteMany(&q, &n);
  }

  Status Count(uint64_t* docs, uint64_t* key_entries) override {
    bson_t q = BSON_INITIALIZER;
    bson_error_t e;
    int64_t n = mongoc_collection_count_documents(coll_, &q, nullptr, nullptr, nullptr, &e);
    if (n < 0) return ErrorOf(e, "count");
    *docs = static_cast<uint64_t>(n);
    // Every document has a key, so the unique index holds one entry each.
    *key_entries = 0;
    mongoc_cursor_t* c = mongoc_collection_find_indexes_with_opts(coll_, nullptr);
    const bson_t* spec;
    while (mongoc_cursor_next(c, &spec)) {
      bson_iter_t it;
      if (bson_iter_init_find(&it, spec, "name") && BSON_ITER_HOLDS_UTF8(&it) &&
          std::strcmp(bson_iter_utf8(&it, nullptr), "key_1") == 0) {
        *key_entries = *docs;
      }
    }
    bool failed = mongoc_cursor_error(c, &e);
    mongoc_cursor_destroy(c);
    return failed ? ErrorOf(e, "listIndexes") : Status::OK();
  }

 private:
  Status UpdateById(std::string_view id, const char* op, const char* field, std::string_view value,
                    const char* what) {
    bson_t q;
    StringDoc(&q, "_id", id);
    bson_t u;
    UpdateDoc(&u, op, field, value);
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_collection_update_one(writes_, &q, &u, nullptr, &reply, &e);
    int64_t matched = ReplyInt(&reply, "matchedCount");
    bson_destroy(&reply);
    bson_destroy(&u);
    bson_destroy(&q);
    if (!ok) return ErrorOf(e, what);
    if (!w0_ && matched == 0) return Status::NotFound(what, id);
    return Status::OK();
  }

  Status DeleteMany(const bson_t* q, uint64_t* deleted) {
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_collection_delete_many(coll_, q, nullptr, &reply, &e);
    int64_t n = ReplyInt(&reply, "deletedCount");
    bson_destroy(&reply);
    if (!ok) return ErrorOf(e, "delete");
    *deleted = n < 0 ? 0 : static_cast<uint64_t>(n);
    return Status::OK();
  }

  // The first document with field == s, as BSON bytes; NotFound when none.
  Status FindOne(const char* field, std::string_view s, std::string* out) {
    bson_t q;
    StringDoc(&q, field, s);
    bson_t* opts = BCON_NEW("limit", BCON_INT64(1), "singleBatch", BCON_BOOL(true));
    std::vector<std::string> docs;
    Status st = Query(&q, opts, &docs);
    bson_destroy(opts);
    bson_destroy(&q);
    if (!st.ok()) return st;
    if (docs.empty()) return Status::NotFound(field, s);
    *out = std::move(docs[0]);
    return Status::OK();
  }

  Status Query(const bson_t* q, const bson_t* opts, std::vector<std::string>* docs) {
    mongoc_cursor_t* c = mongoc_collection_find_with_opts(coll_, q, opts, nullptr);
    const bson_t* d;
    while (mongoc_cursor_next(c, &d)) {
      docs->emplace_back(reinterpret_cast<const char*>(bson_get_data(d)), d->len);
    }
    bson_error_t e;
    bool failed = mongoc_cursor_error(c, &e);
    mongoc_cursor_destroy(c);
    return failed ? ErrorOf(e, "find") : Status::OK();
  }

  static Status ValueOf(const std::string& doc, std::string* value) {
    std::string_view v;
    if (!FieldOf(doc.data(), doc.size(), "value", &v)) return Status::Corruption("no value");
    value->assign(v);
    return Status::OK();
  }

  static Status ValuesOf(const std::vector<std::string>& docs, std::vector<std::string>* values) {
    values->clear();
    for (const std::string& d : docs) {
      std::string v;
      MMDOC_RETURN_IF_ERROR(ValueOf(d, &v));
      values->push_back(std::move(v));
    }
    return Status::OK();
  }

  const bool w0_;
  mongoc_client_t* client_ = nullptr;
  mongoc_collection_t* coll_ = nullptr;    // acknowledged calls
  mongoc_collection_t* writes_ = nullptr;  // the timed writes (w:0 for -w0)
};

class RemoteBackend : public Backend {
 public:
  explicit RemoteBackend(bool w0) : w0_(w0) {}
  ~RemoteBackend() override { (void)Close(); }

  std::string name() const override { return w0_ ? "mmdoc-remote-w0" : "mmdoc-remote"; }
  bool Supports(Durability) const override { return true; }
  bool InProcess() const override { return false; }  // mmdoc serve

  Status Open(const std::string& dir, const BackendConfig& config) override {
    static std::once_flag init;
    std::call_once(init, [] { mongoc_init(); });
    durability_ = config.durability;
    MMDOC_RETURN_IF_ERROR(StartServer(dir, config));
    if (config.key_index || config.group_index) {
      RemoteSession s(uri_, false);
      if (!s.ok()) return Status::IOError("libmongoc client", uri_);
      if (config.key_index) MMDOC_RETURN_IF_ERROR(s.BuildKeyIndex());
      if (config.group_index) MMDOC_RETURN_IF_ERROR(s.CreateGroupIndex());
    }
    return Status::OK();
  }

  std::string settings() const override {
    return "mmdoc serve (" + std::string(DurabilityName(durability_)) +
           ", 127.0.0.1:" + std::to_string(port_) +
           ") via libmongoc " MONGOC_VERSION_S ", one connection per thread, writes " +
           (w0_ ? "w:0 (unacknowledged; a ping per batch)" : "w:1") +
           ", one command per write; written/op includes the server's writes, peak memory is "
           "the bench's alone";
  }

  Result<std::unique_ptr<Session>> NewSession() override {
    auto s = std::make_unique<RemoteSession>(uri_, w0_);
    if (!s->ok()) return Status::IOError("libmongoc client", uri_);
    return std::unique_ptr<Session>(std::move(s));
  }

  Status Close() override {
    if (pid_ <= 0) return Status::OK();
    UnwatchIo(pid_);
    kill(pid_, SIGTERM);
    int wstatus = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &wstatus, 0);
    } while (r < 0 && errno == EINTR);
    pid_ = 0;
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
      return Status::IOError("mmdoc serve did not exit cleanly; see", log_path_);
    }
    return Status::OK();
  }

 private:
  Status StartServer(const std::string& dir, const BackendConfig& config) {
    std::string binary = ServeBinary();
    std::string db = dir + "/remote.mmdb";
    log_path_ = dir + "/serve.log";
    std::vector<std::string> args = {binary,
                                     "serve",
                                     db,
                                     "--port",
                                     "0",
                                     "--durability",
                                     DurabilityName(config.durability),
                                     "--max-connections",
                                     std::to_string(config.max_sessions + 8)};
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // Opened before fork: the child of a threaded process may only make
    // async-signal-safe calls.
    int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int out[2];
    if (pipe(out) != 0) {
      if (log >= 0) close(log);
      return Status::IOError("pipe", std::strerror(errno));
    }
    pid_t child = fork();
    if (child == 0) {
      // The server ends with the bench, however the bench ends.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      dup2(out[1], 1);
      if (log >= 0) dup2(log, 2);
      close(out[0]);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (log >= 0) close(log);
    close(out[1]);
    if (child < 0) {
      close(out[0]);
      return Status::IOError("fork", std::strerror(errno));
    }
    pid_ = child;
    // "mmdoc serve: listening on 127.0.0.1:PORT (...)", within 30 s.
    std::string line;
    char c;
    pollfd p{out[0], POLLIN, 0};
    while (line.find('\n') == std::string::npos && poll(&p, 1, 30000) > 0 &&
           read(out[0], &c, 1) == 1) {
      line.push_back(c);
    }
    close(out[0]);
    size_t at = line.find("127.0.0.1:");
    if (at == std::string::npos) {
      (void)Close();
      std::ifstream in(log_path_);
      std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return Status::IOError("mmdoc serve (" + binary + ") did not start", log);
    }
    port_ = std::atoi(line.c_str() + at + std::strlen("127.0.0.1:"));
    WatchIo(pid_);  // written/op includes the server's writes
    uri_ = "mongodb://127.0.0.1:" + std::to_string(port_) + "/?serverSelectionTimeoutMS=10000";
    return Status::OK();
  }

  const bool w0_;
  Durability durability_ = Durability::kNone;
  pid_t pid_ = 0;
  int port_ = 0;
  std::string uri_;
  std::string log_path_;
};

}  // namespace

std::unique_ptr<Backend> NewRemoteBackend(bool w0) { return std::make_unique<RemoteBackend>(w0); }

}  // namespace mmdoc::bench
