#pragma once

// Device driver URIs: SCHEME://HOST[:PORT][/PATH][?KEY=VALUE&...]
//   kasa://192.168.1.20                 kasa://10.0.0.7:9999?child=8006...01
//   z2m://127.0.0.1:1883/zigbee2mqtt/hall_light
//   tasmota://broker.lan/sonoff_kitchen?tls=1&ca=/etc/ssl/ca.pem
// HOST is a name, an IPv4 address or an IPv6 address in brackets
// ([fe80::1]). Query values are percent-decoded; PATH is kept as written
// (without its leading '/'), and split into segments on request. No user
// info (user:password@): credentials go in query options that name files.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace mesh::drivers {

struct DriverUri {
  std::string scheme;  // lower-case
  std::string host;    // without brackets
  std::optional<uint16_t> port;
  std::string path;  // without the leading '/'
  std::map<std::string, std::string> query;

  uint16_t port_or(uint16_t fallback) const { return port.value_or(fallback); }
  // The path's non-empty segments: "zigbee2mqtt/hall_light" -> {zigbee2mqtt, hall_light}.
  std::vector<std::string> path_segments() const;
  // The query value of `key`, if present.
  std::optional<std::string> option(const std::string& key) const;
  // "host:port" ("[v6]:port"), for messages and connections.
  std::string authority(uint16_t default_port) const;
};

// An error says what is wrong with `text`, quoting it.
core::Expected<DriverUri, std::string> parse_driver_uri(std::string_view text);

// A query value as a decimal integer within [min, max]; nothing for anything else.
std::optional<int> parse_query_int(std::string_view text, int min, int max);

}  // namespace mesh::drivers
