#pragma once

#include <functional>
#include <memory>

#include "agent/node.h"
#include "proto/admin.pb.h"

namespace mesh::agent {

// The APEX precondition reads of the admin protocol, for AdminService:
// listing the catalog's rules (meshctl preconditions) and planning a
// command without running it (meshctl plan): the precondition graph of each
// condition the command makes true, built from the catalog's rules
// (routine/precondition_graph.h), and the combo deduced from it and the
// devices' current states, read through their groups' leaders as meshctl
// devices reads them (routine/command_deduction.h). Adding and removing
// rules is a catalog change (AdminCatalog).
class AdminPreconditions {
 public:
  using Reply = std::function<void(proto::AdminResponse response)>;

  explicit AdminPreconditions(Node& node) : node_(node) {}
  AdminPreconditions(const AdminPreconditions&) = delete;
  AdminPreconditions& operator=(const AdminPreconditions&) = delete;
  ~AdminPreconditions() { *alive_ = false; }

  proto::AdminResponse list() const;
  // An unknown device or routine, or a command the device does not take,
  // is an error of the request; a plan that cannot be made (rules that
  // conflict or form a cycle, no value to choose) is its command's error
  // in the reply.
  void plan(const proto::PlanRequest& request, Reply reply);

 private:
  Node& node_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace mesh::agent
