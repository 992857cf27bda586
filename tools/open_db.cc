#include "tools/open_db.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mmdoc/durability.h"
#include "mmdoc/options.h"
#include "storage/coding.h"
#include "storage/format.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {
namespace {

// Whether the file has the mmdoc magic where a meta page keeps it (page 0,
// or page 1 at any legal page size: storage/format.h). A file without it
// is not a database, damaged or not. True when the file cannot be read,
// so that DB::Open says why.
bool HasMetaMagic(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return true;
  std::vector<uint8_t> head(storage::kMaxPageSize + storage::kMetaMagicOffset + 8);
  const size_t n = std::fread(head.data(), 1, head.size(), f);
  std::fclose(f);
  auto magic_at = [&](size_t offset) {
    return offset + 8 <= n && storage::DecodeFixed64(head.data() + offset) == storage::kMagic;
  };
  if (magic_at(storage::kMetaMagicOffset)) return true;
  for (size_t ps = storage::kMinPageSize; ps <= storage::kMaxPageSize; ps *= 2) {
    if (magic_at(ps + storage::kMetaMagicOffset)) return true;
  }
  return false;
}

}  // namespace

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

bool CheckDbPath(const std::string& path, bool create, const std::string& what, int* code) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT && create) return true;
    *code = Fail(kExitBadInput, what,
                 errno == ENOENT ? "no such database file" : std::string(std::strerror(errno)));
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

uint32_t WaitMs(const CommonArgs& c) {
  return static_cast<uint32_t>(std::lround(c.wait_seconds * 1000));
}

Result<std::unique_ptr<DB>> OpenWith(const CommonArgs& c, Access access) {
  Options options;
  options.create_if_missing = access == Access::kCreate;
  options.accept_log_loss = c.accept_log_loss;
  options.lock_timeout_ms = WaitMs(c);
  options.write_buffer_size = c.write_buffer_mib << 20;
  // mmdoc.cc checks the name; fsync is the default either way.
  options.durability = ParseDurability(c.durability).value_or(Durability::kFsync);
  options.read_only = access == Access::kRead;
  auto db = DB::Open(c.db, options);
  if (!db.ok() && db.status().IsNotSupported() && options.read_only) {
    // A log to replay first: that takes a writable open.
    const Status read_only = db.status();
    options.read_only = false;
    db = DB::Open(c.db, options);
    if (!db.ok() && db.status().IsIOError()) {
      return Status::IOError(read_only.message() + ", and opening it for writing failed",
                             db.status().message());
    }
  }
  return db;
}

std::string OpenError(const CommonArgs& c, const Status& s, Access access) {
  std::string why = Describe(s);
  // The library's messages name its option; here it is a flag.
  for (size_t at; (at = why.find("accept_log_loss")) != std::string::npos;)
    why.replace(at, std::strlen("accept_log_loss"), "--accept-log-loss");
  if (s.IsBusy() && c.wait_seconds == 0) why += " (--wait SECONDS waits for it)";
  if (why.find("Permission denied") != std::string::npos &&
      why.find("to replay") == std::string::npos)
    why += access == Access::kRead ? " (a read needs to read the database and its log)"
                                   : " (a write opens the database and its log for writing)";
  return why;
}

namespace {
// The command line of a command whose open made its database.
std::optional<CommonArgs> made_db;
}  // namespace

std::unique_ptr<DB> OpenDb(const CommonArgs& c, Access access, int* code) {
  const std::string what = "open " + c.db;
  if (!CheckDbPath(c.db, access == Access::kCreate, what, code)) return nullptr;
  struct stat st;
  const bool existed = ::lstat(c.db.c_str(), &st) == 0;
  auto db = OpenWith(c, access);
  if (!db.ok()) {
    *code = Fail(kExitBadInput, what, OpenError(c, db.status(), access));
    return nullptr;
  }
  if (!existed && access == Access::kCreate) made_db = c;
  return std::move(db).value();
}

void RemoveMadeIfEmpty() {
  if (!made_db || Committed()) return;
  CommonArgs c = *made_db;
  made_db.reset();
  c.wait_seconds = 0;
  auto db = OpenWith(c, Access::kWrite);
  if (!db.ok()) return;
  // What this command made it hold (import makes its collection before
  // its first document) goes with it when no document got in.
  auto collections = (*db)->ListCollections();
  if (!collections.ok()) return;
  for (const std::string& name : *collections) {
    auto n = (*db)->Count(name);
    auto indexes = (*db)->ListIndexes(name);
    if (!n.ok() || *n != 0 || !indexes.ok() || !indexes->empty()) return;
  }
  // Removed while this handle holds the lock: a process waiting for it
  // finds the path gone and opens it anew.
  (void)std::remove(c.db.c_str());
  (void)std::remove((c.db + "-log").c_str());
  (void)(*db)->Close();
}

int CloseDb(DB* db) {
  Status s = db->Close();
  if (s.ok()) return kExitOk;
  // Called after every commit succeeded: whatever failed at the close, the
  // changes were made, and a script that retried on an error status would
  // make them twice. So the status is 0 and a warning says what failed.
  if (s.IsFull()) {
    Warn("close", Describe(s) +
                      " (the changes are committed: the log holds them, and the next open "
                      "replays them)");
  } else {
    Warn("close", Describe(s) + " (the changes were committed before the close failed)");
  }
  return kExitOk;
}

}  // namespace mmdoc::tool
