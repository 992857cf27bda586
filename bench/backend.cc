#include "bench/backend.h"

#include "bench/backends.h"

namespace mmdoc::bench {

#ifndef MMDOC_BENCH_WITH_MMDOC
// Built without the engine: the mmdoc adapter is absent.
std::unique_ptr<Backend> NewMmdocBackend(bool, bool) { return nullptr; }
#endif
#ifndef MMDOC_BENCH_WITH_REMOTE
// Built without libmongoc or the server: the remote adapter is absent.
std::unique_ptr<Backend> NewRemoteBackend(bool) { return nullptr; }
#endif
#ifndef MMDOC_BENCH_WITH_POSTGRES
// Built without libpq: the PostgreSQL adapter is absent.
std::unique_ptr<Backend> NewPostgresBackend(PgTransport) { return nullptr; }
#endif

Result<std::unique_ptr<Backend>> NewBackend(std::string_view name) {
  std::unique_ptr<Backend> b;
  if (name == "mmdoc" || name == "mmdoc-replace" || name == "mmdoc-pages") {
    b = NewMmdocBackend(name == "mmdoc-replace", name != "mmdoc-pages");
    if (b == nullptr) {
      return Status::NotSupported("mmdoc-bench was built without the mmdoc engine");
    }
  } else if (name == "lmdb") {
    b = NewLmdbBackend(true, false);
  } else if (name == "lmdb-nordahead") {
    b = NewLmdbBackend(true, true);
  } else if (name == "lmdb-nowritemap") {
    b = NewLmdbBackend(false, false);
  } else if (name == "rocksdb") {
    b = NewRocksDbBackend();
  } else if (name == "sqlite") {
    b = NewSqliteBackend(true);
  } else if (name == "sqlite-norowid") {
    b = NewSqliteBackend(false);
  } else if (name == "mmdoc-remote" || name == "mmdoc-remote-w0") {
    b = NewRemoteBackend(name == "mmdoc-remote-w0");
    if (b == nullptr) {
      return Status::NotSupported(
          "mmdoc-remote: mmdoc-bench was built without libmongoc (tools/setup installs "
          "libmongoc-dev)");
    }
  } else if (name == "postgres" || name == "postgres-tcp") {
    b = NewPostgresBackend(name == "postgres-tcp" ? PgTransport::kTcp : PgTransport::kSocket);
    if (b == nullptr) {
      return Status::NotSupported(
          std::string(name) +
          ": mmdoc-bench was built without libpq, or no PostgreSQL server is installed "
          "(tools/setup installs postgresql-15 and libpq-dev)");
    }
  } else {
    return Status::InvalidArgument("unknown engine", name);
  }
  return b;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (!end.empty()) end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

namespace {
void PutOrdered32(std::string* out, int32_t v) {
  const uint32_t u = static_cast<uint32_t>(v) ^ 0x80000000u;
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(u >> shift));
}
}  // namespace

std::string GroupKey(int32_t g, int32_t n, std::string_view id) {
  std::string key;
  key.reserve(8 + id.size());
  PutOrdered32(&key, g);
  PutOrdered32(&key, n);
  key.append(id);
  return key;
}

std::vector<std::string> BackendNames() {
  return {"mmdoc",          "lmdb",          "rocksdb",         "sqlite",
          "mmdoc-pages",    "mmdoc-replace", "lmdb-nowritemap", "lmdb-nordahead",
          "sqlite-norowid", "postgres",      "postgres-tcp",    "mmdoc-remote",
          "mmdoc-remote-w0"};
}

std::vector<std::string> DefaultBackendNames() {
  std::vector<std::string> names;
  if (NewMmdocBackend(false, true) != nullptr) names.push_back("mmdoc");
  for (const char* n : {"lmdb", "rocksdb", "sqlite"}) names.push_back(n);
  return names;
}

}  // namespace mmdoc::bench
