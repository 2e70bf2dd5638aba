#include "agent/runtime/admin_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <array>
#include <deque>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include <asio.hpp>
#include <fmt/format.h>

#include "agent/admin_service.h"
#include "core/log.h"
#include "core/metrics.h"
#include "proto/admin.pb.h"
#include "proto/frame.h"

namespace mesh::agent {
namespace {

namespace fs = std::filesystem;
using Protocol = asio::local::stream_protocol;

// Bytes asked of the socket per read; a request is a few bytes, so this
// only bounds the copy, never a frame.
constexpr size_t kReadChunk = 4096;
// Requests of one connection being handled at once (pings wait for their
// echo). Beyond this the connection is not read until answers go out, so a
// client cannot queue unbounded work.
constexpr size_t kMaxInFlight = 32;

// Who may use the agent: its user and group (`adduser USER meshagent`),
// nobody else. The directory keeps others from even finding the socket, as
// the systemd unit's RuntimeDirectoryMode=0750 does.
constexpr fs::perms kAdminDirectoryMode = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec;  // 0750
constexpr fs::perms kSocketMode =
    fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::group_write;  // 0660
// bind() creates the socket file with 0777 & ~umask; under this umask it is
// born 0660 at most, so it is never connectable by others, not even in the
// instant before the chmod to kSocketMode.
constexpr mode_t kSocketUmask = 0117;

spdlog::logger& logger() { return core::log("agent"); }

std::string error_frame(std::string text) {
  proto::AdminResponse response;
  response.set_error(std::move(text));
  std::string frame;
  proto::append_frame(response.SerializeAsString(), frame);
  return frame;
}

}  // namespace

class AdminConnection;

struct AdminServer::State : std::enable_shared_from_this<AdminServer::State> {
  State(asio::io_context& io_context, std::string socket_path, AdminService& admin_service, core::Metrics& metrics)
      : io(io_context),
        path(std::move(socket_path)),
        service(&admin_service),
        acceptor(io_context),
        connections_refused(metrics.counter("admin_connections_refused_total")),
        frames_oversized(metrics.counter("admin_frames_dropped_total", {{"reason", "oversized"}})),
        frames_malformed(metrics.counter("admin_frames_dropped_total", {{"reason", "malformed"}})) {}

  void accept();
  void refuse(Protocol::socket socket);
  void forget(const std::shared_ptr<AdminConnection>& connection) { connections.erase(connection); }

  asio::io_context& io;
  std::string path;
  AdminService* service;  // null once stopped: nothing may reach it after stop()
  Protocol::acceptor acceptor;
  std::set<std::shared_ptr<AdminConnection>> connections;
  // Ties what a connection holds (a lock) to its lifetime; 0 is never used.
  AdminService::ConnectionId next_connection_id = 1;
  bool running = false;
  core::Counter& connections_refused;
  core::Counter& frames_oversized;
  core::Counter& frames_malformed;
};

// One meshctl connection. Requests are numbered as they arrive and their
// answers wait in `slots_` until every earlier answer has been written.
class AdminConnection : public std::enable_shared_from_this<AdminConnection> {
 public:
  AdminConnection(std::weak_ptr<AdminServer::State> server, Protocol::socket socket, AdminService::ConnectionId id)
      : server_(std::move(server)), socket_(std::move(socket)), id_(id) {}

  void start() { read(); }

  void close() {
    if (closed_) return;
    closed_ = true;
    asio::error_code ignored;
    socket_.shutdown(Protocol::socket::shutdown_both, ignored);
    socket_.close(ignored);
    slots_.clear();
    if (auto server = server_.lock()) {
      // A meshctl that died mid-lock must not leave the resource held.
      if (server->service != nullptr) server->service->connection_closed(id_);
      server->forget(shared_from_this());
    }
  }

