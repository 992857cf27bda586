// What the bench leaves behind when SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE or
// SIGBUS ends it: one
// handler for every tool of the test bed (mmdoc-bench's data directory,
// mmdoc-syncbench's test file, a PostgreSQL server and its cluster).
//
// The handler, installed at the first registration unless the signal is
// ignored (nohup, a background job's SIGINT), runs the hooks (PgServer's:
// stop every running server), then removes every registered path with
// `rm -rf` (_Fork, execve and waitpid are async-signal-safe; nftw is not),
// then restores the signal's previous disposition and re-raises it: by
// default the process ends by the signal, exit status 128+signo.
//
//   int slot = RemoveOnSignal(dir);   // absolute or relative to the cwd,
//   ... create dir, the run ...       // registered before it exists
//   std::filesystem::remove_all(dir);
//   ForgetOnSignal(slot);
//
// A signal between remove_all and ForgetOnSignal runs `rm -rf` on a path
// that is gone, which is harmless. Registration is thread-safe; the
// handler reads the table without locks.
#ifndef MMDOC_BENCH_SIGNAL_CLEANUP_H_
#define MMDOC_BENCH_SIGNAL_CLEANUP_H_

#include <string>

namespace mmdoc::bench {

// Installs the handler now (registration also does): a tool calls it first
// thing, so that a signal before its first registration, or in a run that
// keeps its files, still cleans up after libmongoc (signal_cleanup.cc).
// First, once, it runs the program again with MONGOC_DISABLE_SHM=1 (argv
// as given): libmongoc, initialised as the program loads, then keeps its
// counters in memory, not in a /dev/shm/mongoc-PID file that a run ended
// by SIGKILL leaves for a later process with its PID to stumble on.
void InstallSignalCleanup(char** argv);

// What a signal would do, without the signal: the hooks run and every
// registered path is removed. For a tool ending on an error its own
// cleanup cannot reach (out of memory, caught in main).
void CleanUpNow();

// Registers path (made absolute now) for removal on a signal; a slot for
// ForgetOnSignal, or -1 when the table is full or the path too long (then
// nothing removes it on a signal).
int RemoveOnSignal(const std::string& path);
// Unregisters a slot from RemoveOnSignal (-1: nothing).
void ForgetOnSignal(int slot);

// mkdtemp(prefix + "XXXXXX") for a directory removed on a signal: the name
// is registered before the directory exists, so that a signal between the
// two (mkdtemp, then RemoveOnSignal) cannot leave it behind. Unless
// `register_it`, a plain new directory. Its path, or "" with errno set;
// *slot is for ForgetOnSignal (-1 when not registered).
std::string MakeTempDir(const std::string& prefix, bool register_it, int* slot);

// Installs hook to run in the handler before the paths are removed:
// async-signal-safe calls only. At most a few hooks; each is added once.
void AddSignalHook(void (*hook)());

// rm -rf path from a signal handler (an absolute path; others are left).
void RemoveTreeFromHandler(const char* path);

}  // namespace mmdoc::bench

#endif  // MMDOC_BENCH_SIGNAL_CLEANUP_H_
