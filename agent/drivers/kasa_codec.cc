#include "agent/drivers/kasa_codec.h"

#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/drivers/json_fields.h"

namespace mesh::drivers::kasa {
namespace {

using nlohmann::json;
using routine::Attributes;
using routine::DeviceKind;
using routine::DriverError;
using routine::DriverFailure;
using routine::DriverResult;
using routine::Value;

DriverResult fail(DriverFailure failure, std::string reason) {
  return core::Unexpected(DriverError{failure, std::move(reason)});
}


// Kasa writes flags as 0/1; accept JSON booleans too.
std::optional<bool> flag(const json* value) {
  if (value == nullptr) return std::nullopt;
  if (value->is_boolean()) return value->get<bool>();
  if (auto n = json_number(value)) return *n != 0;
  return std::nullopt;
}

std::string short_text(const json& value) {
  std::string text = dump_json(value);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

// Checks a method's result object: err_code 0 (or absent) is fine.
std::optional<DriverError> check_err_code(const json* result, std::string_view what) {
  if (result == nullptr || !result->is_object()) {
    return DriverError{DriverFailure::protocol, fmt::format("reply has no {} object", what)};
  }
  const json* code = json_member(result, "err_code");
  if (code == nullptr) return std::nullopt;
  auto value = json_number(code);
  if (!value) return DriverError{DriverFailure::protocol, fmt::format("{}: err_code is {}", what, short_text(*code))};
  if (*value == 0) return std::nullopt;
  std::string message;
  if (const json* msg = json_member(result, "err_msg"); msg != nullptr && msg->is_string()) {
    message = msg->get<std::string>();
    if (message.size() > 120) message = message.substr(0, 117) + "...";
  }
  return DriverError{DriverFailure::refused, message.empty()
                                                 ? fmt::format("{}: err_code {}", what, *value)
                                                 : fmt::format("{}: err_code {} ({})", what, *value, message)};
}

core::Expected<json, DriverError> parse_json(std::string_view text) {
  if (json_depth(text) > kMaxJsonDepth) {
    return core::Unexpected(
        DriverError{DriverFailure::protocol, fmt::format("reply nests deeper than {} levels", kMaxJsonDepth)});
  }
  json parsed = json::parse(text.begin(), text.end(), nullptr, false);
  if (parsed.is_discarded()) {
    return core::Unexpected(
        DriverError{DriverFailure::protocol, fmt::format("reply is not JSON ({} bytes)", text.size())});
  }
  if (!parsed.is_object()) {
    return core::Unexpected(DriverError{DriverFailure::protocol, "reply is not a JSON object"});
  }
  return parsed;
}

void put_flag(Attributes& out, const char* name, const json* value) {
  if (auto f = flag(value)) out[name] = *f;
}
void put_number(Attributes& out, const char* name, const json* value) {
  if (auto n = json_number(value)) out[name] = *n;
}

// Light state of a bulb: on_off, brightness, color_temp; the latter two from
// dft_on_state when the bulb is off and does not report them directly.
void put_light_state(Attributes& out, const json* state) {
  put_flag(out, "power", json_member(state, "on_off"));
  const json* fallback = json_member(state, "dft_on_state");
  for (const char* name : {"brightness", "color_temp"}) {
    const json* value = json_member(state, name);
    if (!json_number(value)) value = json_member(fallback, name);
    put_number(out, name, value);
  }
}

bool child_matches(const std::string& wanted, const json& child, const std::string& device_id) {
  const json* id = json_member(&child, "id");
  if (id == nullptr || !id->is_string()) return false;
  const auto& text = id->get_ref<const std::string&>();
  if (text == wanted) return true;
  // Strips list children by their full id (deviceId + "00") or by the suffix.
  if (!device_id.empty()) return device_id + text == wanted || text == device_id + wanted;
  return false;
}

bool is_outlet_kind(DeviceKind kind) { return kind == DeviceKind::plug || kind == DeviceKind::switch_; }
std::string outlet_kind_error(DeviceKind kind) {
  return fmt::format("a power-strip outlet is a plug or a switch, not a {}", routine::to_string(kind));
}

// One module/method call of a request.
struct Call {
  std::string module;
  std::string method;
  json arguments;
};

bool want_bool(const Value& value) { return std::holds_alternative<bool>(value) && std::get<bool>(value); }

std::optional<double> as_number(const Value& value) {
  if (const auto* n = std::get_if<double>(&value)) return *n;
  return std::nullopt;
}

// The calls that set `values`, or what cannot be set.
core::Expected<std::vector<Call>, std::string> plan(const Target& target, const Attributes& values,
                                                    const ActuateOptions& options) {
  std::vector<Call> calls;
  if (!target.child_id.empty() && !is_outlet_kind(target.kind)) {
    return core::Unexpected(outlet_kind_error(target.kind));
  }
  json bulb = json::object();
  auto unsupported = [&](const std::string& name) {
    return core::Unexpected(fmt::format("a Kasa {}{} cannot set '{}'", routine::to_string(target.kind),
                                        target.child_id.empty() ? "" : " outlet", name));
  };
  auto whole_number = [](double v) { return static_cast<int64_t>(std::llround(v)); };
  for (const auto& [name, value] : values) {
    switch (target.kind) {
      case DeviceKind::switch_:
      case DeviceKind::plug:
      case DeviceKind::dimmer:
        if (name == "power" && std::holds_alternative<bool>(value)) {
          calls.push_back({"system", "set_relay_state", {{"state", want_bool(value) ? 1 : 0}}});
        } else if (target.kind == DeviceKind::dimmer && target.child_id.empty() && name == "brightness" &&
                   as_number(value)) {
          calls.push_back(
              {std::string(kDimmerModule), "set_brightness", {{"brightness", whole_number(*as_number(value))}}});
        } else {
          return unsupported(name);
        }
        break;
      case DeviceKind::bulb:
        if (name == "power" && std::holds_alternative<bool>(value)) {
          bulb["on_off"] = want_bool(value) ? 1 : 0;
        } else if ((name == "brightness" || name == "color_temp") && as_number(value)) {
          bulb[name] = whole_number(*as_number(value));
        } else {
          return unsupported(name);
        }
        break;
      case DeviceKind::lock:
        if (name != "locked" || !std::holds_alternative<bool>(value)) return unsupported(name);
        calls.push_back({std::string(kLockModule), "set_locked", {{"locked", want_bool(value) ? 1 : 0}}});
        break;
      case DeviceKind::thermostat:
        if (name != "target" || !as_number(value)) return unsupported(name);
        calls.push_back({std::string(kThermostatModule), "set_target", {{"target", *as_number(value)}}});
        break;
      case DeviceKind::motion_sensor:
      case DeviceKind::contact_sensor:
      case DeviceKind::occupancy_sensor:
      case DeviceKind::sensor:
        return unsupported(name);
    }
  }
  if (!bulb.empty()) {
    bulb["ignore_default"] = 1;
    if (options.transition_ms) bulb["transition_period"] = *options.transition_ms;
    calls.push_back({std::string(kBulbModule), "transition_light_state", std::move(bulb)});
  }
  if (calls.empty()) return core::Unexpected(std::string("nothing to set"));
  return calls;
}

}  // namespace

std::string encrypt(std::string_view plain) {
  std::string out(plain.size(), '\0');
  uint8_t key = kInitialKey;
  for (size_t i = 0; i < plain.size(); ++i) {
    key = static_cast<uint8_t>(static_cast<uint8_t>(plain[i]) ^ key);
    out[i] = static_cast<char>(key);
  }
  return out;
}

std::string decrypt(std::string_view cipher) {
  std::string out(cipher.size(), '\0');
  uint8_t key = kInitialKey;
  for (size_t i = 0; i < cipher.size(); ++i) {
    const auto c = static_cast<uint8_t>(cipher[i]);
    out[i] = static_cast<char>(key ^ c);
    key = c;
  }
  return out;
}

std::string encode_frame(std::string_view plain) {
  const auto size = static_cast<uint32_t>(plain.size());
  std::string out;
  out.reserve(kHeaderSize + plain.size());
  out.push_back(static_cast<char>((size >> 24) & 0xff));
  out.push_back(static_cast<char>((size >> 16) & 0xff));
  out.push_back(static_cast<char>((size >> 8) & 0xff));
  out.push_back(static_cast<char>(size & 0xff));
  out += encrypt(plain);
  return out;
}

size_t FrameReader::feed(std::string_view bytes) {
  size_t used = 0;
  if (status_ != Status::need_more) return 0;
  if (header_.size() < kHeaderSize) {
    const size_t n = std::min(kHeaderSize - header_.size(), bytes.size());
    header_.append(bytes.substr(0, n));
    used += n;
    if (header_.size() < kHeaderSize) return used;
    declared_ = (uint32_t{static_cast<uint8_t>(header_[0])} << 24) |
                (uint32_t{static_cast<uint8_t>(header_[1])} << 16) | (uint32_t{static_cast<uint8_t>(header_[2])} << 8) |
                uint32_t{static_cast<uint8_t>(header_[3])};
    if (declared_ > max_payload_) {
      status_ = Status::oversized;
      return used;
    }
    payload_.reserve(declared_);
  }
  const size_t n = std::min(static_cast<size_t>(declared_) - payload_.size(), bytes.size() - used);
  payload_.append(bytes.substr(used, n));
  used += n;
  if (payload_.size() == declared_) status_ = Status::complete;
  return used;
}

std::string FrameReader::take() {
  std::string out;
  if (status_ == Status::complete) out = decrypt(payload_);
  header_.clear();
  payload_.clear();
  declared_ = 0;
  status_ = Status::need_more;
  return out;
}

int json_depth(std::string_view text, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == '}' || c == ']') {
      if (depth > 0) --depth;
    }
  }
  return deepest;
}

