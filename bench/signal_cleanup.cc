#include "bench/signal_cleanup.h"

#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>

namespace mmdoc::bench {
namespace {

// A registered path: used (set last, with release) and the path.
struct Slot {
  std::atomic<bool> used{false};
  char path[PATH_MAX];
};
constexpr int kMaxSlots = 64;
Slot g_slots[kMaxSlots];

constexpr int kMaxHooks = 4;
std::atomic<void (*)()> g_hooks[kMaxHooks];

std::mutex g_mu;  // registration, outside handlers

// libmongoc (linked for the remote engines, and initialised when the
// program loads) keeps its counters in /dev/shm/mongoc-PID and removes the
// file at exit, which a signal skips. A later process given the same PID
// then fails to make its own and prints a warning before main, a second
// line on stderr; so the handler removes it too, for a run where
// InstallSignalCleanup could not turn the file off.
char g_mongoc_shm[64];

// SIGBUS too: a store through a memory map on a full disk (LMDB's map,
// syncbench's msync file) ends the process by it, and its files must go.
// SIGPIPE: output piped into `head` that exits early.
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGBUS};
constexpr int kNumSignals = sizeof kSignals / sizeof kSignals[0];
struct sigaction g_previous[kNumSignals];
bool g_installed[kNumSignals] = {};

void Say(const char* text) {
  for (size_t n = std::strlen(text); n > 0;) {
    const ssize_t w = write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

// The hooks, then every registered path removed; async-signal-safe.
void CleanUp() {
  for (auto& h : g_hooks) {
    void (*hook)() = h.load(std::memory_order_acquire);
    if (hook != nullptr) hook();
  }
  for (auto& s : g_slots) {
    if (s.used.exchange(false, std::memory_order_acq_rel)) RemoveTreeFromHandler(s.path);
  }
}

void OnSignal(int sig) {
  const int saved_errno = errno;
  if (sig == SIGBUS) {
    Say(program_invocation_short_name);
    Say(": SIGBUS: a memory-mapped file could not be read or written (a full disk, or a file "
        "cut short?); removing the run's files\n");
  }
  CleanUp();
  if (g_mongoc_shm[0] != '\0') unlink(g_mongoc_shm);
  // Then the signal's previous course: re-raised, it is delivered once this
  // handler returns.
  for (int i = 0; i < kNumSignals; ++i) {
    if (kSignals[i] == sig && g_installed[i]) sigaction(sig, &g_previous[i], nullptr);
  }
  raise(sig);
  errno = saved_errno;
}

void InstallHandlersOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::snprintf(g_mongoc_shm, sizeof g_mongoc_shm, "/dev/shm/mongoc-%u",
                  static_cast<unsigned>(getpid()));
    for (int i = 0; i < kNumSignals; ++i) {
      struct sigaction old;
      if (sigaction(kSignals[i], nullptr, &old) != 0) continue;
      // An ignored signal stays ignored.
      if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue;
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_handler = OnSignal;
      sigfillset(&sa.sa_mask);  // one cleanup at a time
      sa.sa_flags = SA_RESTART;
      g_previous[i] = old;
      g_installed[i] = sigaction(kSignals[i], &sa, nullptr) == 0;
    }
  });
}

}  // namespace

void RemoveTreeFromHandler(const char* path) {
  if (path[0] != '/') return;
  // _Fork, not fork: fork takes malloc's locks and runs the atfork
  // handlers, and a signal that came while this thread was in malloc would
  // wait for itself forever (found by an outside test: Ctrl-C hung the
  // bench). The child only execs.
  pid_t child = _Fork();
  if (child == 0) {
    const char* argv[] = {"rm", "-rf", "--", path, nullptr};
    execv("/bin/rm", const_cast<char* const*>(argv));
    _exit(127);
  }
  if (child > 0) {
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

void InstallSignalCleanup(char** argv) {
  if (std::getenv("MONGOC_DISABLE_SHM") == nullptr && setenv("MONGOC_DISABLE_SHM", "1", 1) == 0) {
    // This image's libmongoc made its file as the program loaded; exec
    // would leave it (its exit handler never runs), and the next image,
    // with the same PID, makes none.
    char shm[64];
    std::snprintf(shm, sizeof shm, "/dev/shm/mongoc-%u", static_cast<unsigned>(getpid()));
    unlink(shm);
    execv("/proc/self/exe", argv);  // returns only on failure: then as before
  }
  InstallHandlersOnce();
}

void CleanUpNow() { CleanUp(); }

int RemoveOnSignal(const std::string& path) {
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec || abs.size() >= PATH_MAX || abs == "/") return -1;
  InstallHandlersOnce();
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < kMaxSlots; ++i) {
    Slot& s = g_slots[i];
    if (s.used.load(std::memory_order_acquire)) continue;
    std::snprintf(s.path, sizeof s.path, "%s", abs.c_str());
    s.used.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void ForgetOnSignal(int slot) {
  if (slot < 0 || slot >= kMaxSlots) return;
  std::lock_guard<std::mutex> lock(g_mu);
  g_slots[slot].used.store(false, std::memory_order_release);
}

std::string MakeTempDir(const std::string& prefix, bool register_it, int* slot) {
  *slot = -1;
  if (!register_it) {
    std::string name = prefix + "XXXXXX";
    return ::mkdtemp(name.data()) != nullptr ? name : std::string();
  }
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device seed;
  std::mt19937_64 rng((static_cast<uint64_t>(seed()) << 32) ^ seed());
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = prefix;
    for (int i = 0; i < 6; ++i) name += kChars[rng() % (sizeof kChars - 1)];
    const int s = RemoveOnSignal(name);
    if (::mkdir(name.c_str(), 0700) == 0) {
      *slot = s;
      return name;
    }
    const int err = errno;
    ForgetOnSignal(s);
    if (err != EEXIST) {
      errno = err;
      return std::string();
    }
  }
  errno = EEXIST;
  return std::string();
}

void AddSignalHook(void (*hook)()) {
  InstallHandlersOnce();
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& h : g_hooks) {
    if (h.load() == hook) return;
  }
  for (auto& h : g_hooks) {
    if (h.load() == nullptr) {
      h.store(hook, std::memory_order_release);
      return;
    }
  }
}

}  // namespace mmdoc::bench
