#include "routine/device_codec.h"

#include <cmath>

#include <fmt/format.h>

namespace mesh::routine {

proto::DeviceSpecMsg to_proto(const DeviceSpec& spec) {
  proto::DeviceSpecMsg msg;
  msg.set_id(spec.id);
  msg.set_kind(std::string(to_string(spec.kind)));
  for (double coordinate : spec.location) msg.add_location(coordinate);
  msg.set_room(spec.room);
  msg.set_floor(spec.floor);
  msg.set_driver(spec.driver);
  return msg;
}

core::Expected<DeviceSpec, std::string> from_proto(const proto::DeviceSpecMsg& msg) {
  if (auto problem = check_device_id(msg.id())) return core::Unexpected(*problem);
  DeviceSpec spec;
  spec.id = msg.id();
  const auto kind = parse_kind(msg.kind());
  if (!kind) return core::Unexpected(fmt::format("device {}: unknown kind '{}'", msg.id(), msg.kind()));
  spec.kind = *kind;
  if (msg.location_size() != 3) {
    return core::Unexpected(fmt::format("device {}: a location has 3 coordinates, not {}", msg.id(),
                                        msg.location_size()));
  }
  for (int i = 0; i < 3; ++i) {
    if (!std::isfinite(msg.location(i))) {
      return core::Unexpected(fmt::format("device {}: location coordinates must be finite numbers", msg.id()));
    }
    spec.location[static_cast<size_t>(i)] = msg.location(i);
  }
  spec.room = msg.room();
  spec.floor = msg.floor();
  spec.driver = msg.driver();
  if (spec.driver.empty()) return core::Unexpected(fmt::format("device {}: no driver URI", msg.id()));
  return spec;
}

proto::AttributeValue to_proto(const Value& value) {
  proto::AttributeValue msg;
  if (const auto* flag = std::get_if<bool>(&value)) {
    msg.set_flag(*flag);
  } else if (const auto* number = std::get_if<double>(&value)) {
    msg.set_number(*number);
  } else {
    msg.set_text(std::get<std::string>(value));
  }
  return msg;
}

std::optional<Value> from_proto(const proto::AttributeValue& msg) {
  switch (msg.value_case()) {
    case proto::AttributeValue::kFlag:
      return Value{msg.flag()};
    case proto::AttributeValue::kNumber:
      return Value{msg.number()};
    case proto::AttributeValue::kText:
      return Value{msg.text()};
    case proto::AttributeValue::VALUE_NOT_SET:
      break;
  }
  return std::nullopt;
}

void to_proto(const Attributes& attributes, google::protobuf::RepeatedPtrField<proto::AttributeMsg>& out) {
  for (const auto& [name, value] : attributes) {
    proto::AttributeMsg& msg = *out.Add();
    msg.set_name(name);
    *msg.mutable_value() = to_proto(value);
  }
}

Attributes from_proto(const google::protobuf::RepeatedPtrField<proto::AttributeMsg>& msgs) {
  Attributes out;
  for (const auto& msg : msgs) {
    if (auto value = from_proto(msg.value())) out[msg.name()] = std::move(*value);
  }
  return out;
}

}  // namespace mesh::routine
