#pragma once

#include <functional>

#include "agent/node.h"
#include "proto/admin.pb.h"

namespace mesh::agent {

// What meshctl can ask the agent, independent of how the request arrived
// (agent/admin_server.h carries it over the Unix socket). Runs on the Node's
// thread. `reply` is called exactly once, synchronously for most commands
// and later for ping, which waits for the echo.
class AdminService {
 public:
  using Reply = std::function<void(proto::AdminResponse response)>;

  explicit AdminService(Node& node);

  void handle(const proto::AdminRequest& request, Reply reply);

 private:
  proto::AdminResponse status() const;
  proto::AdminResponse metrics() const;
  proto::AdminResponse log_level(const proto::LogLevelRequest& request) const;
  void ping(const proto::PingRequest& request, Reply reply);
  proto::AdminResponse neighbors() const;
  proto::AdminResponse routes() const;
  proto::AdminResponse topology() const;

  Node& node_;
};

}  // namespace mesh::agent
