// mmdoc serve: the database behind MongoDB's wire protocol (server/), until
// SIGTERM or SIGINT, which close it cleanly (a checkpoint).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "mmdoc/db.h"
#include "server/commands.h"
#include "server/server.h"
#include "tools/commands.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {

int RunServe(const CommonArgs& c, const ServeArgs& a) {
  // Block the signals before any thread starts, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  int code = kExitOk;
  std::error_code ec;
  const bool existed = std::filesystem::exists(c.db, ec);
  auto db = OpenDb(c, Access::kCreate, &code);
  if (!db) return code;

  server::CommandOptions co;
  co.durability = ParseDurability(c.durability).value_or(Durability::kPeriodic);
  co.max_cursors = a.max_cursors;
  co.cursor_timeout = std::chrono::milliseconds(a.cursor_timeout_ms);
  co.version = MMDOC_VERSION;
  server::ServerOptions so;
  so.bind = a.bind;
  so.port = a.port;
  so.max_connections = a.max_connections;
  so.log = [](const std::string& line) { std::fprintf(stderr, "mmdoc serve: %s\n", line.c_str()); };
  {
    server::Commands commands(db.get(), co);
    server::Server srv(&commands, so);
    Status s = srv.Listen();
    if (!s.ok()) {
      // Nothing was served: a database made for it goes again.
      if (!existed && db->Close().ok()) {
        std::filesystem::remove(c.db, ec);
        std::filesystem::remove(c.db + "-log", ec);
      }
      return FailStatus("serve", s);
    }
    // One line on stdout, for scripts that started us on port 0.
    std::printf("mmdoc serve: listening on %s:%d (%s, durability %s)\n", a.bind.c_str(), srv.port(),
                c.db.c_str(), DurabilityName(co.durability));
    std::fflush(stdout);
    std::thread waiter([&srv, &stop_signals] {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::fprintf(stderr, "mmdoc serve: %s: shutting down\n",
                   sig == SIGTERM ? "SIGTERM" : "SIGINT");
      srv.Stop();
    });
    srv.Run();
    waiter.join();
  }
  // Closing the database checkpoints it.
  Status s = db->Close();
  if (!s.ok()) return FailStatus("serve: close", s);
  std::fprintf(stderr, "mmdoc serve: closed %s\n", c.db.c_str());
  return kExitOk;
}

}  // namespace mmdoc::tool
