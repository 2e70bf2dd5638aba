#include "agent/runtime/kernel_routes.h"

#include <linux/capability.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/log.h"

namespace mesh::agent {
namespace {

spdlog::logger& logger() { return core::log("routing"); }

using Key = std::pair<core::Ipv4Address, uint8_t>;
Key key_of(const KernelRoute& route) { return {route.destination, route.prefix_length}; }

uint32_t prefix_mask(uint8_t length) { return length == 0 ? 0 : ~uint32_t{0} << (32 - length); }

// The interface's name for logs, its number when it has none (any longer).
std::string device_name(int ifindex) {
  if (ifindex == 0) return "auto";
  char name[IF_NAMESIZE] = {};
  if (::if_indextoname(static_cast<unsigned>(ifindex), name) == nullptr) return fmt::format("#{}", ifindex);
  return name;
}

std::string fields(const KernelRoute& route, std::string_view prefix = {}) {
  return fmt::format("{0}dst={1}/{2} {0}via={3} {0}dev={4} {0}metric={5}", prefix, route.destination.to_string(),
                     route.prefix_length, route.on_link() ? "on-link" : route.gateway.to_string(),
                     device_name(route.ifindex), route.metric);
}

// Whether `installed` (as the kernel lists it) is what `wanted` asks for.
bool satisfies(const KernelRoute& installed, const KernelRoute& wanted) {
  return installed.gateway == wanted.gateway && installed.metric == wanted.metric &&
         (wanted.ifindex == 0 || installed.ifindex == wanted.ifindex);
}

// Effective capabilities of this thread: the kernel refuses route changes
// without CAP_NET_ADMIN, and saying so at start-up beats one error per route.
bool has_net_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  // If the capabilities cannot be read, the kernel's answers will tell.
  if (::syscall(SYS_capget, &header, data) != 0) return true;
  return (data[CAP_TO_INDEX(CAP_NET_ADMIN)].effective & CAP_TO_MASK(CAP_NET_ADMIN)) != 0;
}

}  // namespace

std::string KernelRoute::to_string() const {
  std::string text = fmt::format("{}/{}", destination.to_string(), prefix_length);
  if (!on_link()) text += " via " + gateway.to_string();
  if (ifindex != 0) text += fmt::format(" dev {}", ifindex);
  text += fmt::format(" metric {}", metric);
  return text;
}

std::optional<std::string> validate(const KernelRoute& route) {
  if (route.prefix_length > 32) return fmt::format("prefix length {} exceeds 32", route.prefix_length);
  if ((route.destination.value() & ~prefix_mask(route.prefix_length)) != 0) {
    return fmt::format("{} has bits set beyond its /{} prefix", route.destination.to_string(), route.prefix_length);
  }
  if (route.ifindex < 0) return fmt::format("interface index {} is negative", route.ifindex);
  if (route.on_link() && route.ifindex == 0) return std::string("an on-link route needs an interface index");
  return std::nullopt;
}

std::string_view to_string(RouteChange::Kind kind) {
  switch (kind) {
    case RouteChange::Kind::add:
      return "add";
    case RouteChange::Kind::replace:
      return "replace";
    case RouteChange::Kind::remove:
      return "remove";
  }
  return "?";
}

std::string_view to_string(RouteError::Operation operation) {
  switch (operation) {
    case RouteError::Operation::list:
      return "list";
    case RouteError::Operation::add:
      return "add";
    case RouteError::Operation::replace:
      return "replace";
    case RouteError::Operation::remove:
      return "remove";
  }
  return "?";
}

SyncPlan plan_sync(const std::vector<KernelRoute>& current, const std::vector<KernelRoute>& wanted) {
  SyncPlan plan;
  // Current routes by destination; a destination may carry several of ours
  // (different metrics), e.g. after a crash between an add and a remove.
  std::map<Key, std::vector<size_t>> by_key;
  for (size_t i = 0; i < current.size(); ++i) by_key[key_of(current[i])].push_back(i);
  std::vector<bool> claimed(current.size(), false);

  std::vector<const KernelRoute*> usable;
  std::map<Key, bool> seen;
  for (const KernelRoute& route : wanted) {
    if (auto problem = validate(route)) {
      plan.errors.push_back({RouteError::Operation::add, route, 0, *problem});
      continue;
    }
    if (!seen.emplace(key_of(route), true).second) {
      plan.errors.push_back({RouteError::Operation::add, route, 0,
                             "another wanted route has the same destination; the first one is used"});
      continue;
    }
    usable.push_back(&route);
  }
  std::stable_partition(usable.begin(), usable.end(), [](const KernelRoute* route) { return route->on_link(); });

  for (const KernelRoute* route : usable) {
    std::vector<size_t>& candidates = by_key[key_of(*route)];
    auto pick = [&](auto predicate) -> std::optional<size_t> {
      for (size_t i : candidates) {
        if (!claimed[i] && predicate(current[i])) return i;
      }
      return std::nullopt;
    };
    if (auto same = pick([&](const KernelRoute& c) { return satisfies(c, *route); })) {
      claimed[*same] = true;
      ++plan.unchanged;
      continue;
    }
    auto old = pick([&](const KernelRoute& c) { return c.metric == route->metric; });
    if (!old) old = pick([](const KernelRoute&) { return true; });
    if (old) {
      claimed[*old] = true;
      plan.changes.push_back({RouteChange::Kind::replace, *route, current[*old]});
    } else {
      plan.changes.push_back({RouteChange::Kind::add, *route, std::nullopt});
    }
  }

  std::vector<size_t> stale;
  for (size_t i = 0; i < current.size(); ++i) {
    if (!claimed[i]) stale.push_back(i);
  }
  std::stable_partition(stale.begin(), stale.end(), [&](size_t i) { return !current[i].on_link(); });
  for (size_t i : stale) plan.changes.push_back({RouteChange::Kind::remove, current[i], std::nullopt});
  return plan;
}

