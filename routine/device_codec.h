#pragma once

#include <optional>
#include <string>

#include "google/protobuf/repeated_field.h"
#include "proto/routine.pb.h"
#include "routine/device_model.h"

namespace mesh::routine {

// Conversions between the device model and its protobuf form. Decoding
// checks what the wire cannot: a spec's id, kind and location; an error
// says what is wrong.
proto::DeviceSpecMsg to_proto(const DeviceSpec& spec);
core::Expected<DeviceSpec, std::string> from_proto(const proto::DeviceSpecMsg& msg);

proto::AttributeValue to_proto(const Value& value);
std::optional<Value> from_proto(const proto::AttributeValue& msg);

void to_proto(const Attributes& attributes, google::protobuf::RepeatedPtrField<proto::AttributeMsg>& out);
// Attributes whose value is unset are skipped.
Attributes from_proto(const google::protobuf::RepeatedPtrField<proto::AttributeMsg>& msgs);

// Parses a serialized message of type M from untrusted bytes.
template <typename M>
std::optional<M> parse_message(std::string_view bytes) {
  M message;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return std::nullopt;
  }
  return message;
}

}  // namespace mesh::routine
