#pragma once

#include <functional>
#include <memory>

#include "agent/node.h"
#include "proto/admin.pb.h"

namespace mesh::agent {

// The routine commands of the admin protocol (meshctl routine ...), for
// AdminService. Changing a routine's definition is a catalog change, made
// exactly as AdminDevices makes device changes: checked against this node's
// catalog, then decided and replicated by the catalog group. Reads and runs
// go to the routines' groups through RoutineService.
class AdminRoutines {
 public:
  using Reply = std::function<void(proto::AdminResponse response)>;

  explicit AdminRoutines(Node& node) : node_(node) {}
  AdminRoutines(const AdminRoutines&) = delete;
  AdminRoutines& operator=(const AdminRoutines&) = delete;
  ~AdminRoutines() { *alive_ = false; }

  void add(const proto::RoutineAddRequest& request, Reply reply);
  void remove(const proto::RoutineRemoveRequest& request, Reply reply);
  void set_enabled(const proto::RoutineEnableRequest& request, Reply reply);
  void list(const proto::RoutinesRequest& request, Reply reply);
  void run(const proto::RoutineRunRequest& request, Reply reply);

 private:
  Node& node_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace mesh::agent
