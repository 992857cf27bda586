#include "bench/pg_server.h"

#include <fcntl.h>
#include <glob.h>
#include <grp.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <thread>

#include "bench/machine.h"
#include "bench/signal_cleanup.h"

namespace mmdoc::bench {
namespace {

// ---- the signal path: every running server, readable from a handler ----

// A running server as the handler sees it: its pid (0 = free slot) and the
// directories to remove after it exits. Written with the pid stored last
// (release), read with the pid loaded first (acquire).
struct Running {
  std::atomic<pid_t> pid{0};
  // initdb (and the single-user postgres it runs, in its process group):
  // killed, not shut down.
  bool initdb = false;
  char data_dir[PATH_MAX];
  char socket_dir[PATH_MAX];
};
constexpr int kMaxServers = 32;
Running g_running[kMaxServers];
std::mutex g_running_mu;  // slot allocation, outside handlers

// A directory a server's start made searchable (o+x) for the postgres
// user, and its mode before: the handler puts the modes back (chmod is
// async-signal-safe), as Stop does. Written with `used` stored last.
struct Granted {
  std::atomic<bool> used{false};
  mode_t mode = 0;
  char path[PATH_MAX];
};
constexpr int kMaxGranted = 64;
Granted g_granted[kMaxGranted];

int RegisterGranted(const std::string& path, mode_t mode) {
  std::lock_guard<std::mutex> lock(g_running_mu);
  for (int i = 0; i < kMaxGranted; ++i) {
    Granted& g = g_granted[i];
    if (g.used.load(std::memory_order_acquire)) continue;
    std::snprintf(g.path, sizeof g.path, "%s", path.c_str());
    g.mode = mode;
    g.used.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void ForgetGranted(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_running_mu);
  g_granted[slot].used.store(false, std::memory_order_release);
}

// The signal handler's hook (bench/signal_cleanup.h): every running server
// stopped, its data and socket directories removed, the modes it changed
// put back (the deepest directory first, as registered last).
void StopServersFromHandler() {
  // initdb (and the single-user postgres it runs, in its process group):
  // killed. A server: a fast shutdown (pg_ctl stop -m fast) first, since an
  // immediate one leaves its shared memory segments in /dev/shm, which only
  // the next start of the cluster (never: it is removed next) would take
  // away; its checkpoint writes at most shared_buffers. Past kGraceMs, the
  // immediate shutdown. (initdb killed still leaves its single-user
  // server's segments.)
  constexpr int kGraceMs = 3000;
  for (auto& r : g_running) {
    pid_t p = r.pid.load(std::memory_order_acquire);
    if (p > 0) kill(r.initdb ? -p : p, r.initdb ? SIGKILL : SIGINT);
  }
  for (auto& r : g_running) {
    pid_t p = r.pid.exchange(0, std::memory_order_acq_rel);
    if (p <= 0) continue;
    bool gone = false;
    for (int waited = 0; !gone && !r.initdb && waited < kGraceMs; waited += 10) {
      const pid_t w = waitpid(p, nullptr, WNOHANG);
      gone = w == p || (w < 0 && errno != EINTR);
      if (!gone) {
        const struct timespec ten_ms = {0, 10 * 1000 * 1000};
        nanosleep(&ten_ms, nullptr);
      }
    }
    if (!gone && !r.initdb) kill(p, SIGQUIT);
    while (!gone && waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
    }
    RemoveTreeFromHandler(r.data_dir);
    RemoveTreeFromHandler(r.socket_dir);
  }
  for (int i = kMaxGranted - 1; i >= 0; --i) {
    Granted& g = g_granted[i];
    if (g.used.exchange(false, std::memory_order_acq_rel)) (void)::chmod(g.path, g.mode);
  }
}

int Register(pid_t pid, bool initdb, const std::string& data_dir, const std::string& socket_dir) {
  std::lock_guard<std::mutex> lock(g_running_mu);
  for (int i = 0; i < kMaxServers; ++i) {
    Running& r = g_running[i];
    if (r.pid.load(std::memory_order_acquire) != 0) continue;
    std::snprintf(r.data_dir, sizeof r.data_dir, "%s", data_dir.c_str());
    std::snprintf(r.socket_dir, sizeof r.socket_dir, "%s", socket_dir.c_str());
    r.initdb = initdb;
    r.pid.store(pid, std::memory_order_release);
    return i;
  }
  return -1;  // more servers than slots: only PDEATHSIG covers this one
}

// ---- child processes ----

struct RunAs {
  bool enabled = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Forks and execs argv (argv[0] a full path): stdout and stderr to log_fd,
// stdin from /dev/null, no other descriptor inherited, in a process group
// of its own (a terminal's Ctrl-C reaches the bench, which decides), as
// run_as, and sent death_signal when the calling thread ends. -1 and *error
// on failure.
pid_t Spawn(const std::vector<std::string>& args, const RunAs& run_as, int log_fd, int death_signal,
            std::string* error) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    *error = std::string("open /dev/null: ") + std::strerror(errno);
    return -1;
  }
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    // Only async-signal-safe calls from here on (the bench has threads).
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setpgid(0, 0);
    if (run_as.enabled) {
      if (setgroups(1, &run_as.gid) != 0 || setgid(run_as.gid) != 0 || setuid(run_as.uid) != 0) {
        _exit(126);
      }
    }
    // After setuid, which clears it; exec keeps it.
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(125);  // the bench is already gone
    if (chdir("/") != 0) _exit(124);
    if (dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0) _exit(123);
    syscall(SYS_close_range, 3u, ~0u, 0u);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(null_fd);
  if (child < 0) *error = std::string("fork: ") + std::strerror(errno);
  return child;
}

// The last lines of the log, for an error message.
std::string LogTail(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    lines.push_back(line);
    if (lines.size() > 8) lines.erase(lines.begin());
  }
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out.empty() ? "(empty log " + path + ")" : out;
}

// The file from byte offset on.
std::string ReadFrom(const std::string& path, off_t offset) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(offset);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool PgLogSaysPortTaken(std::string_view log) {
  // "LOG:  could not bind IPv4 address "127.0.0.1": Address already in use"
  // (PostgreSQL's message, followed by "FATAL:  could not create any TCP/IP
  // sockets"); English, as the bench starts the server with locale C.
  return log.find("could not bind") != std::string_view::npos ||
         log.find("Address already in use") != std::string_view::npos;
}

namespace {

// Whether the postgres user can search directory path.
bool Searchable(const struct stat& st, const RunAs& as) {
  if (st.st_uid == as.uid) return (st.st_mode & S_IXUSR) != 0;
  if (st.st_gid == as.gid) return (st.st_mode & S_IXGRP) != 0;
  return (st.st_mode & S_IXOTH) != 0;
}

}  // namespace

PgServer::~PgServer() { (void)Stop(); }

std::string PgServer::FindBinDir() {
  if (const char* env = std::getenv("MMDOC_PG_BINDIR"); env != nullptr && env[0] != '\0') {
    return std::string(env);
  }
  glob_t g;
  std::string best;
  int best_version = -1;
  if (glob("/usr/lib/postgresql/*/bin/postgres", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      std::string bin = std::filesystem::path(g.gl_pathv[i]).parent_path().string();
      std::string version = std::filesystem::path(bin).parent_path().filename().string();
      int v = std::atoi(version.c_str());
      if (v > best_version && ::access((bin + "/initdb").c_str(), X_OK) == 0) {
        best_version = v;
        best = bin;
      }
    }
  }
  globfree(&g);
  return best;
}

Status PgServer::Start(const std::string& dir,
                       const std::vector<std::pair<std::string, std::string>>& settings,
                       PgTransport transport) {
  if (pid_ != 0) return Status::InvalidArgument("PgServer already started");
  bindir_ = FindBinDir();
  if (bindir_.empty()) {
    return Status::NotSupported(
        "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin (tools/setup installs "
        "postgresql-15)");
  }
  std::error_code ec;
  const std::string abs_dir = std::filesystem::absolute(dir, ec).lexically_normal().string();
  data_dir_ = abs_dir + "/pgdata";
  log_path_ = abs_dir + "/postgres.log";
  // A Unix socket path has at most 107 bytes: the store's directory when it
  // is short enough, else a private one in /tmp.
  socket_dir_ = abs_dir + "/sock";
  if (socket_dir_.size() + std::strlen("/.s.PGSQL.5432") >= 100) {
    char tmpl[] = "/tmp/mmdoc-pg-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return Status::IOError("mkdtemp /tmp/mmdoc-pg-XXXXXX");
    socket_dir_ = tmpl;
  } else if (::mkdir(socket_dir_.c_str(), 0700) != 0) {
    return Status::IOError("mkdir " + socket_dir_, std::strerror(errno));
  }
  if (::mkdir(data_dir_.c_str(), 0700) != 0) {
    return Status::IOError("mkdir " + data_dir_, std::strerror(errno));
  }

  RunAs as;
  as_postgres_ = ::geteuid() == 0;
  if (as_postgres_) {
    struct passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
      return Status::NotSupported(
          "PostgreSQL refuses to run as root and there is no `postgres` user (Debian's "
          "postgresql package creates it; tools/setup installs it)");
    }
    as.enabled = true;
    as.uid = pw->pw_uid;
    as.gid = pw->pw_gid;
    for (const std::string& d : {data_dir_, socket_dir_}) {
      if (::chown(d.c_str(), as.uid, as.gid) != 0) {
        return Status::IOError("chown " + d + " to postgres", std::strerror(errno));
      }
    }
    // The postgres user must be able to reach the data directory.
    for (std::filesystem::path p = abs_dir; !p.empty(); p = p.parent_path()) {
      struct stat st;
      if (::stat(p.c_str(), &st) == 0 && !Searchable(st, as)) {
        if (::chmod(p.c_str(), (st.st_mode & 07777) | S_IXOTH) != 0) {
          return Status::IOError("chmod o+x " + p.string(), std::strerror(errno));
        }
        granted_.push_back(Grant{p.string(), st.st_mode & 07777, -1});
        granted_.back().slot = RegisterGranted(p.string(), st.st_mode & 07777);
      }
      if (p == p.root_path()) break;
    }
  }

  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Status::IOError("open " + log_path_, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{log_fd};

  // initdb: the cluster, fresh for this store.
  AddSignalHook(StopServersFromHandler);
  std::string error;
  pid_t initdb = Spawn({bindir_ + "/initdb", "-D", data_dir_, "--auth=trust", "-E", "UTF8",
                        "--locale=C", "--no-sync", "-U", "postgres"},
                       as, log_fd, SIGKILL, &error);
  if (initdb < 0) return Status::IOError("initdb", error);
  const int initdb_slot = Register(initdb, true, data_dir_, socket_dir_);
  int status = 0;
  while (::waitpid(initdb, &status, 0) < 0 && errno == EINTR) {
  }
  if (initdb_slot >= 0) g_running[initdb_slot].pid.store(0, std::memory_order_release);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::IOError("initdb failed (" + ExitText(status) + ")", LogTail(log_path_));
  }