core::Expected<std::unique_ptr<KernelRoutes>, std::string> KernelRoutes::open(Options options) {
  if (options.protocol <= RTPROT_STATIC) {
    return core::Unexpected(
        fmt::format("kernel route protocol {} belongs to the kernel, boot scripts or the administrator (0 to 4); "
                    "choose an unused number from 5 to 255, default {}",
                    options.protocol, kDefaultProtocol));
  }
  if (options.table == RT_TABLE_UNSPEC || options.table == RT_TABLE_LOCAL) {
    return core::Unexpected(
        fmt::format("kernel route table {} is not usable (0 is no table, 255 holds local addresses); use 254 (main) or "
                    "another table",
                    options.table));
  }
  if (!has_net_admin()) {
    return core::Unexpected(
        std::string("installing kernel routes needs CAP_NET_ADMIN; run meshagent as root or with "
                    "AmbientCapabilities=CAP_NET_ADMIN, or set routing.install_kernel_routes = false"));
  }
  auto socket = netlink::NetlinkSocket::open(options.socket);
  if (!socket) return core::Unexpected(socket.error());
  std::unique_ptr<KernelRoutes> routes(new KernelRoutes(options, std::move(*socket)));

  auto leftovers = routes->installed();
  if (!leftovers) {
    return core::Unexpected(fmt::format("cannot list the kernel's routes: {}", leftovers.error().to_string()));
  }
  if (!leftovers->empty()) {
    logger().info("removing kernel routes left by an earlier run count={} protocol={} table={}", leftovers->size(),
                  options.protocol, options.table);
  }
  SyncResult flushed = routes->withdraw_all();
  if (!flushed.ok()) {
    std::string text = "cannot remove kernel routes left by an earlier run:";
    for (const RouteError& error : flushed.errors) {
      text += fmt::format(" [{}: {}]", error.route.to_string(), error.message);
    }
    return core::Unexpected(text);
  }
  logger().info("kernel routes enabled protocol={} table={} leftovers_removed={}", options.protocol, options.table,
                flushed.removed);
  return routes;
}

KernelRoutes::KernelRoutes(Options options, std::unique_ptr<netlink::NetlinkSocket> socket)
    : options_(options), socket_(std::move(socket)) {}

KernelRoutes::~KernelRoutes() {
  // A destructor must not throw, and withdrawing allocates and logs. If it
  // fails half-way, the next open() removes what is left.
  try {
    const SyncResult result = withdraw_all();
    logger().info("kernel routes withdrawn removed={} errors={}", result.removed, result.errors.size());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kernel routes not withdrawn: %s\n", error.what());
  }
}

core::Expected<std::vector<KernelRoute>, netlink::Error> KernelRoutes::installed() const {
  netlink::RouteMessage filter;
  filter.family = AF_INET;
  auto messages = socket_->dump(netlink::encode_route(RTM_GETROUTE, 0, filter));
  if (!messages) return core::Unexpected(messages.error());
  std::vector<KernelRoute> routes;
  for (const netlink::OwnedMessage& message : *messages) {
    if (message.type != RTM_NEWROUTE) continue;
    auto decoded = netlink::decode_route(message.payload);
    if (!decoded) {
      return core::Unexpected(netlink::Error{0, "malformed route in the kernel's dump: " + decoded.error()});
    }
    if (decoded->family != AF_INET || decoded->protocol != options_.protocol || decoded->table != options_.table) {
      continue;
    }
    KernelRoute route;
    route.destination = decoded->destination.value_or(core::Ipv4Address());
    route.prefix_length = decoded->dst_len;
    route.gateway = decoded->gateway.value_or(core::Ipv4Address());
    route.ifindex = static_cast<int>(decoded->oif);
    route.metric = decoded->priority;
    routes.push_back(route);
  }
  return routes;
}

