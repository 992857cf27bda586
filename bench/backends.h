// Constructors of the adapters behind bench::NewBackend (backend.h).
#ifndef MMDOC_BENCH_BACKENDS_H_
#define MMDOC_BENCH_BACKENDS_H_

#include <memory>
#include <string>

#include "bench/backend.h"
#include "bench/pg_server.h"

namespace mmdoc::bench {

// writemap: MDB_WRITEMAP (best-known) or LMDB's default.
std::unique_ptr<Backend> NewLmdbBackend(bool writemap, bool nordahead);
std::unique_ptr<Backend> NewRocksDbBackend();
// rowid: a rowid table with a unique index on id, or WITHOUT ROWID.
std::unique_ptr<Backend> NewSqliteBackend(bool rowid);
// replace: update by Get + Replace instead of Update($set). nullptr when
// mmdoc-bench was built without the engine (MMDOC_BENCH_WITH_MMDOC).
// `buffered`: with a write buffer (Options::write_buffer_size, the
// library's default) or without one ("mmdoc-pages": every commit writes
// its pages).
std::unique_ptr<Backend> NewMmdocBackend(bool replace, bool buffered);
// A private PostgreSQL server per store (bench/pg_server.h). nullptr when
// mmdoc-bench was built without libpq (MMDOC_BENCH_WITH_POSTGRES) or the
// server's binaries are not installed. PgTransport::kTcp: connect over TCP
// loopback ("postgres-tcp") instead of the server's Unix socket ("postgres").
std::unique_ptr<Backend> NewPostgresBackend(PgTransport transport);
// mmdoc through `mmdoc serve` and libmongoc (remote_backend.cc), writes w:1
// or (w0) w:0. nullptr when mmdoc-bench was built without libmongoc
// (MMDOC_BENCH_WITH_REMOTE).
std::unique_ptr<Backend> NewRemoteBackend(bool w0);

// Which RocksDB library the process loaded, e.g. "rocksdb 7.8.3 release
// build (/var/cache/mmdoc/rocksdb-release/lib/librocksdb.so.7.8)" or
// "rocksdb 7.8.3 debian build (assertions on) (/usr/lib/...)".
std::string RocksDbBuild();

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_BACKENDS_H_
