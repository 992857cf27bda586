// The PostgreSQL peer's server never outlives what started it: not a bench
// run that ends, not one stopped by Ctrl-C (SIGINT), not one killed outright
// (SIGKILL). Its data directory goes with the run. (The adapter's functional
// contract is backend_test.cc's, run for "postgres" like every engine.)
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/backend.h"
#include "bench/bson_doc.h"
#include "bench/pg_server.h"
#include "bench/workload.h"
#include "tests/support/test_env.h"

namespace mmdoc::bench {
namespace {

bool PostgresBuilt() {
  auto b = NewBackend("postgres");
  if (!b.ok()) WARN("postgres engine absent: " << b.status().ToString());
  return b.ok();
}

// The processes whose working directory is under dir: a server's
// postmaster chdirs into its data directory and its children inherit it.
std::vector<pid_t> ProcessesUnder(const std::string& dir) {
  std::vector<pid_t> out;
  const std::string prefix = std::filesystem::canonical(dir).string() + "/";
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (struct dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char cwd[4096];
    const std::string link = std::string("/proc/") + e->d_name + "/cwd";
    const ssize_t n = ::readlink(link.c_str(), cwd, sizeof cwd - 1);
    if (n <= 0) continue;
    cwd[n] = '\0';
    if (std::string(cwd).rfind(prefix, 0) == 0) out.push_back(std::atoi(e->d_name));
  }
  ::closedir(proc);
  return out;
}

// Waits up to `seconds` for pred() to hold.
template <typename Pred>
bool WaitFor(double seconds, Pred pred) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1e3));
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Paths named `name` anywhere under dir.
std::vector<std::string> Named(const std::string& dir, const std::string& name) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename() == name) out.push_back(it->path().string());
  }
  return out;
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out;
}

// Starts mmdoc-bench with args (its output to log), returns its pid.
pid_t StartBench(const std::vector<std::string>& args, const std::string& log) {
  std::vector<std::string> all = {test::BuildDir() + "/mmdoc-bench"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    if (f == nullptr || ::dup2(STDOUT_FILENO, STDERR_FILENO) < 0) _exit(126);
    // The test binary's handlers are not the bench's: defaults, unblocked.
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

TEST_CASE("a postgres bench run leaves no server and no data behind", "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  test::TempDir dir;
  const std::string data = dir.File("data");
  const std::string csv = dir.File("out.csv");
  const std::string cmd = test::BuildDir() +
                          "/mmdoc-bench --engines postgres --docs 2000 --durability all"
                          " --phases " +
                          Joined(AllPhases()) +
                          " --batch 50 --scans 3 --max-durable-ops 300 --threads 2 --quiet --dir " +
                          data + " --csv " + csv + " > " + dir.File("log") + " 2>&1";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(ProcessesUnder(dir.path()).empty());
  // The run's directory is emptied: no cluster, no socket, no log.
  std::error_code ec;
  CHECK(std::filesystem::is_empty(data, ec));

  // Every phase in every mode: run where the engine has the mode (mapping
  // never: no typed layer), with the work every engine does.
  std::map<std::string, std::pair<std::string, double>> rows;  // available, ops
  std::ifstream in(csv);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string field; f.size() < 8 && std::getline(ss, field, ',');) f.push_back(field);
    if (f.size() == 8 && f[0] == "postgres") {
      rows[f[2] + "/" + f[1]] = {f[6], std::strtod(f[7].c_str(), nullptr)};
    }
  }
  auto backend = NewBackend("postgres");
  REQUIRE(backend.ok());
  for (Durability d : {Durability::kNone, Durability::kPeriodic, Durability::kMsync,
                       Durability::kFsync, Durability::kGroup}) {
    const std::string mode = DurabilityName(d);
    for (const auto& phase : AllPhases()) {
      INFO(mode << " " << phase);
      REQUIRE(rows.count(mode + "/" + phase) == 1);
      const bool runs = backend.value()->Supports(d) && phase != "mapping";
      CHECK(rows[mode + "/" + phase].first == (runs ? "true" : "false"));
      if (runs) CHECK(rows[mode + "/" + phase].second > 0);
    }
    if (!backend.value()->Supports(d)) continue;
    INFO(mode);
    CHECK(rows[mode + "/build_index"].second == 2000);
    CHECK(rows[mode + "/delete_value"].second == 2);
    CHECK(rows[mode + "/delete_all"].second == 2000 - rows[mode + "/delete"].second - 2);
  }
}

