// mmdoc-reopenprobe: how long a database takes to open after kill -9, with
// the log replayed into pages or into the write buffer (docs/write-path.md).
//
// A child process opens a new database with a write buffer, inserts --docs
// documents of the seed's shape (a 36-character _id, a unique index on a
// 36-character key, a 36-character value) in transactions of --batch, and
// kills itself with SIGKILL: the log then holds every record since the last
// checkpoint, and the buffer's unmerged changes are gone with the process.
// The parent copies the files it left once per open to time, and opens each
// copy either
//
//   pages    without a buffer: the log's records are redone in pages and
//            a checkpoint writes them (the classic replay);
//   buffer   with a --buffer-mib buffer: the records go into the buffer,
//            no page is written, and the merger takes them from there;
//
// alternating, --rounds of each, with the page cache dropped before each
// open when --cold is given (root only). Reported per open: DB::Open's
// time, the buffer it left, and the close's time (a close merges the
// buffer and checkpoints).
//
//   mmdoc-reopenprobe [--docs 1000000] [--batch 1000] [--buffer-mib 64]
//                     [--rounds 3] [--cold] [--dir .]
#include <bson/bson.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "bench/micro/proto_util.h"
#include "mmdoc/db.h"

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

[[noreturn]] void Die(const char* what, const mmdoc::Status& s) {
  std::fprintf(stderr, "mmdoc-reopenprobe: %s: %s\n", what, s.ToString().c_str());
  std::exit(2);
}

// The child: fills a database and dies without closing it.
[[noreturn]] void FillAndKill(const std::string& path, uint64_t docs, uint64_t batch,
                              uint64_t buffer) {
  mmdoc::Options o;
  o.durability = mmdoc::Durability::kNone;
  o.write_buffer_size = buffer;
  auto db = mmdoc::DB::Open(path, o);
  if (!db.ok()) Die("open", db.status());
  mmdoc::IndexOptions unique;
  unique.unique = true;
  if (mmdoc::Status s = db.value()->CreateIndex("docs", "key", unique); !s.ok())
    Die("create index", s);
  // A definition in the log sends a reopen to the replay into pages; an
  // application's definitions leave the log at its first checkpoint.
  if (mmdoc::Status s = db.value()->Checkpoint(); !s.ok()) Die("checkpoint", s);
  std::mt19937_64 rng(1);
  for (uint64_t done = 0; done < docs;) {
    auto t = db.value()->Begin();
    if (!t.ok()) Die("begin", t.status());
    for (uint64_t i = 0; i < batch && done < docs; i++, done++) {
      const std::string id = mmdoc::proto::Guid(rng), key = mmdoc::proto::Guid(rng),
                        value = mmdoc::proto::Guid(rng);
      bson_t b = BSON_INITIALIZER;
      bson_append_utf8(&b, "_id", 3, id.data(), static_cast<int>(id.size()));
      bson_append_utf8(&b, "key", 3, key.data(), static_cast<int>(key.size()));
      bson_append_utf8(&b, "value", 5, value.data(), static_cast<int>(value.size()));
      auto d = mmdoc::Document::FromBson(&b);
      bson_destroy(&b);
      if (!d.ok()) Die("document", d.status());
      if (mmdoc::Status s = t.value()->Insert("docs", d.value()); !s.ok()) Die("insert", s);
    }
    if (mmdoc::Status s = t.value()->Commit(); !s.ok()) Die("commit", s);
  }
  std::raise(SIGKILL);
  std::abort();
}

bool DropCaches() {
  sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  f << "3\n";
  return static_cast<bool>(f.flush());
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t docs = 1000000, batch = 1000, buffer_mib = 64, rounds = 3;
  bool cold = false;
  std::string dir = ".";
  CLI::App app{"mmdoc-reopenprobe: the time to open after kill -9"};
  app.add_option("--docs", docs, "documents to load")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--batch", batch, "documents per transaction")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1000000}));
  app.add_option("--buffer-mib", buffer_mib, "write buffer, MiB")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--rounds", rounds, "rounds")->check(CLI::Range(uint64_t{1}, uint64_t{1000}));
  app.add_flag("--cold", cold, "drop the page cache before each open (root only)");
  app.add_option("--dir", dir, "where the database goes");
  CLI11_PARSE(app, argc, argv);
  // MMDOC_WRITE_BUFFER would replace a --buffer-mib of 64 (the default size).
  unsetenv("MMDOC_WRITE_BUFFER");
  namespace fs = std::filesystem;
  const fs::path work = fs::path(dir) / ("reopenprobe-" + std::to_string(getpid()));
  fs::create_directories(work);
  const std::string path = (work / "db").string();
  const uint64_t buffer = buffer_mib << 20;

  std::fprintf(stderr,
               "filling %" PRIu64 " documents (batch %" PRIu64 ", buffer %" PRIu64
               " MiB), then kill -9...\n",
               docs, batch, buffer_mib);
  const Clock::time_point fill = Clock::now();
  const pid_t child = fork();
  if (child == 0) FillAndKill(path, docs, batch, buffer);
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
    std::fprintf(stderr, "mmdoc-reopenprobe: the child did not die by SIGKILL\n");
    return 2;
  }
  std::printf("filled in %.1f s; data file %.0f MiB, log %.0f MiB\n", Since(fill),
              fs::file_size(path) / 1048576.0, fs::file_size(path + "-log") / 1048576.0);
  std::printf("%-8s %5s %9s %12s %9s\n", "replay", "round", "open s", "buffer MiB", "close s");
  for (uint64_t r = 0; r < 2 * rounds; r++) {
    const bool into_buffer = r % 2 == 0;
    const std::string copy = (work / "copy").string();
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
    fs::copy_file(path + "-log", copy + "-log", fs::copy_options::overwrite_existing);
    if (cold && !DropCaches()) {
      std::fprintf(stderr, "mmdoc-reopenprobe: --cold: cannot write /proc/sys/vm/drop_caches\n");
      return 2;
    }
    mmdoc::Options o;
    o.write_buffer_size = into_buffer ? buffer : 0;
    const Clock::time_point open = Clock::now();
    auto db = mmdoc::DB::Open(copy, o);
    const double open_s = Since(open);
    if (!db.ok()) Die("reopen", db.status());
    auto st = db.value()->Stats();
    if (!st.ok()) Die("stats", st.status());
    const Clock::time_point close = Clock::now();
    db.value().reset();
    std::printf("%-8s %5" PRIu64 " %9.3f %12.1f %9.3f\n", into_buffer ? "buffer" : "pages",
                r / 2 + 1, open_s, st.value().write_buffer_bytes / 1048576.0, Since(close));
    std::fflush(stdout);
  }
  fs::remove_all(work);
  return 0;
}
