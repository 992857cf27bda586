// The mmdoc tool's commands, one function each. mmdoc.cc parses the command
// line (CLI11) into these argument structs; each Run* function opens the
// database, does its work, prints its output on stdout and any error as one
// line on stderr, and returns the exit status (tools/tool_util.h).
//
// Defined by family: cmd_write.cc (insert, update, delete), cmd_read.cc
// (get, find, count), cmd_index.cc (index create/drop/list),
// cmd_transfer.cc (import, export), cmd_admin.cc (stats, check, compact).
#ifndef MMDOC_TOOLS_COMMANDS_H_
#define MMDOC_TOOLS_COMMANDS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mmdoc/options.h"

namespace mmdoc::tool {

// Arguments every command takes.
struct CommonArgs {
  std::string db;                                             // path of the database file
  std::string collection = "default";                         // -c
  bool collection_given = false;                              // -c was on the command line
  std::string durability = "fsync";                           // --durability
  bool accept_log_loss = false;                               // --accept-log-loss
  double wait_seconds = 0;                                    // --wait
  uint64_t write_buffer_mib = kDefaultWriteBufferSize >> 20;  // --write-buffer-mib
};

struct InsertArgs {
  uint64_t batch = 1;  // lines per transaction
  bool echo = false;   // print each _id once its commit returned
};

struct FindArgs {
  std::string filter = "{}";
  std::string sort;  // keys FIELD, -FIELD, FIELD:1 or FIELD:-1, comma-separated
  // Signed so that a negative value reaches RunFind, which refuses it
  // (unsigned parsing would wrap -1 around to "no limit").
  int64_t limit = 0;
  int64_t skip = 0;
  int64_t max_sort_bytes = 100 << 20;  // FindOptions::max_sort_bytes; 0: no limit
  std::vector<std::string> project;
  bool explain = false;
  std::string json_mode = "relaxed";  // relaxed or canonical Extended JSON
};

struct ServeArgs {
  std::string bind = "127.0.0.1";  // loopback unless told
  int port = 27017;                // 0: a free port (printed)
  size_t max_connections = 64;
  size_t max_cursors = 100;
  int64_t cursor_timeout_ms = 600000;  // MongoDB's 10 minutes
};

struct ImportArgs {
  std::string file;
  std::string format = "auto";  // auto, json or bson
  bool json_array = false;      // the file must be one JSON array
  uint64_t batch = 1000;        // documents per transaction
  bool progress = true;         // when stderr is a terminal
};

struct ExportArgs {
  std::string format = "json";  // json or bson
  std::string output;           // -o; empty means stdout
  std::string json_mode = "relaxed";
  bool salvage = false;
  bool progress = true;
};

int RunInsert(const CommonArgs& c, const InsertArgs& a);
int RunGet(const CommonArgs& c, const std::string& id, const std::string& json_mode);
int RunFind(const CommonArgs& c, const FindArgs& a);
// With upsert, inserts when nothing matches and prints the new _id as
// "upserted".
int RunUpdate(const CommonArgs& c, const std::string& filter, const std::string& update, bool many,
              bool upsert);
int RunDelete(const CommonArgs& c, const std::string& filter, bool many);
int RunCount(const CommonArgs& c, const std::string& filter);
// One JSON value per line (DB::Distinct).
int RunDistinct(const CommonArgs& c, const std::string& field, const std::string& filter,
                const std::string& json_mode);
struct IndexCreateArgs {
  std::string keys;  // a dotted path, "a,-b" or a JSON key pattern
  bool unique = false;
  bool sparse = false;
  std::string partial;  // the partial filter as JSON; "" for none
};
int RunIndexCreate(const CommonArgs& c, const IndexCreateArgs& a);
int RunIndexDrop(const CommonArgs& c, const std::string& field);
int RunIndexList(const CommonArgs& c);
int RunImport(const CommonArgs& c, const ImportArgs& a);
int RunExport(const CommonArgs& c, const ExportArgs& a);
// With -c, only that collection (exit 1 when it does not exist).
int RunStats(const CommonArgs& c, bool json);
int RunCheck(const CommonArgs& c);
int RunCompact(const CommonArgs& c);
// Serves the database over MongoDB's wire protocol until SIGTERM/SIGINT
// (cmd_serve.cc, server/).
int RunServe(const CommonArgs& c, const ServeArgs& a);

}  // namespace mmdoc::tool

#endif  // MMDOC_TOOLS_COMMANDS_H_
