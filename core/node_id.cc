#include "core/node_id.h"

#include <charconv>

namespace mesh::core {

std::optional<Ipv4Address> Ipv4Address::parse(std::string_view text) {
  uint32_t value = 0;
  const char* p = text.data();
  const char* end = text.data() + text.size();
  for (int octet = 0; octet < 4; ++octet) {
    if (octet > 0) {
      if (p == end || *p != '.') return std::nullopt;
      ++p;
    }
    // Leading zeros are refused: "010" is octal to inet_aton and decimal to
    // others, so we accept neither reading.
    if (p == end || *p < '0' || *p > '9' || (*p == '0' && p + 1 != end && p[1] >= '0' && p[1] <= '9')) {
      return std::nullopt;
    }
    unsigned part = 0;
    auto [next, ec] = std::from_chars(p, end, part);
    if (ec != std::errc() || part > 255) return std::nullopt;
    value = (value << 8) | part;
    p = next;
  }
  if (p != end) return std::nullopt;
  return Ipv4Address(value);
}

std::string Ipv4Address::to_string() const {
  return std::to_string(value_ >> 24) + '.' + std::to_string((value_ >> 16) & 0xff) + '.' +
         std::to_string((value_ >> 8) & 0xff) + '.' + std::to_string(value_ & 0xff);
}

}  // namespace mesh::core