core::Expected<netlink::Ok, netlink::Error> KernelRoutes::add(const KernelRoute& route, bool replace) {
  netlink::RouteMessage message;
  message.family = AF_INET;
  message.dst_len = route.prefix_length;
  message.table = options_.table;
  message.protocol = options_.protocol;
  message.scope = route.on_link() ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
  message.type = RTN_UNICAST;
  if (route.prefix_length > 0) message.destination = route.destination;
  if (!route.on_link()) message.gateway = route.gateway;
  message.oif = static_cast<uint32_t>(route.ifindex);
  message.priority = route.metric;
  // EXCL on a plain add: a route to the same destination and metric that
  // is not ours (the administrator's) is reported, never overwritten.
  const uint16_t flags = NLM_F_CREATE | (replace ? NLM_F_REPLACE : NLM_F_EXCL);
  return socket_->request(netlink::encode_route(RTM_NEWROUTE, flags, message));
}

core::Expected<netlink::Ok, netlink::Error> KernelRoutes::remove(const KernelRoute& route) {
  // The kernel deletes only a route that matches every field given here,
  // the protocol included, so another protocol's route is never hit.
  netlink::RouteMessage message;
  message.family = AF_INET;
  message.dst_len = route.prefix_length;
  message.table = options_.table;
  message.protocol = options_.protocol;
  message.scope = RT_SCOPE_NOWHERE;
  if (route.prefix_length > 0) message.destination = route.destination;
  if (!route.on_link()) message.gateway = route.gateway;
  message.oif = static_cast<uint32_t>(route.ifindex);
  message.priority = route.metric;
  return socket_->request(netlink::encode_route(RTM_DELROUTE, 0, message));
}

SyncResult KernelRoutes::sync(const std::vector<KernelRoute>& wanted) {
  SyncResult result;
  auto current = installed();
  if (!current) {
    result.errors.push_back({RouteError::Operation::list, {}, current.error().code, current.error().to_string()});
    logger().warn("kernel routes not synced: cannot list them error=\"{}\"", current.error().to_string());
    return result;
  }
  SyncPlan plan = plan_sync(*current, wanted);
  result.unchanged = plan.unchanged;
  for (RouteError& error : plan.errors) {
    logger().warn("kernel route refused op={} {} error=\"{}\"", to_string(error.operation), fields(error.route),
                  error.message);
    result.errors.push_back(std::move(error));
  }

  auto report = [&](RouteError::Operation operation, const KernelRoute& route, const netlink::Error& error) {
    logger().warn("kernel route failed op={} {} error=\"{}\"", to_string(operation), fields(route), error.to_string());
    result.errors.push_back({operation, route, error.code, error.to_string()});
  };
  // Withdraws a route that could not be updated, so it does not keep
  // sending traffic to a next hop the routing table no longer has.
  auto withdraw_old = [&](const KernelRoute& old) {
    if (auto removed = remove(old); !removed) {
      report(RouteError::Operation::remove, old, removed.error());
    } else {
      ++result.removed;
      logger().info("kernel route removed {} reason=update-failed", fields(old));
    }
  };

  for (const RouteChange& change : plan.changes) {
    switch (change.kind) {
      case RouteChange::Kind::add: {
        if (auto added = add(change.route, false); !added) {
          report(RouteError::Operation::add, change.route, added.error());
        } else {
          ++result.added;
          logger().info("kernel route added {}", fields(change.route));
        }
        break;
      }
      case RouteChange::Kind::replace: {
        const KernelRoute& old = *change.old;
        // The metric is part of the kernel's key: a new metric is a second
        // route, added before the old one goes so traffic always has a route.
        const bool same_key = old.metric == change.route.metric;
        if (auto added = add(change.route, same_key); !added) {
          report(RouteError::Operation::replace, change.route, added.error());
          withdraw_old(old);
          break;
        }
        if (!same_key) {
          if (auto removed = remove(old); !removed) {
            report(RouteError::Operation::remove, old, removed.error());
          }
        }
        ++result.replaced;
        logger().info("kernel route replaced {} {}", fields(change.route), fields(old, "old_"));
        break;
      }
      case RouteChange::Kind::remove: {
        if (auto removed = remove(change.route); !removed) {
          // Gone already (the kernel drops routes of an interface that went
          // down): that is what removing wanted.
          if (removed.error().code == ESRCH) {
            ++result.removed;
            break;
          }
          report(RouteError::Operation::remove, change.route, removed.error());
        } else {
          ++result.removed;
          logger().info("kernel route removed {}", fields(change.route));
        }
        break;
      }
    }
  }
  if (!plan.changes.empty() || !result.errors.empty()) {
    logger().debug("kernel routes synced wanted={} added={} replaced={} removed={} unchanged={} errors={}",
                   wanted.size(), result.added, result.replaced, result.removed, result.unchanged,
                   result.errors.size());
  }
  return result;
}

}  // namespace mesh::agent
