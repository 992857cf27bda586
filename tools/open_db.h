// Opening the database a command names: refusing, before DB::Open can
// create or change anything, a path that cannot be a database, then
// opening it with the options the command line gave.
#ifndef MMDOC_TOOLS_OPEN_DB_H_
#define MMDOC_TOOLS_OPEN_DB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "mmdoc/db.h"
#include "tools/commands.h"

namespace mmdoc::tool {

bool IsDirectory(const std::string& path);

// The file's size in bytes; 0 when it cannot be stat'ed.
uint64_t FileSize(const std::string& path);

// Refuses, before DB::Open can touch anything, a path that cannot be a
// database: missing (unless `create`: a new database), a directory or
// other non-file, an empty file, a file without the mmdoc magic. Prints
// the error, stores the exit status (2) in *code and returns false.
bool CheckDbPath(const std::string& path, bool create, const std::string& what, int* code);

// --wait SECONDS as Options::lock_timeout_ms (mmdoc.cc bounds it to a day).
uint32_t WaitMs(const CommonArgs& c);

// What a command does with the database it opens.
enum class Access {
  // Reads only: opened read-only (Options::read_only), so that reads in
  // several processes run at once and a read-only file will do. A log whose
  // commits must replay into the pages (an index made before a crash)
  // opens it for writing instead, as before.
  kRead,
  // Writes to an existing database; a missing file is refused rather than
  // an empty database left behind a typo.
  kWrite,
  // Writes that add data: the file is created when missing.
  kCreate,
};

// Opens c.db for `access`. On failure prints the error, stores the exit
// status in *code and returns null.
std::unique_ptr<DB> OpenDb(const CommonArgs& c, Access access, int* code);

// OpenDb's parts, for a command that reports a failed open its own way
// (check): the open with the command line's options, and the one-line
// reason for its failure in the tool's words (flags for option names).
Result<std::unique_ptr<DB>> OpenWith(const CommonArgs& c, Access access);
std::string OpenError(const CommonArgs& c, const Status& s, Access access);

// Closes the database at the end of a write command whose work succeeded
// (DB::Close) and returns the exit status: 0, or 2 with the error printed
// when it could not close cleanly (a full disk, a file replaced while
// open), so that such a command does not exit 0. Read commands leave the
// close to DB's destructor: a database they could not close stays as it
// was, its log replayed by the next open.
int CloseDb(DB* db);

// After a command failed: when it made its database (nothing was at the
// path when it opened it) and committed nothing, removes that database if
// it still holds no collection, so that bad input leaves no new database
// behind. It opens the database as any writer does, without waiting: one
// another process holds, or filled meanwhile, is left alone.
void RemoveMadeIfEmpty();

}  // namespace mmdoc::tool

#endif  // MMDOC_TOOLS_OPEN_DB_H_