TEST_CASE("mmdoc-bench --clients remote runs postgres over TCP at several thread counts",
          "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  test::TempDir dir;
  const std::string data = dir.File("data");
  const std::string csv = dir.File("out.csv");
  const std::string cmd = test::BuildDir() +
                          "/mmdoc-bench --engines postgres --clients local,remote --docs 1000"
                          " --threads 1,3 --phases insert,search_id,search_key,update,delete"
                          " --quiet --dir " +
                          data + " --csv " + csv + " > " + dir.File("log") + " 2>&1";
  INFO(cmd);
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(ProcessesUnder(dir.path()).empty());
  std::error_code ec;
  CHECK(std::filesystem::is_empty(data, ec));
  // engine/phase/threads -> ops and the settings (the notes up to "; ").
  std::map<std::string, std::pair<double, std::string>> rows;
  std::ifstream in(csv);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string field; f.size() < 15 && std::getline(ss, field, ',');) f.push_back(field);
    if (f.size() < 8 || f[0] == "engine") continue;
    // The notes are quoted (they hold commas): what follows the 14th comma.
    const size_t at = line.find(",\"PostgreSQL ");
    rows[f[0] + "/" + f[1] + "/" + f[5]] = {std::strtod(f[7].c_str(), nullptr),
                                            at == std::string::npos ? "" : line.substr(at + 2)};
  }
  for (const char* engine : {"postgres", "postgres-tcp"}) {
    INFO(engine);
    CHECK(rows[std::string(engine) + "/insert/1"].first == 1000);
    CHECK(rows[std::string(engine) + "/update/1"].first == 100);
    CHECK(rows[std::string(engine) + "/delete/1"].first == 100);
    for (const char* row : {"/search_id/1", "/search_id/3", "/search_key/1", "/search_key/3"}) {
      INFO(row);
      CHECK(rows[std::string(engine) + row].first == 100);
    }
  }
  const std::string local = rows["postgres/insert/1"].second;
  const std::string tcp = rows["postgres-tcp/insert/1"].second;
  INFO(local);
  INFO(tcp);
  CHECK(local.find("PostgreSQL 1") == 0);
  CHECK(local.find("over a Unix socket") != std::string::npos);
  CHECK(local.find("TCP") == std::string::npos);
  CHECK(tcp.find("over TCP loopback (127.0.0.1:") != std::string::npos);
  CHECK(tcp.find("TCP on 127.0.0.1:") != std::string::npos);
  CHECK(tcp.find("Unix socket only") == std::string::npos);

  // remote alone: TCP only; local alone: the Unix socket, as ever.
  const std::string remote_csv = dir.File("remote.csv");
  REQUIRE(std::system((test::BuildDir() +
                       "/mmdoc-bench --engines postgres --clients remote --docs 200"
                       " --phases insert --quiet --dir " +
                       data + " --csv " + remote_csv)
                          .c_str()) == 0);
  std::ifstream remote(remote_csv);
  std::string text((std::istreambuf_iterator<char>(remote)), std::istreambuf_iterator<char>());
  CHECK(text.find("\npostgres-tcp,insert,") != std::string::npos);
  CHECK(text.find("\npostgres,") == std::string::npos);
  CHECK(ProcessesUnder(dir.path()).empty());
}

TEST_CASE("a TCP postgres server listens on 127.0.0.1 only and has no Unix socket",
          "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  test::TempDir dir;
  auto b = NewBackend("postgres-tcp");
  REQUIRE(b.ok());
  std::unique_ptr<Backend> backend = std::move(b.value());
  REQUIRE(backend->name() == "postgres-tcp");
  Status s = backend->Open(dir.path(), BackendConfig{});
  INFO(s.ToString());
  REQUIRE(s.ok());
  const std::string settings = backend->settings();
  INFO(settings);
  CHECK(settings.find("over TCP loopback (127.0.0.1:") != std::string::npos);
  CHECK(Named(dir.path(), ".s.PGSQL.5432").empty());
  // The server's own view: one address, TCP, a port; only loopback may
  // connect (pg_hba).
  std::ifstream hba(dir.File("pgdata/pg_hba.conf"));
  std::string rules((std::istreambuf_iterator<char>(hba)), std::istreambuf_iterator<char>());
  CHECK(rules.find("host all postgres 127.0.0.1/32 trust") != std::string::npos);
  CHECK(rules.find("local") == std::string::npos);
  CHECK(rules.find("::1") == std::string::npos);
  auto session = backend->NewSession();
  REQUIRE(session.ok());
  const std::string doc = MakeDocument("id", "key", "v");
  REQUIRE(session.value()->Begin().ok());
  REQUIRE(session.value()->Insert(DocRef{"id", "key", doc}).ok());
  REQUIRE(session.value()->Commit().ok());
  std::string value;
  CHECK(session.value()->GetById("id", &value).ok());
  CHECK(value == "v");
  session.value().reset();
  CHECK(backend->Close().ok());
  CHECK(ProcessesUnder(dir.path()).empty());
}

