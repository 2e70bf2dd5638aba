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
  // No allocation: 15 characters fit the small-string buffer, and logs and
  // persisted node sets format addresses on hot paths.
  char text[16];
  char* p = text;
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (shift != 24) *p++ = '.';
    p = std::to_chars(p, text + sizeof text, (value_ >> shift) & 0xff).ptr;
  }
  return std::string(text, p);
}

}  // namespace mesh::core
