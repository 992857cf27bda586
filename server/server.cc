#include "server/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "server/wire.h"

namespace mmdoc::server {
namespace {

// Reads exactly n bytes; the count read (less than n at EOF or on error).
size_t ReadFull(int fd, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, buf + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

bool WriteFull(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t w = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace

Server::Server(Commands* commands, const ServerOptions& options)
    : commands_(commands), options_(options) {}

Server::~Server() {
  Stop();
  JoinFinished(true);
  if (listen_fd_ >= 0) close(listen_fd_);
  if (spare_fd_ >= 0) close(spare_fd_);
  for (int fd : wake_fds_) {
    if (fd >= 0) close(fd);
  }
}

void Server::Log(const std::string& line) {
  if (options_.log) options_.log(line);
}

Status Server::Listen() {
  if (pipe2(wake_fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return Status::IOError("pipe", std::strerror(errno));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(options_.port);
  int rc = getaddrinfo(options_.bind.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return Status::InvalidArgument("bad --bind address " + options_.bind, gai_strerror(rc));
  }
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(res);
    return Status::IOError("socket", std::strerror(errno));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
    std::string err = std::strerror(errno);
    freeaddrinfo(res);
    close(fd);
    return Status::IOError("cannot listen on " + options_.bind + ":" + port, err);
  }
  freeaddrinfo(res);
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  listen_fd_ = fd;
  RestoreSpare();
  return Status::OK();
}

// Out of descriptors, a pending connection would wake poll again at once:
// it is accepted on the spare descriptor and closed, so its client hears a
// close and the loop does not spin.
void Server::ShedConnection() {
  if (spare_fd_ >= 0) close(spare_fd_);
  spare_fd_ = -1;
  int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) close(fd);
  Log("refused a connection: out of file descriptors (ulimit -n)");
  if (!RestoreSpare()) poll(nullptr, 0, 100);  // none to spare yet: wait rather than spin
}

bool Server::RestoreSpare() {
  if (spare_fd_ < 0) spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return spare_fd_ >= 0;
}

void Server::Stop() {
  if (stopping_.exchange(true)) return;
  if (wake_fds_[1] >= 0) {
    char c = 1;
    ssize_t ignored = write(wake_fds_[1], &c, 1);
    (void)ignored;
  }
}

void Server::JoinFinished(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (all || (*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    if (c->thread.joinable()) c->thread.join();
    close(c->fd);
  }
}

void Server::Run() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
    // Wakes once a second to reap idle cursors and finished connections.
    int n = poll(fds, 2, 1000);
    JoinFinished(false);
    size_t reaped = commands_->ReapIdleCursors();
    if (reaped > 0) Log("closed " + std::to_string(reaped) + " idle cursor(s)");
    if (n <= 0 || stopping_.load()) continue;
    if (!(fds[0].revents & POLLIN)) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) ShedConnection();
      continue;
    }
    std::string peer = PeerName(addr);
    // A connection thread can take the spare's number while one is shed
    // (glibc opens /sys/devices/system/cpu/online for a thread's first
    // malloc). Without a spare the next shed cannot happen and its client
    // hangs, so the spare comes back first, at this connection's cost.
    if (!RestoreSpare()) {
      close(fd);
      Log("refused connection from " + peer + ": out of file descriptors (ulimit -n)");
      RestoreSpare();
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (connections_.size() >= options_.max_connections) {
      Log("refused connection from " + peer + ": " + std::to_string(connections_.size()) +
          " connections open (--max-connections " + std::to_string(options_.max_connections) + ")");
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->id = next_id_++;
    c->peer = peer;
    Connection* raw = c.get();
    connections_.push_back(std::move(c));
    try {
      raw->thread = std::thread([this, raw] { Serve(raw); });
    } catch (const std::system_error& e) {  // no memory or threads left
      Log("refused connection from " + peer + ": cannot start its thread: " + e.what());
      connections_.pop_back();
      close(fd);
    }
  }
  // Wake every connection blocked in recv; each finishes what it runs.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : connections_) shutdown(c->fd, SHUT_RDWR);
  }
  JoinFinished(true);
}

void Server::Serve(Connection* c) {
  std::string message;
  while (!stopping_.load()) {
    char header_bytes[kHeaderSize];
    size_t got = ReadFull(c->fd, header_bytes, kHeaderSize);
    if (got == 0) break;  // the client closed the connection
    if (got < kHeaderSize) {
      Log("connection " + std::to_string(c->id) + " from " + c->peer +
          ": message header cut short; closing");
      break;
    }
    auto header = ParseHeader(std::string_view(header_bytes, kHeaderSize));
    if (!header.ok()) {
      Log("connection " + std::to_string(c->id) + " from " + c->peer + ": " +
          header.status().message() + "; closing");
      int32_t request_id = 0;
      std::memcpy(&request_id, header_bytes + 4, 4);
      WriteFull(c->fd,
                BuildMsgReply(0, request_id, Commands::ErrorReply(9, header.status().message())));
      break;
    }
    message.assign(header_bytes, kHeaderSize);
    message.resize(static_cast<size_t>(header->message_length));
    size_t body = message.size() - kHeaderSize;
    if (ReadFull(c->fd, &message[kHeaderSize], body) < body) {
      Log("connection " + std::to_string(c->id) + " from " + c->peer +
          ": message cut short; closing");
      break;
    }
    auto request = ParseMessage(message);
    if (!request.ok()) {
      bool framed = header->op_code == kOpMsg || header->op_code == kOpQuery;
      // A client that set moreToCome reads no reply: one would answer its
      // next request. Closing is the only error it can see.
      uint32_t flags = 0;
      if (header->op_code == kOpMsg && message.size() >= kHeaderSize + 4) {
        std::memcpy(&flags, &message[kHeaderSize], 4);  // little-endian, as the host
      }
      if ((flags & kFlagMoreToCome) != 0) {
        Log("connection " + std::to_string(c->id) + " from " + c->peer + ": " +
            request.status().message() + " (moreToCome); closing");
        break;
      }
      Log("connection " + std::to_string(c->id) + " from " + c->peer + ": " +
          request.status().message() + (framed ? "" : "; closing"));
      std::string reply = Commands::ErrorReply(
          request.status().message().find("BSON") != std::string::npos ? 22 : 9,
          request.status().message());
      WriteFull(c->fd, header->op_code == kOpQuery ? BuildQueryReply(0, header->request_id, reply)
                                                   : BuildMsgReply(0, header->request_id, reply));
      // An opcode we do not speak: its client expects replies we cannot give.
      if (!framed) break;
      continue;
    }
    std::string reply = commands_->Run(*request, c->id);
    if (request->more_to_come) continue;  // w:0: the client waits for nothing
    std::string out = request->legacy_query ? BuildQueryReply(0, request->header.request_id, reply)
                                            : BuildMsgReply(0, request->header.request_id, reply);
    if (!WriteFull(c->fd, out)) break;
  }
  // The client sees the end now; the fd is closed once the thread is joined,
  // so Run's shutdown() never hits a reused descriptor.
  shutdown(c->fd, SHUT_RDWR);
  commands_->ConnectionClosed(c->id);
  c->done.store(true);
}

}  // namespace mmdoc::server