TEST_CASE("a server the adapter started stops with Close", "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  test::TempDir dir;
  auto b = NewBackend("postgres");
  REQUIRE(b.ok());
  std::unique_ptr<Backend> backend = std::move(b.value());
  BackendConfig config;
  Status s = backend->Open(dir.path(), config);
  INFO(s.ToString());
  REQUIRE(s.ok());
  const std::string settings = backend->settings();
  INFO(settings);
  CHECK(settings.find("PostgreSQL 1") == 0);
  CHECK(settings.find("synchronous_commit=off") != std::string::npos);
  CHECK(settings.find("shared_buffers=") != std::string::npos);
  if (::geteuid() == 0) CHECK(settings.find("as user postgres") != std::string::npos);
  CHECK(!ProcessesUnder(dir.path()).empty());
  CHECK(backend->Close().ok());
  CHECK(ProcessesUnder(dir.path()).empty());
  CHECK(Named(dir.path(), "sock").empty());
  // Closed twice, or destroyed after Close: nothing more to do.
  CHECK(backend->Close().ok());
}

// Starts a bench run big enough to be busy for a while, waits for its
// server, sends sig, and checks the server goes.
void StopRunWith(int sig) {
  test::TempDir dir;
  const std::string data = dir.File("data");
  const pid_t bench = StartBench({"--engines", "postgres", "--docs", "400k", "--phases",
                                  "insert,search_value", "--scans", "50", "--dir", data},
                                 dir.File("log"));
  REQUIRE(bench > 0);
  // Its server runs (initdb is done: the socket is there), and has
  // documents coming in.
  const bool started = WaitFor(60, [&] { return !Named(data, ".s.PGSQL.5432").empty(); });
  if (!started) ::kill(bench, SIGKILL);
  REQUIRE(started);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  REQUIRE(::kill(bench, sig) == 0);
  int status = 0;
  REQUIRE(::waitpid(bench, &status, 0) == bench);
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == sig);
  if (sig == SIGINT) {
    // The bench's handler stopped the server, waited for it and removed its
    // cluster before the bench ended.
    const std::vector<pid_t> left = ProcessesUnder(dir.path());
    for (pid_t p : left) {
      std::ifstream cmdline("/proc/" + std::to_string(p) + "/cmdline");
      std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
      UNSCOPED_INFO("left: " << p << " " << text);
    }
    CHECK(left.empty());
    CHECK(Named(data, "pgdata").empty());
  }
  // Killed: the kernel's PR_SET_PDEATHSIG starts the server's fast
  // shutdown.
  const bool gone = WaitFor(60, [&] { return ProcessesUnder(dir.path()).empty(); });
  CHECK(gone);
}

TEST_CASE("SIGINT during a postgres bench run stops the server", "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  StopRunWith(SIGINT);
}

TEST_CASE("a postgres server dies with a bench killed outright", "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  StopRunWith(SIGKILL);
}

TEST_CASE("a postgres transaction an error aborted does not commit", "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  test::TempDir dir;
  auto backend = std::move(NewBackend("postgres").value());
  REQUIRE(backend->Open(dir.path(), BackendConfig{}).ok());
  auto session = std::move(backend->NewSession().value());
  const std::string good = MakeDocument("good-id", "good-key", "v");
  const std::string bad = MakeDocument("bad-id", "bad-key", "v");
  // Not UTF-8: the server refuses the text, which aborts the transaction.
  REQUIRE(session->Begin().ok());
  REQUIRE(session->Insert(DocRef{"good-id", "good-key", good}).ok());
  CHECK_FALSE(session->Insert(DocRef{"bad-\xff", "bad-key", bad}).ok());
  CHECK_FALSE(session->Commit().ok());
  std::string value;
  CHECK(session->GetById("good-id", &value).IsNotFound());
  // The session goes on.
  REQUIRE(session->Begin().ok());
  REQUIRE(session->Insert(DocRef{"good-id", "good-key", good}).ok());
  REQUIRE(session->Commit().ok());
  CHECK(session->GetById("good-id", &value).ok());
  session.reset();
  CHECK(backend->Close().ok());
}