  // The server, a child of the bench. Over TCP the port is probed free
  // just before, but another process can bind it before the server does:
  // the server then exits saying so in its log, and is started again on a
  // newly probed port, kPortAttempts times at most.
  const bool tcp = transport == PgTransport::kTcp;
  if (tcp) {
    // Only the bench's own connections: the one address, the one user. The
    // file is initdb's (owned by the server's user), rewritten in place.
    std::ofstream hba(data_dir_ + "/pg_hba.conf", std::ios::trunc);
    hba << "# mmdoc-bench: TCP loopback only\nhost all postgres 127.0.0.1/32 trust\n";
    hba.close();
    if (!hba) return Status::IOError("write " + data_dir_ + "/pg_hba.conf");
  }
  std::string taken_ports;  // the ports found taken, for the error
  for (attempts_ = 1;; ++attempts_) {
    std::vector<std::string> args = {bindir_ + "/postgres", "-D", data_dir_};
    if (tcp) {
      port_ = port_probe_ ? port_probe_() : FreeLoopbackPort();
      if (port_ == 0) {
        return Status::IOError("no free TCP port on 127.0.0.1", std::strerror(errno));
      }
      args.insert(args.end(), {"-c", "listen_addresses=127.0.0.1", "-c",
                               "port=" + std::to_string(port_), "-c", "unix_socket_directories="});
    } else {
      port_ = 0;
      args.insert(args.end(),
                  {"-c", "listen_addresses=", "-c", "unix_socket_directories=" + socket_dir_});
    }
    for (const auto& [name, value] : settings) {
      args.push_back("-c");
      args.push_back(name + "=" + value);
    }
    // Where this attempt's lines begin in the log.
    struct stat log_st;
    const off_t log_start = ::fstat(log_fd, &log_st) == 0 ? log_st.st_size : 0;
    pid_ = Spawn(args, as, log_fd, SIGINT, &error);
    if (pid_ < 0) {
      pid_ = 0;
      return Status::IOError("postgres", error);
    }
    slot_ = Register(pid_, false, data_dir_, socket_dir_);
    // Over TCP, libpq would first ask for TLS and GSSAPI encryption, which
    // this server does not have: a round trip per connection for nothing.
    // A timeout, so that a process that took the port and never answers
    // cannot hang the readiness check below.
    conninfo_ = tcp ? "host=127.0.0.1 port=" + std::to_string(port_) +
                          " user=postgres dbname=postgres sslmode=disable gssencmode=disable"
                          " connect_timeout=10"
                    : "host=" + socket_dir_ + " port=5432 user=postgres dbname=postgres";

    // Ready when it accepts connections.
    bool exited = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (PQping(conninfo_.c_str()) != PQPING_OK) {
      pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        exited = true;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        (void)Stop();
        return Status::IOError("postgres did not accept connections within 60 s",
                               LogTail(log_path_));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exited) break;
    // It exited at start: its slot is free again, its data directory kept.
    pid_ = 0;
    if (slot_ >= 0) {
      g_running[slot_].pid.store(0, std::memory_order_release);
      slot_ = -1;
    }
    const bool taken = tcp && PgLogSaysPortTaken(ReadFrom(log_path_, log_start));
    if (taken) taken_ports += (taken_ports.empty() ? "" : ", ") + std::to_string(port_);
    if (taken && attempts_ < kPortAttempts) continue;
    (void)Stop();
    return Status::IOError(
        "postgres exited at start (" + ExitText(status) +
            (taken ? "; " + std::to_string(attempts_) + " attempts, each port taken: " + taken_ports
                   : std::string()) +
            ")",
        LogTail(log_path_));
  }
  // Its writes are the engine's: the phases' written/op include them.
  WatchIo(pid_);
  watching_ = true;
  return Status::OK();
}

