#pragma once

#include <linux/rtnetlink.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/netlink_socket.h"
#include "core/expected.h"
#include "core/node_id.h"

namespace mesh::agent {

// One IPv4 route of ours in the kernel's table.
struct KernelRoute {
  core::Ipv4Address destination;  // network address: no bits set beyond prefix_length
  uint8_t prefix_length = 32;
  core::Ipv4Address gateway;  // unspecified: on-link, the destination is a neighbour on `ifindex`
  // The output interface. 0 is allowed with a gateway: the kernel then picks
  // the interface that reaches the gateway, and any interface matches.
  int ifindex = 0;
  uint32_t metric = 0;

  bool on_link() const { return gateway.is_unspecified(); }
  // "10.0.0.5/32 via 10.0.0.2 dev 3 metric 2"
  std::string to_string() const;
  friend bool operator==(const KernelRoute&, const KernelRoute&) = default;
};

// Why a route in `wanted` is not usable, or nothing when it is.
std::optional<std::string> validate(const KernelRoute& route);

// One change to the kernel's table, as sync() plans it.
struct RouteChange {
  enum class Kind { add, replace, remove };
  Kind kind = Kind::add;
  KernelRoute route;               // add and replace: the new route; remove: the route removed
  std::optional<KernelRoute> old;  // replace: the route it replaces
};
std::string_view to_string(RouteChange::Kind kind);

struct RouteError {
  enum class Operation { list, add, replace, remove };
  Operation operation = Operation::list;
  KernelRoute route;  // empty for `list`
  int code = 0;       // errno from the kernel; 0 for our own validation
  std::string message;
};
std::string_view to_string(RouteError::Operation operation);

struct SyncResult {
  size_t added = 0;
  size_t replaced = 0;
  size_t removed = 0;
  size_t unchanged = 0;
  std::vector<RouteError> errors;
  bool ok() const { return errors.empty(); }
};

// The changes that turn `current` (our routes as the kernel lists them) into
// `wanted`, in the order to apply them: on-link routes before the routes
// through a gateway (the kernel only accepts a gateway it can reach), then
// removals, gateway routes first. A destination is identified by address and
// prefix length; a change of gateway or interface at the same metric is one
// atomic replace, a change of metric is a replace the kernel sees as an add
// of the new route followed by the removal of the old one (the metric is part
// of the kernel's key). Invalid and duplicate wanted routes become errors and
// no change; their destinations' current routes are then removed as stale.
struct SyncPlan {
  std::vector<RouteChange> changes;
  size_t unchanged = 0;
  std::vector<RouteError> errors;
};
SyncPlan plan_sync(const std::vector<KernelRoute>& current, const std::vector<KernelRoute>& wanted);

// The agent's host routes in the kernel, over rtnetlink, marked with our own
// routing protocol number (rtm_protocol) so that every route of ours can be
// told apart from the administrator's, the kernel's and other daemons'. Only
// routes carrying that number in our table are ever changed or removed.
// Blocking calls on the agent's thread: the kernel answers at once.
class KernelRoutes {
 public:
  struct Options {
    // rtm_protocol of our routes. 158 is unassigned: not in iproute2's
    // /etc/iproute2/rt_protos nor in linux/rtnetlink.h, outside the
    // 186-198 block FRRouting uses, and unlike 100 (olsrd2), 80 (Calico)
    // or 99 (Open/R). Values up to 4 (RTPROT_STATIC) are refused: they
    // belong to the kernel, boot scripts and the administrator.
    uint8_t protocol = kDefaultProtocol;
    uint32_t table = RT_TABLE_MAIN;
    netlink::SocketOptions socket;
  };
  static constexpr uint8_t kDefaultProtocol = 158;

  // Needs CAP_NET_ADMIN. Opens the netlink socket and removes every route
  // of our protocol in our table, left by an earlier run that did not
  // withdraw them (a crash, kill -9, power cut). Fails, naming the cause,
  // if the options are unusable, the capability is missing, or a leftover
  // cannot be listed or removed.
  static core::Expected<std::unique_ptr<KernelRoutes>, std::string> open(Options options);
  KernelRoutes(const KernelRoutes&) = delete;
  KernelRoutes& operator=(const KernelRoutes&) = delete;
  // Withdraws every route of ours.
  ~KernelRoutes();

  // Makes the kernel's set of our routes equal `wanted` (see plan_sync):
  // adds the missing, replaces the changed, removes the stale. A route that
  // fails is reported in the result and does not stop the others; a route
  // that cannot be replaced is removed rather than left pointing at an old
  // next hop. The kernel's table is read first, so routes the kernel dropped
  // (an interface went down) are put back on the next sync.
  SyncResult sync(const std::vector<KernelRoute>& wanted);

  // Removes every route of ours.
  SyncResult withdraw_all() { return sync({}); }

  // Our routes as the kernel lists them (a dump filtered by protocol and table).
  core::Expected<std::vector<KernelRoute>, netlink::Error> installed() const;

  uint8_t protocol() const { return options_.protocol; }
  uint32_t table() const { return options_.table; }

 private:
  KernelRoutes(Options options, std::unique_ptr<netlink::NetlinkSocket> socket);
  core::Expected<netlink::Ok, netlink::Error> add(const KernelRoute& route, bool replace);
  core::Expected<netlink::Ok, netlink::Error> remove(const KernelRoute& route);

  Options options_;
  std::unique_ptr<netlink::NetlinkSocket> socket_;
};

}  // namespace mesh::agent
