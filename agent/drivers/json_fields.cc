#include "agent/drivers/json_fields.h"

#include <cmath>

namespace mesh::drivers {

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const nlohmann::json* json_member(const nlohmann::json* object, std::string_view key) {
  if (object == nullptr || !object->is_object()) return nullptr;
  auto it = object->find(key);
  return it == object->end() ? nullptr : &*it;
}

std::optional<double> json_number(const nlohmann::json* value) {
  if (value == nullptr || !value->is_number()) return std::nullopt;
  const double out = value->get<double>();
  if (!std::isfinite(out)) return std::nullopt;
  return out;
}

}  // namespace mesh::drivers