Status PgServer::Stop() {
  Status s;
  if (watching_) {
    UnwatchIo(pid_);
    watching_ = false;
  }
  if (pid_ > 0) {
    // Fast shutdown; then immediate; then kill.
    int status = 0;
    pid_t done = 0;
    for (int sig : {SIGINT, SIGQUIT, SIGKILL}) {
      ::kill(pid_, sig);
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(sig == SIGINT ? 120 : 10);
      while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (done != 0) break;
    }
    if (done == pid_ && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      s = Status::IOError("postgres shutdown: " + ExitText(status), LogTail(log_path_));
    }
    pid_ = 0;
  }
  if (slot_ >= 0) {
    g_running[slot_].pid.store(0, std::memory_order_release);
    slot_ = -1;
  }
  if (!socket_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(socket_dir_, ec);
    socket_dir_.clear();
  }
  for (auto it = granted_.rbegin(); it != granted_.rend(); ++it) {
    (void)::chmod(it->path.c_str(), it->mode);
    ForgetGranted(it->slot);
  }
  granted_.clear();
  return s;
}

std::string PgServer::Describe() const {
  std::string s = "server started by the bench (initdb --no-sync, then " + bindir_ +
                  "/postgres as its child, " +
                  (port_ != 0 ? "TCP on 127.0.0.1:" + std::to_string(port_) +
                                    " only (no Unix socket, pg_hba: trust for postgres from "
                                    "127.0.0.1/32 only)"
                              : std::string("Unix socket only")) +
                  ", stopped with a fast shutdown";
  s += ", also on SIGINT/SIGTERM/SIGHUP and, by PR_SET_PDEATHSIG, when the bench dies)";
  if (as_postgres_) {
    s += ", run as user postgres because the bench runs as root";
    if (!granted_.empty()) {
      s += " (o+x granted for the run on";
      for (const auto& g : granted_) s += " " + g.path;
      s += ")";
    }
  }
  return s;
}

}  // namespace mmdoc::bench
