#pragma once

#include <functional>
#include <memory>

#include "agent/node.h"
#include "proto/admin.pb.h"

namespace mesh::agent {

// The catalog changes of the admin protocol (meshctl device add/remove,
// routine add/remove/enable/disable, precondition add/remove), for
// AdminService. A change is checked
// against this node's catalog first (a file's mistakes come back with file,
// line and key), then decided and replicated by the catalog group; the reply
// holds each change's verdict: the catalog version it got, or why it was
// refused or never decided (no answer within the request's timeout).
class AdminCatalog {
 public:
  using Reply = std::function<void(proto::AdminResponse response)>;
  // Which tables of a catalog file an add takes, and which entry a remove
  // names.
  enum class Kind { device, routine, precondition };

  explicit AdminCatalog(Node& node) : node_(node) {}
  AdminCatalog(const AdminCatalog&) = delete;
  AdminCatalog& operator=(const AdminCatalog&) = delete;
  ~AdminCatalog() { *alive_ = false; }

  void add(Kind kind, const proto::CatalogAddRequest& request, Reply reply);
  void remove(Kind kind, const proto::CatalogRemoveRequest& request, Reply reply);
  void set_routine_enabled(const proto::RoutineEnableRequest& request, Reply reply);

 private:
  // Submits one change about `id`; `verdict_in` says where its verdict goes
  // in the reply.
  void submit_one(const std::string& id, proto::CatalogChange change, uint32_t timeout_ms,
                  std::function<proto::CatalogVerdict*(proto::AdminResponse&)> verdict_in, Reply reply);

  Node& node_;
  // Replies to changes still undecided are dropped once this is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace mesh::agent
