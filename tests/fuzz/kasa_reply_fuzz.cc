// Kasa replies: a TCP stream arriving in arbitrary pieces is reassembled
// into one length-prefixed frame, deciphered and parsed as a get_sysinfo and
// as an actuation reply for every device kind. Nothing a device sends may
// crash the agent; what the parser accepts has the model's attribute types.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "agent/drivers/kasa_codec.h"
#include "routine/device_model.h"

namespace {

using mesh::drivers::kasa::FrameReader;
using mesh::routine::AttributeType;

void check_types(mesh::routine::DeviceKind kind, const mesh::routine::Attributes& state) {
  for (const auto& [name, value] : state) {
    const auto* spec = mesh::routine::find_attribute(kind, name);
    if (spec == nullptr) std::abort();
    const bool is_bool = std::holds_alternative<bool>(value);
    if ((spec->type == AttributeType::number) == is_bool) std::abort();
  }
}

void parse_all(std::string_view payload) {
  for (auto kind : mesh::routine::all_kinds()) {
    for (const char* child : {"", "00"}) {
      const mesh::drivers::kasa::Target target{kind, child};
      if (auto state = mesh::drivers::kasa::parse_sysinfo_reply(target, payload)) check_types(kind, *state);
      for (const auto& spec : mesh::routine::schema(kind)) {
        mesh::routine::Attributes values;
        if (spec.type == AttributeType::number) {
          values[std::string(spec.name)] = spec.min;
        } else {
          values[std::string(spec.name)] = true;
        }
        if (auto state = mesh::drivers::kasa::parse_actuate_reply(target, values, payload)) check_types(kind, *state);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte chooses how the rest is cut into reads.
  const size_t piece = 1 + data[0] % 64;
  const std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);

  FrameReader reader;
  size_t at = 0;
  while (at < stream.size() && reader.status() == FrameReader::Status::need_more) {
    const size_t used = reader.feed(stream.substr(at, piece));
    if (used == 0) break;
    at += used;
  }
  if (reader.consumed() != at) std::abort();
  if (reader.status() == FrameReader::Status::complete) {
    const std::string payload = reader.take();
    if (mesh::drivers::kasa::encrypt(payload) != stream.substr(4, payload.size())) std::abort();
    parse_all(payload);
  }
  // The stream as plain JSON too, so the mutations explore the parser directly.
  parse_all(stream);
  return 0;
}