// A TCP port on 127.0.0.1 this process holds until the end of the scope:
// bound, not listening, without SO_REUSEADDR, so a server's bind to it fails
// (EADDRINUSE) and a client's connect is refused at once.
class HeldPort {
 public:
  HeldPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~HeldPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_CASE("PgServer recognises a port taken in the server's log", "[bench][postgres]") {
  // PostgreSQL 15's lines when another process holds the port.
  CHECK(PgLogSaysPortTaken(
      "2026-12-02 23:50:01.123 UTC [4242] LOG:  could not bind IPv4 address \"127.0.0.1\": "
      "Address already in use\n2026-12-02 23:50:01.123 UTC [4242] HINT:  Is another postmaster "
      "already running on port 40000? If not, wait a few seconds and retry.\n"
      "2026-12-02 23:50:01.123 UTC [4242] FATAL:  could not create any TCP/IP sockets\n"));
  CHECK_FALSE(PgLogSaysPortTaken(""));
  CHECK_FALSE(PgLogSaysPortTaken("LOG:  database system is ready to accept connections\n"));
  CHECK_FALSE(PgLogSaysPortTaken(
      "FATAL:  could not create shared memory segment: Cannot allocate memory\n"));
}

TEST_CASE("PgServer over TCP starts again on a new port when its port was taken",
          "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  test::TempDir dir;
  HeldPort held;
  REQUIRE(held.port() != 0);
  // The first probe gives the held port (another process took it after the
  // probe), the next ones a free one.
  int probes = 0;
  PgServer server;
  server.set_port_probe([&] { return ++probes == 1 ? held.port() : FreeLoopbackPort(); });
  Status s = server.Start(dir.path(), {}, PgTransport::kTcp);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(server.attempts() == 2);
  CHECK(probes == 2);
  CHECK(server.port() != held.port());
  CHECK(server.pid() > 0);
  CHECK(server.conninfo().find("port=" + std::to_string(server.port())) != std::string::npos);
  std::ifstream log(dir.File("postgres.log"));
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK(PgLogSaysPortTaken(text));
  CHECK(server.Stop().ok());
  CHECK(ProcessesUnder(dir.path()).empty());
}

TEST_CASE("PgServer over TCP gives up with the server's log when every port is taken",
          "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  test::TempDir dir;
  HeldPort held;
  REQUIRE(held.port() != 0);
  int probes = 0;
  PgServer server;
  server.set_port_probe([&] {
    ++probes;
    return held.port();
  });
  Status s = server.Start(dir.path(), {}, PgTransport::kTcp);
  const std::string error = s.ToString();
  INFO(error);
  CHECK(s.IsIOError());
  CHECK(probes == PgServer::kPortAttempts);
  CHECK(server.attempts() == PgServer::kPortAttempts);
  CHECK(server.pid() == 0);
  CHECK(error.find(std::to_string(PgServer::kPortAttempts) + " attempts, each port taken") !=
        std::string::npos);
  CHECK(error.find("Address already in use") != std::string::npos);
  CHECK(ProcessesUnder(dir.path()).empty());
  // Over the Unix socket no port is probed.
  test::TempDir other;
  PgServer local;
  local.set_port_probe([&] {
    ++probes;
    return held.port();
  });
  s = local.Start(other.path(), {}, PgTransport::kSocket);
  INFO(s.ToString());
  CHECK(s.ok());
  CHECK(local.attempts() == 1);
  CHECK(local.port() == 0);
  CHECK(probes == PgServer::kPortAttempts);
  CHECK(local.Stop().ok());
}

TEST_CASE("PgServer finds Debian's server binaries", "[bench][postgres]") {
  if (!PostgresBuilt()) return;
  const std::string bin = PgServer::FindBinDir();
  INFO(bin);
  CHECK(::access((bin + "/postgres").c_str(), X_OK) == 0);
  CHECK(::access((bin + "/initdb").c_str(), X_OK) == 0);
}

}  // namespace
}  // namespace mmdoc::bench
