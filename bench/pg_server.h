// bench::PgServer: a private PostgreSQL server that mmdoc-bench starts for one
// store and stops again, so the PostgreSQL peer needs no cluster set up
// beforehand and leaves none behind.
//
//   PgServer server;
//   Status s = server.Start(dir, {{"shared_buffers", "256MB"}, ...});
//   PGconn* conn = PQconnectdb(server.conninfo().c_str());
//   ...
//   s = server.Stop();   // also run by the destructor
//
// Start runs initdb into dir/pgdata (trust auth, UTF8, locale C, --no-sync:
// the cluster is created fresh for each store), then the server itself as a
// child process of the bench, reachable only through a Unix socket in a
// private directory (listen_addresses=''), and waits until it accepts
// connections. With PgTransport::kTcp, the server listens on 127.0.0.1
// only, on a free port the bench picks, with no Unix socket
// (unix_socket_directories=''), and pg_hba.conf is replaced by one line:
// trust for user postgres from 127.0.0.1/32. A port another process takes
// between the bench's probe and the server's bind makes the server exit at
// start ("could not bind ...: Address already in use" in its log): Start
// then probes a new port and starts the server again, kPortAttempts times
// in all, and fails with the log's end and the ports tried if every one
// was taken. PostgreSQL refuses to run as root: when the bench runs as
// root, initdb and the server run as the `postgres` user Debian's package
// creates, the directories they write are chowned to it, and the store's
// ancestors that user cannot search get
// search permission (o+x, nothing else) until Stop puts their modes back.
//
// The server never outlives the bench:
//   - Stop (and the destructor) sends SIGINT, which is what `pg_ctl stop -m
//     fast` sends: open transactions roll back, a checkpoint runs, the
//     server exits; Stop waits for it (SIGQUIT, then SIGKILL, if it hangs).
//   - SIGINT, SIGTERM or SIGHUP to the bench (Ctrl-C): the handler of
//     bench/signal_cleanup.h, installed at the first Start unless the signal
//     is ignored, first sends every running
//     server SIGQUIT (`pg_ctl stop -m immediate`: no checkpoint, the data is
//     about to go), kills a running initdb, waits for them to exit, removes
//     its data and socket directories, then lets the signal take its course
//     (the previous disposition, by default the end of the process).
//   - The bench killed outright (SIGKILL, a crash): the server is the bench's
//     child with PR_SET_PDEATHSIG = SIGINT, so the kernel tells it to shut
//     down when the thread that started it ends. REQUIRES: Start is called
//     from a thread that lives as long as the server (mmdoc-bench's main
//     thread). The data directory stays behind in that case.
// While it runs, the server's processes' writes are added to the bench's
// own (WatchIo, bench/machine.h), so written/op is PostgreSQL's too.
// `pg_ctl start` is not used: it detaches the server from the bench, which
// is what the last point must not allow.
//
// Not thread-safe: one thread starts and stops a server. Several servers may
// run at once (each in its own directory).
#ifndef MMDOC_BENCH_PG_SERVER_H_
#define MMDOC_BENCH_PG_SERVER_H_

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mmdoc/status.h"

namespace mmdoc::bench {

// How the bench's clients reach a PgServer: its private Unix socket, or TCP
// on 127.0.0.1 (see above).
enum class PgTransport { kSocket, kTcp };

// A TCP port on 127.0.0.1 nothing listens on now: the kernel's pick for a
// socket bound to port 0 (free until someone binds it). 0 on failure.
int FreeLoopbackPort();

// Whether a server's log says it could not bind its TCP port because
// another process holds it.
bool PgLogSaysPortTaken(std::string_view log);

class PgServer {
 public:
  // Starts of the server over TCP before Start gives up on taken ports.
  static constexpr int kPortAttempts = 5;

  PgServer() = default;
  ~PgServer();
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  // The directory holding initdb, postgres and pg_ctl: $MMDOC_PG_BINDIR when
  // set, else the newest /usr/lib/postgresql/<version>/bin (Debian does not
  // put them on PATH); "" when there is none.
  static std::string FindBinDir();

  // Creates a cluster in dir/pgdata (dir exists) and starts a server on it
  // with these settings (passed as -c name=value), waiting until it accepts
  // connections (60 s at most). IOError with the end of the server's log
  // (dir/postgres.log) when initdb or the server fails; NotSupported when
  // there are no server binaries or the bench runs as root and there is no
  // `postgres` user.
  Status Start(const std::string& dir,
               const std::vector<std::pair<std::string, std::string>>& settings,
               PgTransport transport = PgTransport::kSocket);

  // Fast shutdown (SIGINT) and wait; the socket directory is removed, the
  // data directory kept (the store's disk use is measured after Close).
  // OK when no server runs.
  Status Stop();

  // libpq connection string of the running server (its socket directory,
  // or 127.0.0.1 and its port; user postgres, database postgres).
  const std::string& conninfo() const { return conninfo_; }
  // The server's process id (0 when none runs).
  pid_t pid() const { return pid_; }
  // The TCP port (0: a Unix socket).
  int port() const { return port_; }
  // How many times the last Start started the server process (more than 1:
  // its first ports were taken).
  int attempts() const { return attempts_; }
  // Tests: where Start gets each TCP port to try, instead of
  // FreeLoopbackPort (a port the test holds, to make the retry happen).
  void set_port_probe(std::function<int()> probe) { port_probe_ = std::move(probe); }
  // How the server runs, for settings(): the binaries' directory and, as
  // root, the user it runs as and the permissions granted.
  std::string Describe() const;

 private:
  pid_t pid_ = 0;
  int port_ = 0;
  int attempts_ = 0;
  std::function<int()> port_probe_;
  int slot_ = -1;  // in the signal handler's table
  std::string bindir_;
  std::string data_dir_;
  std::string socket_dir_;
  std::string log_path_;
  std::string conninfo_;
  bool as_postgres_ = false;
  bool watching_ = false;  // WatchIo(pid_): its writes count as the bench's
  // Ancestors given o+x for the postgres user: path, former mode, and the
  // signal handler's slot for it (-1: none).
  struct Grant {
    std::string path;
    mode_t mode;
    int slot;
  };
  std::vector<Grant> granted_;
};

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_PG_SERVER_H_
