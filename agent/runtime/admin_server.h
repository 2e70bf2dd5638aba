#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace asio {
class io_context;
}  // namespace asio

namespace mesh::core {
class Metrics;
}  // namespace mesh::core

namespace mesh::agent {

class AdminService;
class AdminConnection;

// The agent end of meshctl: a Unix stream socket speaking length-prefixed
// AdminRequest/AdminResponse frames (proto/frame.h). Each connection may
// send several requests; responses go back in request order even when a
// later command (status) is ready before an earlier one (ping). Everything
// runs on the io_context's thread, the same one as the Node.
//
// What a client can make the agent hold is bounded: 32 requests in flight
// per connection, one partial frame of at most proto::kMaxFrameSize, and
// kMaxConnections connections; one more is sent an error and closed. Refused connections and
// dropped frames are counted in `metrics` (admin_connections_refused_total,
// admin_frames_dropped_total{reason=oversized|malformed}).
class AdminServer {
 public:
  // Connections served at once; more are answered with an error and closed.
  // Each may hold one partial frame of up to proto::kMaxFrameSize, so this is
  // what bounds the memory a crowd of clients (or one client opening
  // connections in a loop) can make the agent hold: about 64 MiB. It leaves
  // room for far more meshctl runs at once than a node sees (each `meshctl
  // lock` keeps one open while its command runs).
  static constexpr size_t kMaxConnections = 64;

  AdminServer(asio::io_context& io, std::string socket_path, AdminService& service, core::Metrics& metrics);
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;
  ~AdminServer();

  // Creates the parent directory if missing (mode 0750), replaces a stale
  // socket file left by a crashed agent, binds, and restricts the socket to
  // owner and group (0660). Throws std::runtime_error with a message naming
  // the path and what to do if another agent already serves it or the
  // socket cannot be created.
  void start();
  // Closes the listener and every connection and removes the socket file.
  // Harmless when not started or already stopped.
  void stop();

  const std::string& socket_path() const { return socket_path_; }

 private:
  friend class AdminConnection;
  struct State;
  std::string socket_path_;
  std::shared_ptr<State> state_;
};

}  // namespace mesh::agent
