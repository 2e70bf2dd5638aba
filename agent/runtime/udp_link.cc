#include "agent/runtime/udp_link.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <utility>

#include "core/log.h"

namespace mesh::agent {
namespace {

core::Ipv4Address from_sockaddr(const sockaddr* address) {
  sockaddr_in in{};
  std::memcpy(&in, address, sizeof in);
  return core::Ipv4Address(ntohl(in.sin_addr.s_addr));
}

constexpr core::Ipv4Address kLimitedBroadcast(0xffffffffU);

}  // namespace

core::Expected<InterfaceAddress, std::string> UdpInterfaceLink::lookup_interface(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return core::Unexpected(fmt::format("cannot list network interfaces: {}", std::strerror(errno)));
  }
  bool exists = false;
  std::optional<InterfaceAddress> found;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_name == nullptr || name != entry->ifa_name) continue;
    exists = true;
    if (found || entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    InterfaceAddress result{name, from_sockaddr(entry->ifa_addr), kLimitedBroadcast};
    if ((entry->ifa_flags & IFF_BROADCAST) != 0 && entry->ifa_broadaddr != nullptr &&
        entry->ifa_broadaddr->sa_family == AF_INET) {
      result.broadcast = from_sockaddr(entry->ifa_broadaddr);
    } else if (entry->ifa_netmask != nullptr && entry->ifa_netmask->sa_family == AF_INET) {
      const uint32_t mask = from_sockaddr(entry->ifa_netmask).value();
      const core::Ipv4Address directed(result.address.value() | ~mask);
      // A /32 or /31 has no directed broadcast; fall back to 255.255.255.255.
      if (directed != result.address) result.broadcast = directed;
    }
    found = result;
  }
  freeifaddrs(list);
  if (!exists) {
    return core::Unexpected(fmt::format(
        "interface {} does not exist; list the interfaces with `ip link` and fix link.interfaces in the config",
        name));
  }
  if (!found) {
    return core::Unexpected(fmt::format(
        "interface {} has no IPv4 address; assign one (`ip -4 addr show {}` shows none; e.g. `ip addr add "
        "10.0.0.1/24 dev {}`) or bring the interface up and configured before starting meshagent",
        name, name, name));
  }
  return *found;
}

core::Expected<core::Ipv4Address, std::string> UdpInterfaceLink::interface_address(const std::string& name) {
  auto found = lookup_interface(name);
  if (!found) return core::Unexpected(found.error());
  return found->address;
}

UdpInterfaceLink::UdpInterfaceLink(asio::io_context& io, const std::vector<std::string>& interfaces, uint16_t port)
    : port_(port) {
  if (interfaces.empty()) {
    throw std::runtime_error("no interface configured for the interface link; list at least one in link.interfaces");
  }
  for (const std::string& name : interfaces) {
    auto found = lookup_interface(name);
    if (!found) throw std::runtime_error(found.error());
    interfaces_.push_back(std::move(found.value()));
  }
  socket_ = std::make_unique<UdpSocket>(
      io, core::Ipv4Address(), port, /*broadcast=*/true,
      [this](core::Ipv4Address from, uint16_t, core::ByteSpan datagram) { receive(from, datagram); });
  port_ = socket_->local_port();
  for (const InterfaceAddress& entry : interfaces_) {
    core::log("agent").info("udp link interface={} address={} broadcast={} port={}", entry.name,
                            entry.address.to_string(), entry.broadcast.to_string(), port_);
  }
}

void UdpInterfaceLink::broadcast(core::ByteSpan datagram) {
  for (const InterfaceAddress& entry : interfaces_) socket_->send_to(entry.broadcast, port_, datagram);
}

void UdpInterfaceLink::send(core::Ipv4Address neighbour, core::ByteSpan datagram) {
  socket_->send_to(neighbour, port_, datagram);
}

bool UdpInterfaceLink::send_routed(core::Ipv4Address destination, core::ByteSpan datagram) {
  socket_->send_to(destination, port_, datagram);
  return true;
}

bool UdpInterfaceLink::is_own_address(core::Ipv4Address address) const {
  for (const InterfaceAddress& entry : interfaces_) {
    if (entry.address == address) return true;
  }
  return false;
}

void UdpInterfaceLink::receive(core::Ipv4Address from, core::ByteSpan datagram) {
  if (is_own_address(from)) {
    ++own_ignored_;
    return;
  }
  if (receiver_) receiver_(from, datagram);
}

}  // namespace mesh::agent
