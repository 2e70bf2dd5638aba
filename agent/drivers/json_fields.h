#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mesh::drivers {

// Reading device payloads (Kasa replies, zigbee2mqtt and Tasmota messages)
// without exceptions: a missing or wrongly typed field is nullptr/nullopt.

// Dumps without throwing: invalid UTF-8 in a string becomes U+FFFD.
std::string dump_json(const nlohmann::json& value);
// The member `key` of `object`, if `object` is an object that has it.
const nlohmann::json* json_member(const nlohmann::json* object, std::string_view key);
// A finite number.
std::optional<double> json_number(const nlohmann::json* value);

}  // namespace mesh::drivers
