#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mesh::core {

// An IPv4 address in host byte order. A node's identity (NodeId) is its main
// IPv4 address, as OLSR uses it; a Link also names one-hop peers by the
// address a datagram came from, which may be one of a node's other interfaces.
class Ipv4Address {
 public:
  constexpr Ipv4Address() = default;
  constexpr explicit Ipv4Address(uint32_t host_order) : value_(host_order) {}
  static constexpr Ipv4Address from_octets(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    return Ipv4Address((uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d);
  }

  // Parses dotted-quad text ("10.0.0.1"); nothing else is accepted.
  static std::optional<Ipv4Address> parse(std::string_view text);

  constexpr uint32_t value() const { return value_; }
  constexpr bool is_unspecified() const { return value_ == 0; }
  std::string to_string() const;

  friend constexpr auto operator<=>(Ipv4Address, Ipv4Address) = default;

 private:
  uint32_t value_ = 0;
};

using NodeId = Ipv4Address;

}  // namespace mesh::core

template <>
struct std::hash<mesh::core::Ipv4Address> {
  size_t operator()(mesh::core::Ipv4Address a) const noexcept { return std::hash<uint32_t>{}(a.value()); }
};
