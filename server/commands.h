// The MongoDB commands `mmdoc serve` answers, run over the public mmdoc API
// (mmdoc/db.h) and nothing below it. docs/server.md lists what each command
// supports; anything else gets MongoDB's CommandNotFound (code 59).
//
// Namespaces: MongoDB's collection "coll" in database "db" is the mmdoc
// collection "db.coll" (its namespace), so databases stay apart in the one
// file, listDatabases lists the prefixes, and the CLI reads them with
// `-c db.coll`. Collections without a dot are not reachable over the wire.
//
// Write concern: a write runs at the server's durability (Options) unless
// the command's writeConcern has j: true or w: "majority"; then it waits
// for a durable commit (`group`, shared with the concurrent writers, or
// the server's own mode when that is already durable: msync or fsync).
//
// Server-side cursors (find, aggregate, listIndexes answer with a cursor
// when they return more than one batch): each holds a read snapshot and
// streams from it, so a cursor's memory is one batch (at most 16 MiB); at
// most Options::max_cursors are open at once, and one left idle for
// Options::cursor_timeout is closed by ReapIdleCursors. A cursor outlives
// the connection that opened it (a driver's pool may getMore on another),
// but at the limit the one idle longest among those whose connection is
// closed makes room, so that clients that die mid-cursor cannot lock the
// others out until the timeout.
//
// Thread safety: Run may be called from many threads at once.
#ifndef MMDOC_SERVER_COMMANDS_H_
#define MMDOC_SERVER_COMMANDS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>

#include "mmdoc/db.h"
#include "mmdoc/durability.h"
#include "server/wire.h"

namespace mmdoc::server {

struct CommandOptions {
  // Durability of writes without j: true (the database's own mode).
  Durability durability = Durability::kPeriodic;
  // Open server-side cursors at most; find fails past it. Default: 100.
  size_t max_cursors = 100;
  // A cursor unused this long is closed (MongoDB's 10 minutes).
  std::chrono::milliseconds cursor_timeout{std::chrono::minutes(10)};
  // Reported by hello as connections' limit and by buildInfo.
  std::string version = "0.0.0";
};

class Commands {
 public:
  Commands(DB* db, const CommandOptions& options);
  ~Commands();  // closes every cursor (before the DB may be closed)
  Commands(const Commands&) = delete;
  Commands& operator=(const Commands&) = delete;

  // Runs the command of `request` for connection `connection_id` and
  // returns the reply body as BSON bytes: {ok: 1, ...}, or MongoDB's error
  // shape {ok: 0, errmsg, code, codeName}. Never fails otherwise.
  std::string Run(const Request& request, int64_t connection_id);

  // The reply body for a request that could not be parsed (bad BSON, a
  // bad section): {ok: 0, errmsg, code: 22 (InvalidBSON) or 9
  // (FailedToParse)}.
  static std::string ErrorReply(int code, const std::string& message);

  // Closes cursors idle longer than the timeout; returns how many.
  size_t ReapIdleCursors();
  // Connection `connection_id` is closed: its cursors may make room.
  void ConnectionClosed(int64_t connection_id);
  // Closes every cursor.
  void CloseAllCursors();
  size_t open_cursors();

 private:
  struct ServerCursor;
  class Reply;

  std::string Dispatch(const std::string& name, const Request& request, int64_t connection_id);

  std::string Hello(const std::string& name, int64_t connection_id);
  std::string BuildInfo();
  std::string ListDatabases(const bson_t* cmd);
  std::string ListCollections(const std::string& db, const bson_t* cmd);
  std::string Create(const std::string& db, const bson_t* cmd);
  std::string Drop(const std::string& db, const bson_t* cmd);
  std::string DropDatabase(const std::string& db);
  std::string Insert(const std::string& db, const bson_t* cmd);
  std::string Update(const std::string& db, const bson_t* cmd);
  std::string Delete(const std::string& db, const bson_t* cmd);
  std::string Find(const std::string& db, const bson_t* cmd, int64_t connection_id);
  std::string GetMore(const std::string& db, const bson_t* cmd);
  std::string KillCursors(const std::string& db, const bson_t* cmd);
  std::string Count(const std::string& db, const bson_t* cmd);
  std::string Distinct(const std::string& db, const bson_t* cmd);
  std::string FindAndModify(const std::string& db, const bson_t* cmd);
  std::string Aggregate(const std::string& db, const bson_t* cmd);
  std::string CreateIndexes(const std::string& db, const bson_t* cmd);
  std::string DropIndexes(const std::string& db, const bson_t* cmd);
  std::string ListIndexes(const std::string& db, const bson_t* cmd);

  // The statement loop insert, update and delete share: cmd's `field` (an
  // array) runs statement by statement in one write transaction, each
  // element (or InvalidArgument for one that is not a document) given to
  // `statement` with its index; a failure becomes a writeError and stops
  // an ordered command; then one commit. A statement that fails after
  // changing documents (an UpdateMany that meets a duplicate key halfway)
  // sets *left_changes: the transaction is dropped and the statements run
  // again from `reset` counts, that one failing without running, so that a
  // failed statement changes nothing. The reply is {<counts appends>,
  // writeErrors, ok: 1}, or the error of the namespace, the writeConcern,
  // the field, the Begin or the Commit. `command` names the command in
  // messages ("insert: documents must be an array").
  using Statement = std::function<Status(Transaction* txn, const std::string& ns, size_t index,
                                         const Document& element, bool* left_changes)>;
  // statement_fields: what a statement may hold (none checked when empty).
  std::string WriteStatements(const std::string& db, const bson_t* cmd, const char* command,
                              const char* field,
                              std::initializer_list<std::string_view> statement_fields,
                              const Statement& statement, const std::function<void()>& reset,
                              const std::function<void(bson_t* reply)>& counts);
  // The write options a command's writeConcern asks for.
  Result<WriteOptions> WriteConcern(const bson_t* cmd) const;
  // Registers an open cursor; its id, or an error past max_cursors (when
  // no cursor of a closed connection can make room).
  Result<int64_t> AddCursor(std::unique_ptr<ServerCursor> c);
  // Fills `arr` with up to `batch_size` documents (0: no count limit) and at
  // most 16 MiB from `c`; true when `c` is exhausted.
  bool FillBatch(ServerCursor* c, int64_t batch_size, bson_t* arr, Status* error);

  DB* db_;
  CommandOptions options_;

  std::mutex mu_;  // guards cursors_ and rng_
  std::map<int64_t, std::unique_ptr<ServerCursor>> cursors_;
  std::mt19937_64 rng_;
};

}  // namespace mmdoc::server

#endif  // MMDOC_SERVER_COMMANDS_H_
