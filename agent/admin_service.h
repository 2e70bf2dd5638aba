#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/admin_catalog.h"
#include "agent/admin_devices.h"
#include "agent/admin_preconditions.h"
#include "agent/admin_routines.h"
#include "agent/node.h"
#include "proto/admin.pb.h"

namespace mesh::agent {

// What meshctl can ask the agent, independent of how the request arrived
// (agent/runtime/admin_server.h carries it over the Unix socket). Runs on the Node's
// thread. `reply` is called exactly once, synchronously for most commands
// and later for ping, which waits for the echo, lock, which waits for the
// grant, kgroup_write, which waits for the commit, and kgroup --log
// --through-leader, which waits for the group's leader.
//
// A lock belongs to the connection that asked for it: UnlockRequest from
// that connection or connection_closed() releases it (or withdraws it while
// still waiting), so a meshctl that dies does not keep a resource forever.
class AdminService {
 public:
  using Reply = std::function<void(proto::AdminResponse response)>;
  // Names one admin connection; 0 is "not tracked" (its locks go only on
  // UnlockRequest).
  using ConnectionId = uint64_t;

  explicit AdminService(Node& node);
  AdminService(const AdminService&) = delete;
  AdminService& operator=(const AdminService&) = delete;
  // Withdraws and releases every lock still claimed.
  ~AdminService();

  void handle(const proto::AdminRequest& request, Reply reply, ConnectionId connection = 0);
  // The connection is gone: releases its locks, withdraws its waiting ones
  // (their replies are never sent).
  void connection_closed(ConnectionId connection);

 private:
  proto::AdminResponse status() const;
  proto::AdminResponse metrics() const;
  proto::AdminResponse log_level(const proto::LogLevelRequest& request) const;
  void ping(const proto::PingRequest& request, Reply reply);
  proto::AdminResponse neighbors() const;
  proto::AdminResponse routes() const;
  proto::AdminResponse topology() const;
  proto::AdminResponse members(const proto::MembersRequest& request) const;
  void lock(const proto::LockRequest& request, Reply reply, ConnectionId connection);
  proto::AdminResponse unlock(const proto::UnlockRequest& request, ConnectionId connection);
  proto::AdminResponse locks() const;
  proto::AdminResponse kgroups() const;
  proto::AdminResponse kgroup(const proto::KgroupRequest& request);
  void kgroup_write(const proto::KgroupWriteRequest& request, Reply reply);
  // kgroup TARGET --log --through-leader: the log as the group's leader
  // holds it, read page by page (agent/text_log_reader.h).
  void kgroup_through_leader(const proto::KgroupRequest& request, Reply reply);

  struct LockClaim {
    ConnectionId connection = 0;
    std::string resource;
    bool granted = false;
  };

  Node& node_;
  AdminDevices devices_;
  AdminRoutines routines_;
  AdminCatalog catalog_;
  AdminPreconditions preconditions_;
  std::map<mutex::AcquireHandle, LockClaim> claims_;
  // Replies to client writes still running go nowhere once this is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace mesh::agent
