#include "agent/drivers/mqtt_codec.h"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/drivers/json_fields.h"

#include "agent/drivers/kasa_codec.h"

namespace mesh::drivers::mqtt {
namespace {

using nlohmann::json;
using routine::Attributes;
using routine::DeviceKind;

constexpr int kMaxDepth = kasa::kMaxJsonDepth;


std::optional<std::string> text(const json* value) {
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

std::optional<bool> on_off_text(std::string_view value) {
  if (value == "ON" || value == "on" || value == "On") return true;
  if (value == "OFF" || value == "off" || value == "Off") return false;
  return std::nullopt;
}

std::optional<bool> boolean(const json* value) {
  if (value == nullptr) return std::nullopt;
  if (value->is_boolean()) return value->get<bool>();
  if (auto t = text(value)) return on_off_text(*t);
  return std::nullopt;
}

bool switchable(DeviceKind kind) {
  return kind == DeviceKind::switch_ || kind == DeviceKind::plug || kind == DeviceKind::dimmer ||
         kind == DeviceKind::bulb;
}

std::optional<json> parse_json(std::string_view payload) {
  if (kasa::json_depth(payload, kMaxDepth) > kMaxDepth) return std::nullopt;
  json parsed = json::parse(payload.begin(), payload.end(), nullptr, false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed;
}

double mired_to_kelvin(double mired) { return std::round(1e6 / mired); }

void put_color_temp(Attributes& out, const json* mired) {
  if (auto m = json_number(mired); m && *m > 0) out["color_temp"] = mired_to_kelvin(*m);
}

// --- zigbee2mqtt ---

std::string z2m_topic(const Device& device) { return device.base + "/" + device.name; }

Update parse_z2m_state(const Device& device, std::string_view payload) {
  Update update;
  auto parsed = parse_json(payload);
  if (!parsed || !parsed->is_object()) {
    update.error = fmt::format("state of {} is not a JSON object", device.name);
    return update;
  }
  const json* state = &*parsed;
  Attributes out;
  switch (device.kind) {
    case DeviceKind::switch_:
    case DeviceKind::plug:
    case DeviceKind::dimmer:
    case DeviceKind::bulb:
      if (auto on = boolean(json_member(state, "state"))) out["power"] = *on;
      if (device.kind == DeviceKind::dimmer || device.kind == DeviceKind::bulb) {
        if (auto level = json_number(json_member(state, "brightness"))) {
          out["brightness"] = std::round(std::clamp(*level, 0.0, 254.0) * 100.0 / 254.0);
        }
      }
      if (device.kind == DeviceKind::bulb) put_color_temp(out, json_member(state, "color_temp"));
      break;
    case DeviceKind::motion_sensor:
      if (auto v = boolean(json_member(state, "occupancy"))) out["motion"] = *v;
      break;
    case DeviceKind::occupancy_sensor:
      if (auto v = boolean(json_member(state, "occupancy"))) {
        out["occupancy"] = *v;
      } else if (auto presence = boolean(json_member(state, "presence"))) {
        out["occupancy"] = *presence;
      }
      break;
    case DeviceKind::contact_sensor:
      if (auto v = boolean(json_member(state, "contact"))) out["contact"] = *v;
      break;
    case DeviceKind::sensor:
      if (auto v = json_number(json_member(state, "temperature"))) out["temperature"] = *v;
      if (auto v = json_number(json_member(state, "humidity"))) out["humidity"] = *v;
      if (auto v = json_number(json_member(state, "illuminance_lux"))) {
        out["illuminance"] = *v;
      } else if (auto raw = json_number(json_member(state, "illuminance"))) {
        out["illuminance"] = *raw;
      }
      break;
    case DeviceKind::lock:
      if (auto v = text(json_member(state, "lock_state")); v && (*v == "locked" || *v == "unlocked")) {
        out["locked"] = *v == "locked";
      } else if (auto s = text(json_member(state, "state")); s && (*s == "LOCK" || *s == "UNLOCK")) {
        out["locked"] = *s == "LOCK";
      }
      break;
    case DeviceKind::thermostat:
      if (auto v = json_number(json_member(state, "current_heating_setpoint"))) out["target"] = *v;
      if (auto v = json_number(json_member(state, "local_temperature"))) out["temperature"] = *v;
      break;
  }
  update.state = std::move(out);
  return update;
}

std::optional<bool> parse_availability(std::string_view payload) {
  if (payload == "online" || payload == "Online") return true;
  if (payload == "offline" || payload == "Offline") return false;
  if (auto parsed = parse_json(payload)) {
    if (auto state = text(json_member(&*parsed, "state"))) {
      if (*state == "online") return true;
      if (*state == "offline") return false;
    }
  }
  return std::nullopt;
}

// --- Tasmota ---

// The first `key` in `object` or one level down (a sensor's object).
const json* find_reading(const json* object, std::string_view key) {
  if (const json* direct = json_member(object, key)) return direct;
  if (object == nullptr || !object->is_object()) return nullptr;
  for (const auto& [name, child] : object->items()) {
    if (const json* nested = json_member(&child, key)) return nested;
  }
  return nullptr;
}

Attributes tasmota_fields(const Device& device, const json* object) {
  Attributes out;
  switch (device.kind) {
    case DeviceKind::switch_:
    case DeviceKind::plug:
    case DeviceKind::dimmer:
    case DeviceKind::bulb: {
      const json* power = json_member(object, "POWER");
      if (power == nullptr) power = json_member(object, "POWER1");
      if (auto on = boolean(power)) out["power"] = *on;
      if (device.kind != DeviceKind::switch_ && device.kind != DeviceKind::plug) {
        if (auto level = json_number(json_member(object, "Dimmer")))
          out["brightness"] = std::clamp(std::round(*level), 0.0, 100.0);
      }
      if (device.kind == DeviceKind::bulb) put_color_temp(out, json_member(object, "CT"));
      break;
    }
    case DeviceKind::motion_sensor:
    case DeviceKind::contact_sensor:
    case DeviceKind::occupancy_sensor: {
      const char* name = device.kind == DeviceKind::motion_sensor    ? "motion"
                         : device.kind == DeviceKind::contact_sensor ? "contact"
                                                                     : "occupancy";
      if (auto v = boolean(find_reading(object, "Switch1"))) out[name] = *v;
      break;
    }
    case DeviceKind::sensor:
      if (auto v = json_number(find_reading(object, "Temperature"))) out["temperature"] = *v;
      if (auto v = json_number(find_reading(object, "Humidity"))) out["humidity"] = *v;
      if (auto v = json_number(find_reading(object, "Illuminance"))) out["illuminance"] = *v;
      break;
    case DeviceKind::lock:
    case DeviceKind::thermostat:
      break;
  }
  return out;
}

Update parse_tasmota(const Device& device, const std::string& topic, std::string_view payload) {
  Update update;
  const std::string& t = device.name;
  if (topic == "tele/" + t + "/LWT") {
    update.online = parse_availability(payload);
    if (!update.online) update.error = fmt::format("LWT of {} is neither Online nor Offline", t);
    return update;
  }
  if (topic == "stat/" + t + "/POWER") {
    auto on = on_off_text(payload);
    if (!on) {
      update.error = fmt::format("POWER of {} is neither ON nor OFF", t);
    } else if (switchable(device.kind)) {
      update.state = Attributes{{"power", *on}};
    }
    return update;
  }
  auto parsed = parse_json(payload);
  if (!parsed || !parsed->is_object()) {
    update.error = fmt::format("{} is not a JSON object", topic);
    return update;
  }
  const json* object = &*parsed;
  if (topic == "stat/" + t + "/STATUS10") object = json_member(object, "StatusSNS");
  update.state = tasmota_fields(device, object);
  return update;
}

}  // namespace

std::vector<std::string> subscriptions(const Device& device) {
  if (device.flavor == Flavor::z2m) {
    const std::string base = z2m_topic(device);
    return {base, base + "/availability"};
  }
  const std::string& t = device.name;
  return {"stat/" + t + "/POWER", "stat/" + t + "/RESULT", "stat/" + t + "/STATUS10",
          "tele/" + t + "/STATE", "tele/" + t + "/SENSOR", "tele/" + t + "/LWT"};
}

Update parse_message(const Device& device, const std::string& topic, std::string_view payload) {
  if (device.flavor == Flavor::tasmota) return parse_tasmota(device, topic, payload);
  const std::string base = z2m_topic(device);
  if (topic == base) return parse_z2m_state(device, payload);
  Update update;
  if (topic == base + "/availability") {
    update.online = parse_availability(payload);
    if (!update.online) update.error = fmt::format("availability of {} is neither online nor offline", device.name);
  }
  return update;
}

core::Expected<std::vector<Message>, std::string> command_messages(const Device& device,
                                                                   const routine::Attributes& values) {
  auto unsupported = [&](const std::string& name) {
    return core::Unexpected(fmt::format("a {} {} cannot set '{}' over MQTT",
                                        device.flavor == Flavor::z2m ? "zigbee2mqtt" : "Tasmota",
                                        routine::to_string(device.kind), name));
  };
  if (values.empty()) return core::Unexpected(std::string("nothing to set"));
  std::vector<Message> out;
  json z2m = json::object();
  for (const auto& [name, value] : values) {
    const auto* spec = routine::find_attribute(device.kind, name);
    if (spec == nullptr || !spec->writable) return unsupported(name);
    const bool* flag = std::get_if<bool>(&value);
    const double* num = std::get_if<double>(&value);
    if (device.flavor == Flavor::z2m) {
      if (name == "power" && flag != nullptr) {
        z2m["state"] = *flag ? "ON" : "OFF";
      } else if (name == "brightness" && num != nullptr) {
        z2m["brightness"] = static_cast<int>(std::lround(std::clamp(*num, 0.0, 100.0) * 254.0 / 100.0));
      } else if (name == "color_temp" && num != nullptr && *num > 0) {
        z2m["color_temp"] = static_cast<int>(std::lround(1e6 / *num));
      } else if (name == "locked" && flag != nullptr) {
        z2m["state"] = *flag ? "LOCK" : "UNLOCK";
      } else if (name == "target" && num != nullptr) {
        z2m["current_heating_setpoint"] = *num;
      } else {
        return unsupported(name);
      }
      continue;
    }
    const std::string cmnd = "cmnd/" + device.name + "/";
    if (name == "power" && flag != nullptr) {
      out.push_back({cmnd + "POWER", *flag ? "ON" : "OFF"});
    } else if (name == "brightness" && num != nullptr) {
      out.push_back({cmnd + "Dimmer", fmt::format("{}", std::lround(*num))});
    } else if (name == "color_temp" && num != nullptr && *num > 0) {
      out.push_back({cmnd + "CT", fmt::format("{}", std::clamp(std::lround(1e6 / *num), 153L, 500L))});
    } else {
      return unsupported(name);
    }
  }
  if (device.flavor == Flavor::z2m) out.push_back({z2m_topic(device) + "/set", dump_json(z2m)});
  return out;
}

std::vector<Message> read_request(const Device& device) {
  if (device.flavor == Flavor::z2m) {
    json get = json::object();
    for (const auto& spec : routine::schema(device.kind)) {
      if (!spec.writable) continue;
      const std::string name(spec.name);
      if (name == "power" || name == "locked") {
        get["state"] = "";
      } else if (name == "brightness" || name == "color_temp") {
        get[name] = "";
      } else if (name == "target") {
        get["current_heating_setpoint"] = "";
      }
    }
    // Sensors report on their own (most sleep between reports): nothing to ask.
    if (get.empty()) return {};
    return {{z2m_topic(device) + "/get", dump_json(get)}};
  }
  if (switchable(device.kind)) return {{"cmnd/" + device.name + "/STATE", ""}};
  return {{"cmnd/" + device.name + "/STATUS", "10"}};
}

}  // namespace mesh::drivers::mqtt