std::string sysinfo_request() { return R"({"system":{"get_sysinfo":{}}})"; }

core::Expected<std::string, std::string> actuate_request(const Target& target, const Attributes& values,
                                                         const ActuateOptions& options) {
  auto calls = plan(target, values, options);
  if (!calls) return core::Unexpected(calls.error());
  json request = json::object();
  for (auto& call : *calls) request[call.module][call.method] = std::move(call.arguments);
  if (!target.child_id.empty()) request["context"] = {{"child_ids", json::array({target.child_id})}};
  if (!options.command_id.empty()) request[std::string(kCommandIdModule)] = {{"command_id", options.command_id}};
  return dump_json(request);
}

DriverResult parse_sysinfo_reply(const Target& target, std::string_view text) {
  auto parsed = parse_json(text);
  if (!parsed) return core::Unexpected(parsed.error());
  const json* info = json_member(json_member(&*parsed, "system"), "get_sysinfo");
  if (auto error = check_err_code(info, "system.get_sysinfo")) return core::Unexpected(*error);

  Attributes out;
  if (!target.child_id.empty()) {
    if (!is_outlet_kind(target.kind)) return fail(DriverFailure::protocol, outlet_kind_error(target.kind));
    const json* children = json_member(info, "children");
    if (children == nullptr || !children->is_array())
      return fail(DriverFailure::protocol, "sysinfo has no children list");
    std::string device_id;
    if (const json* id = json_member(info, "deviceId"); id != nullptr && id->is_string()) device_id = id->get<std::string>();
    for (const auto& child : *children) {
      if (!child_matches(target.child_id, child, device_id)) continue;
      auto state = flag(json_member(&child, "state"));
      if (!state) return fail(DriverFailure::protocol, fmt::format("outlet {} has no state", target.child_id));
      out["power"] = *state;
      return out;
    }
    return fail(DriverFailure::protocol, fmt::format("sysinfo lists no outlet {}", target.child_id));
  }

  switch (target.kind) {
    case DeviceKind::switch_:
    case DeviceKind::plug:
      put_flag(out, "power", json_member(info, "relay_state"));
      break;
    case DeviceKind::dimmer:
      put_flag(out, "power", json_member(info, "relay_state"));
      put_number(out, "brightness", json_member(info, "brightness"));
      break;
    case DeviceKind::bulb:
      put_light_state(out, json_member(info, "light_state"));
      break;
    case DeviceKind::motion_sensor:
      put_flag(out, "motion", json_member(info, "motion"));
      break;
    case DeviceKind::contact_sensor:
      put_flag(out, "contact", json_member(info, "contact"));
      break;
    case DeviceKind::occupancy_sensor:
      put_flag(out, "occupancy", json_member(info, "occupancy"));
      break;
    case DeviceKind::sensor:
      for (const char* name : {"temperature", "humidity", "illuminance"}) put_number(out, name, json_member(info, name));
      break;
    case DeviceKind::lock:
      put_flag(out, "locked", json_member(info, "locked"));
      break;
    case DeviceKind::thermostat:
      put_number(out, "target", json_member(info, "target"));
      put_number(out, "temperature", json_member(info, "temperature"));
      break;
  }
  if (out.empty()) {
    return fail(DriverFailure::protocol,
                fmt::format("sysinfo has none of the fields of a {}", routine::to_string(target.kind)));
  }
  return out;
}

DriverResult parse_actuate_reply(const Target& target, const Attributes& values, std::string_view text) {
  auto calls = plan(target, values, {});
  if (!calls) return fail(DriverFailure::protocol, calls.error());
  auto parsed = parse_json(text);
  if (!parsed) return core::Unexpected(parsed.error());
  Attributes out;
  for (const auto& call : *calls) {
    const json* result = json_member(json_member(&*parsed, call.module), call.method);
    if (auto error = check_err_code(result, call.module + "." + call.method)) return core::Unexpected(*error);
    if (call.module == kBulbModule) put_light_state(out, result);
  }
  return out;
}

}  // namespace mesh::drivers::kasa