 private:
  void read() {
    if (closed_ || reading_ || input_done_ || slots_.size() >= kMaxInFlight) return;
    reading_ = true;
    socket_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](asio::error_code ec, size_t n) {
      self->reading_ = false;
      if (self->closed_) return;
      if (ec) {
        // EOF: the client may have half-closed after its last request, so
        // answer what is pending before closing.
        if (ec != asio::error::eof) logger().debug("admin connection read error={}", ec.message());
        self->input_done_ = true;
      } else {
        // A length above the limit makes the stream unusable; dispatch()
        // sees it once the frames before it are taken.
        self->reader_.feed(std::span<const uint8_t>(self->buffer_.data(), n));
      }
      self->dispatch();
      self->read();
      self->finish_if_done();
    });
  }

  void dispatch() {
    while (!closed_ && slots_.size() < kMaxInFlight) {
      std::optional<std::string> frame = reader_.next();
      if (!frame) {
        stop_reading_if_oversized();
        return;
      }
      const uint64_t seq = next_seq_++;
      slots_.emplace_back();
      proto::AdminRequest request;
      if (!request.ParseFromString(*frame)) {
        if (auto server = server_.lock()) server->frames_malformed.add();
        complete(seq, error_frame("malformed request: not an AdminRequest; is meshctl from a different version?"));
        continue;
      }
      auto server = server_.lock();
      if (!server || server->service == nullptr) {
        close();
        return;
      }
      std::weak_ptr<AdminConnection> weak = shared_from_this();
      server->service->handle(request, [weak, seq](proto::AdminResponse response) {
        auto self = weak.lock();
        if (!self || self->closed_) return;
        std::string frame_out;
        if (!proto::append_frame(response.SerializeAsString(), frame_out)) {
          frame_out = error_frame("the answer exceeds the admin frame limit");
        }
        self->complete(seq, std::move(frame_out));
        self->read();
        self->finish_if_done();
      }, id_);
    }
  }

  // Answers what came before an oversized length, then closes: nothing
  // after it can be framed.
  void stop_reading_if_oversized() {
    if (input_done_ || reader_.error() != proto::FrameReader::Error::oversized) return;
    logger().warn("admin connection closed reason=oversized_frame limit={}", proto::kMaxFrameSize);
    if (auto server = server_.lock()) server->frames_oversized.add();
    input_done_ = true;
  }

  void complete(uint64_t seq, std::string frame) {
    if (closed_ || seq < first_seq_) return;
    const size_t index = seq - first_seq_;
    if (index >= slots_.size() || slots_[index]) return;
    slots_[index] = std::move(frame);
    while (!slots_.empty() && slots_.front()) {
      queued_ += *slots_.front();
      slots_.pop_front();
      ++first_seq_;
    }
    write();
  }

  void write() {
    if (closed_ || writing_ || queued_.empty()) return;
    writing_ = true;
    writing_buffer_ = std::move(queued_);
    queued_.clear();
    asio::async_write(socket_, asio::buffer(writing_buffer_), [self = shared_from_this()](asio::error_code ec, size_t) {
      self->writing_ = false;
      if (self->closed_) return;
      if (ec) {
        logger().debug("admin connection write error={}", ec.message());
        self->close();
        return;
      }
      self->write();
      self->dispatch();
      self->read();
      self->finish_if_done();
    });
  }

  void finish_if_done() {
    if (!closed_ && input_done_ && slots_.empty() && !writing_ && queued_.empty()) close();
  }

  std::weak_ptr<AdminServer::State> server_;
  Protocol::socket socket_;
  AdminService::ConnectionId id_;
  std::array<uint8_t, kReadChunk> buffer_{};
  proto::FrameReader reader_;
  std::deque<std::optional<std::string>> slots_;  // answers of requests first_seq_, first_seq_ + 1, ...
  uint64_t first_seq_ = 0;
  uint64_t next_seq_ = 0;
  std::string queued_;          // answers ready, in order, not yet handed to the socket
  std::string writing_buffer_;  // the bytes of the write in progress
  bool reading_ = false;
  bool writing_ = false;
  bool input_done_ = false;
  bool closed_ = false;
};

void AdminServer::State::accept() {
  acceptor.async_accept([self = shared_from_this()](asio::error_code ec, Protocol::socket socket) {
    if (!self->running) return;
    if (ec) {
      logger().warn("admin accept failed error={}", ec.message());
    } else if (self->connections.size() >= AdminServer::kMaxConnections) {
      self->refuse(std::move(socket));
    } else {
      auto connection = std::make_shared<AdminConnection>(self, std::move(socket), self->next_connection_id++);
      self->connections.insert(connection);
      connection->start();
    }
    self->accept();
  });
}

void AdminServer::State::refuse(Protocol::socket socket) {
  connections_refused.add();
  logger().warn("admin connection refused reason=too_many_connections limit={}", AdminServer::kMaxConnections);
  // A fresh socket's send buffer takes this small frame whole, so a
  // non-blocking send either delivers it or fails; either way we close.
  const std::string frame =
      error_frame(fmt::format("the agent already serves {} admin connections, its limit; try again when one closes",
                              AdminServer::kMaxConnections));
  asio::error_code ignored;
  socket.non_blocking(true, ignored);
  socket.send(asio::buffer(frame), 0, ignored);
  socket.shutdown(Protocol::socket::shutdown_both, ignored);
  socket.close(ignored);
}

