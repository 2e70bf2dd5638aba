#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/node.h"
#include "proto/admin.pb.h"
#include "routine/routine_model.h"

namespace mesh::agent {

// The device commands of the admin protocol (meshctl devices, device ...),
// for AdminService: listing devices through their groups' leaders, running
// commands, and watches that belong to one admin connection (long polls:
// DeviceWatchRequest). Adding and removing devices is a catalog change
// (AdminCatalog).
class AdminDevices {
 public:
  using Reply = std::function<void(proto::AdminResponse response)>;
  using ConnectionId = uint64_t;

  explicit AdminDevices(Node& node);
  AdminDevices(const AdminDevices&) = delete;
  AdminDevices& operator=(const AdminDevices&) = delete;
  ~AdminDevices();

  void devices(const proto::DevicesRequest& request, Reply reply);
  void set(const proto::DeviceSetRequest& request, Reply reply);
  void watch(const proto::DeviceWatchRequest& request, Reply reply, ConnectionId connection);
  // Ends the connection's watch.
  void connection_closed(ConnectionId connection);

  // Changes a watch keeps for its meshctl between two polls.
  static constexpr size_t kMaxBufferedChanges = 1024;

 private:
  struct Watch;
  void answer_watch(ConnectionId connection);
  proto::DeviceRow row_of(const routine::DeviceSpec& spec) const;
  // Runs the command as an ad hoc combo (routine/adhoc_combo.h) and answers
  // with its end: committed, or aborted with what failed and was undone.
  void run_combo(const proto::DeviceSetRequest& request, routine::RoutineSpec combo, Reply reply);

  Node& node_;
  std::map<ConnectionId, std::unique_ptr<Watch>> watches_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace mesh::agent
