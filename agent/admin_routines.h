#pragma once

#include <functional>
#include <memory>

#include "agent/node.h"
#include "proto/admin.pb.h"

namespace mesh::agent {

// The routine reads and runs of the admin protocol (meshctl routines,
// routine ID, routine run, routine history), for AdminService: each goes to
// the routine's group through RoutineService. Changing a routine's
// definition is a catalog change (AdminCatalog).
class AdminRoutines {
 public:
  using Reply = std::function<void(proto::AdminResponse response)>;

  explicit AdminRoutines(Node& node) : node_(node) {}
  AdminRoutines(const AdminRoutines&) = delete;
  AdminRoutines& operator=(const AdminRoutines&) = delete;
  ~AdminRoutines() { *alive_ = false; }

  void list(const proto::RoutinesRequest& request, Reply reply);
  void run(const proto::RoutineRunRequest& request, Reply reply);

 private:
  Node& node_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace mesh::agent
