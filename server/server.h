// The `mmdoc serve` network server: a TCP listener, one thread per
// connection reading MongoDB wire-protocol messages (server/wire.h) and
// answering them with server/commands.h.
//
// Bounds: at most ServerOptions::max_connections connections at once (one
// more is accepted and closed at once, with a log line); no message over
// kMaxMessageSize. A message that cannot be framed (bad length, an opcode
// other than OP_MSG/OP_QUERY, cut short) gets an error reply when
// possible, a log line, and its connection closed; one that is framed but
// invalid inside (bad BSON, bad sections) gets an error reply and the
// connection goes on. Other connections never notice either.
//
// Thread safety: Stop may be called from any thread (a signal handler
// thread); everything else from the thread that owns the Server.
#ifndef MMDOC_SERVER_SERVER_H_
#define MMDOC_SERVER_SERVER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "mmdoc/status.h"
#include "server/commands.h"

namespace mmdoc::server {

struct ServerOptions {
  // Address to listen on; loopback unless told otherwise.
  std::string bind = "127.0.0.1";
  // TCP port; 0 picks a free one (port() says which).
  int port = 27017;
  // Connections served at once; one more is closed at once.
  size_t max_connections = 64;
  // Receives one line per event worth logging (no newline). Default: none.
  std::function<void(const std::string&)> log;
};

class Server {
 public:
  // `commands` must outlive the Server.
  Server(Commands* commands, const ServerOptions& options);
  ~Server();  // stops and joins everything
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens. InvalidArgument for a bad address; IOError (errno
  // text) when the port is taken or the socket fails.
  Status Listen();
  // The port listened on (after Listen).
  int port() const { return port_; }
  // Accepts and serves connections until Stop(); then closes every
  // connection and returns once their threads have finished (a command
  // in progress completes first).
  void Run();
  // Makes Run return. Safe from any thread, more than once.
  void Stop();

 private:
  struct Connection {
    int fd = -1;
    int64_t id = 0;
    std::string peer;
    std::thread thread;
    std::atomic<bool> done{false};
  };

  void Serve(Connection* c);
  void Log(const std::string& line);
  void JoinFinished(bool all);
  void ShedConnection();
  // Opens the spare descriptor when there is none; false when none is free.
  bool RestoreSpare();

  Commands* commands_;
  ServerOptions options_;
  int listen_fd_ = -1;
  int wake_fds_[2] = {-1, -1};  // Stop() writes to [1] to wake Run's poll
  int spare_fd_ = -1;           // given up to accept and close a connection past ulimit -n
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> next_id_{1};

  std::mutex mu_;  // guards connections_
  std::list<std::unique_ptr<Connection>> connections_;
};

}  // namespace mmdoc::server

#endif  // MMDOC_SERVER_SERVER_H_