AdminServer::AdminServer(asio::io_context& io, std::string socket_path, AdminService& service, core::Metrics& metrics)
    : socket_path_(socket_path), state_(std::make_shared<State>(io, std::move(socket_path), service, metrics)) {}

AdminServer::~AdminServer() { stop(); }

void AdminServer::start() {
  State& state = *state_;
  if (state.running) return;
  if (socket_path_.empty()) throw std::runtime_error("admin socket path is empty; set admin.socket");
  if (socket_path_.size() >= sizeof(sockaddr_un::sun_path)) {
    throw std::runtime_error(fmt::format("admin socket path {} is {} bytes, longer than the {} a Unix socket "
                                         "allows; set admin.socket to a shorter path",
                                         socket_path_, socket_path_.size(), sizeof(sockaddr_un::sun_path) - 1));
  }
  const fs::path path(socket_path_);
  std::error_code ec;

  const fs::path parent = path.parent_path();
  if (!parent.empty() && !fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (!ec) fs::permissions(parent, kAdminDirectoryMode, ec);
    if (ec) {
      throw std::runtime_error(
          fmt::format("cannot create directory {} for the admin socket: {}", parent.string(), ec.message()));
    }
  }

  const fs::file_status existing = fs::symlink_status(path, ec);
  if (fs::exists(existing)) {
    if (fs::is_directory(existing)) {
      throw std::runtime_error(
          fmt::format("admin socket path {} is a directory; set admin.socket to a file path", socket_path_));
    }
    if (fs::is_socket(existing)) {
      Protocol::socket probe(state.io);
      asio::error_code connect_error;
      probe.connect(Protocol::endpoint(socket_path_), connect_error);
      if (!connect_error) {
        std::string pid = "pid unknown";
        ucred credentials{};
        socklen_t length = sizeof(credentials);
        if (::getsockopt(probe.native_handle(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 &&
            credentials.pid > 0) {
          pid = fmt::format("pid {}", credentials.pid);
        }
        throw std::runtime_error(fmt::format(
            "another meshagent is already serving {} ({}); stop it or set admin.socket to another path",
            socket_path_, pid));
      }
      if (connect_error != asio::error::connection_refused) {
        throw std::runtime_error(fmt::format("cannot tell whether another meshagent serves {}: {}; remove the "
                                             "file if no agent runs, or set admin.socket to another path",
                                             socket_path_, connect_error.message()));
      }
    }
    logger().warn("removing stale admin socket path={} reason={}", socket_path_,
                  fs::is_socket(existing) ? "nobody listens" : "not a socket");
    fs::remove(path, ec);
    if (ec) {
      throw std::runtime_error(
          fmt::format("cannot remove stale admin socket {}: {}; remove it by hand", socket_path_, ec.message()));
    }
  }

  asio::error_code bind_error;
  state.acceptor.open(Protocol(), bind_error);
  if (!bind_error) {
    // The agent is one thread, and nothing else creates files meanwhile.
    const mode_t previous_umask = ::umask(kSocketUmask);
    state.acceptor.bind(Protocol::endpoint(socket_path_), bind_error);
    ::umask(previous_umask);
  }
  if (!bind_error) state.acceptor.listen(asio::socket_base::max_listen_connections, bind_error);
  if (bind_error) {
    asio::error_code ignored;
    state.acceptor.close(ignored);
    throw std::runtime_error(fmt::format("cannot listen on admin socket {}: {}", socket_path_, bind_error.message()));
  }
  fs::permissions(path, kSocketMode, ec);
  if (ec) {
    asio::error_code ignored;
    state.acceptor.close(ignored);
    fs::remove(path, ec);
    throw std::runtime_error(fmt::format("cannot set mode 0660 on admin socket {}: {}", socket_path_, ec.message()));
  }
  state.running = true;
  logger().info("admin socket listening path={}", socket_path_);
  state.accept();
}

void AdminServer::stop() {
  State& state = *state_;
  if (!state.running) return;
  state.running = false;
  state.service = nullptr;
  asio::error_code ignored;
  state.acceptor.close(ignored);
  // close() removes each connection from the set.
  const auto connections = state.connections;
  for (const auto& connection : connections) connection->close();
  state.connections.clear();
  std::error_code ec;
  fs::remove(fs::path(socket_path_), ec);
  if (ec) logger().warn("cannot remove admin socket path={} error={}", socket_path_, ec.message());
  logger().info("admin socket closed path={}", socket_path_);
}

}  // namespace mesh::agent
