#pragma once

#include <memory>
#include <string>

namespace asio {
class io_context;
}  // namespace asio

namespace mesh::agent {

class AdminService;
class AdminConnection;

// The agent end of meshctl: a Unix stream socket speaking length-prefixed
// AdminRequest/AdminResponse frames (proto/frame.h). Each connection may
// send several requests; responses go back in request order even when a
// later command (status) is ready before an earlier one (ping). Everything
// runs on the io_context's thread, the same one as the Node.
class AdminServer {
 public:
  AdminServer(asio::io_context& io, std::string socket_path, AdminService& service);
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;
  ~AdminServer();

  // Creates the parent directory if missing (mode 0755), replaces a stale
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
