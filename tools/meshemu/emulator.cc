#include "tools/meshemu/emulator.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <asio/post.hpp>
#include <asio/write.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "agent/drivers/kasa_codec.h"

namespace mesh::meshemu {

using nlohmann::json;
using routine::Attributes;
using routine::DeviceKind;
using routine::Value;

namespace {

// Largest request a device accepts; a real request is a few hundred bytes.
constexpr size_t kMaxRequestSize = size_t{16} * 1024;

std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

const json* member(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::optional<double> number(const json* value) {
  if (value == nullptr) return std::nullopt;
  if (value->is_boolean()) return value->get<bool>() ? 1.0 : 0.0;
  if (!value->is_number()) return std::nullopt;
  return value->get<double>();
}

std::optional<bool> flag(const json* value) {
  auto n = number(value);
  if (!n || (*n != 0 && *n != 1)) return std::nullopt;
  return *n == 1;
}

json error_reply(int code, std::string_view message) { return {{"err_code", code}, {"err_msg", message}}; }
json ok_reply() { return {{"err_code", 0}}; }

bool get_bool(const Attributes& state, const std::string& name) {
  auto it = state.find(name);
  return it != state.end() && std::holds_alternative<bool>(it->second) && std::get<bool>(it->second);
}
double get_number(const Attributes& state, const std::string& name, double fallback = 0) {
  auto it = state.find(name);
  if (it == state.end() || !std::holds_alternative<double>(it->second)) return fallback;
  return std::get<double>(it->second);
}
// Whole numbers print as integers, as the devices write them.
json json_number(double value) {
  if (value == std::floor(value) && std::abs(value) < 1e15) return static_cast<int64_t>(value);
  return value;
}

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 1469598103934665603ull;
  for (char c : text) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string wall_clock_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", text.data(), ms);
}

struct Walk {
  const char* name;
  double min;
  double max;
  double step;
};
constexpr std::array<Walk, 3> kWalks = {
    {{"temperature", 15, 30, 0.5}, {"humidity", 20, 80, 2}, {"illuminance", 0, 1000, 50}}};

// The initial state of a kind: everything off, sensors at rest.
Attributes default_state(DeviceKind kind) {
  Attributes state;
  for (const auto& spec : routine::schema(kind)) {
    const std::string name(spec.name);
    if (spec.type != routine::AttributeType::number) {
      state[name] = false;
    } else if (name == "brightness") {
      state[name] = 100.0;
    } else if (name == "color_temp") {
      state[name] = 2700.0;
    } else if (name == "temperature") {
      state[name] = 21.0;
    } else if (name == "humidity") {
      state[name] = 45.0;
    } else if (name == "illuminance") {
      state[name] = 300.0;
    } else if (name == "target") {
      state[name] = 20.0;
    } else {
      state[name] = spec.min;
    }
  }
  return state;
}

}  // namespace

struct Emulator::Device {
  Device(asio::io_context& io, DeviceConfig cfg)
      : config(std::move(cfg)), acceptor(io), timeline_timer(io), random_timer(io) {}

  DeviceConfig config;
  bool strip = false;
  DeviceKind kind = DeviceKind::plug;  // a strip's outlets are plugs
  std::string device_id;               // 40 hex digits, from the name
  std::string mac;
  Attributes state;
  std::vector<bool> outlets;
  asio::ip::tcp::acceptor acceptor;
  asio::steady_timer timeline_timer;
  asio::steady_timer random_timer;
  uint16_t port = 0;
  uint64_t requests = 0;
};

struct Emulator::Session {
  Session(asio::io_context& io, Device& d) : device(&d), socket(io), delay(io) {}
  Device* device;
  asio::ip::tcp::socket socket;
  asio::steady_timer delay;
  drivers::kasa::FrameReader reader{kMaxRequestSize};
  std::array<char, 4096> buffer{};
  std::string pending;  // bytes read past the current frame
  std::string reply;
};

std::vector<std::string> emulated_kinds() {
  std::vector<std::string> kinds;
  for (auto kind : routine::all_kinds()) kinds.emplace_back(routine::to_string(kind));
  kinds.emplace_back("strip");
  return kinds;
}

Emulator::Emulator(asio::io_context& io, EmulatorConfig config)
    : io_(io),
      config_(std::move(config)),
      started_(std::chrono::steady_clock::now()),
      rng_(config_.seed),
      alive_(std::make_shared<Emulator*>(this)) {
  if (!config_.actuation_log.empty()) {
    log_ = std::fopen(config_.actuation_log.c_str(), "a");
    if (log_ == nullptr) {
      throw std::runtime_error(
          fmt::format("actuation log {}: cannot open for appending: {}", config_.actuation_log, std::strerror(errno)));
    }
  }
  for (const auto& cfg : config_.devices) {
    if (find(cfg.name) != nullptr) throw std::runtime_error(fmt::format("device {}: the name is used twice", cfg.name));
    auto device = std::make_unique<Device>(io_, cfg);
    if (cfg.kind == "strip") {
      device->strip = true;
      device->outlets.assign(static_cast<size_t>(std::clamp(cfg.outlets, 1, 16)), false);
      if (auto it = cfg.initial.find("power"); it != cfg.initial.end() && std::holds_alternative<bool>(it->second)) {
        std::fill(device->outlets.begin(), device->outlets.end(), std::get<bool>(it->second));
      }
    } else {
      auto kind = routine::parse_kind(cfg.kind);
      if (!kind) {
        throw std::runtime_error(fmt::format("device {}: unknown kind '{}' (known: {})", cfg.name, cfg.kind,
                                             fmt::join(emulated_kinds(), ", ")));
      }
      device->kind = *kind;
      device->state = default_state(*kind);
      for (const auto& [name, value] : cfg.initial) {
        if (routine::find_attribute(*kind, name) == nullptr) {
          throw std::runtime_error(fmt::format("device {}: a {} has no attribute '{}'", cfg.name, cfg.kind, name));
        }
        device->state[name] = value;
      }
    }
    const uint64_t hash = fnv1a(cfg.name);
    device->device_id = fmt::format("8006{:016X}{:016X}{:04X}", hash, fnv1a(cfg.name + "#"), hash & 0xffff);
    device->mac = fmt::format("50:C7:BF:{:02X}:{:02X}:{:02X}", (hash >> 16) & 0xff, (hash >> 8) & 0xff, hash & 0xff);

    const std::string address = cfg.address.empty() ? config_.address : cfg.address;
    asio::error_code error;
    const auto ip = asio::ip::make_address(address, error);
    if (error) throw std::runtime_error(fmt::format("device {}: '{}' is not an IP address", cfg.name, address));
    const asio::ip::tcp::endpoint endpoint(ip, cfg.port);
    device->acceptor.open(endpoint.protocol(), error);
    if (!error) device->acceptor.set_option(asio::socket_base::reuse_address(true), error);
    if (!error) device->acceptor.bind(endpoint, error);
    if (!error) device->acceptor.listen(asio::socket_base::max_listen_connections, error);
    if (error) {
      throw std::runtime_error(
          fmt::format("device {}: cannot listen on {}:{}: {}", cfg.name, address, cfg.port, error.message()));
    }
    device->port = device->acceptor.local_endpoint().port();
    devices_.push_back(std::move(device));
  }
  for (auto& device : devices_) {
    accept(*device);
    if (!device->config.timeline.empty()) schedule_timeline(*device, 0, 0);
    if (device->config.random_every > 0) schedule_random(*device);
  }
}

Emulator::~Emulator() {
  alive_.reset();
  for (auto& device : devices_) {
    asio::error_code ignored;
    device->acceptor.close(ignored);
    // A failed cancel() is reported only by exception; the timers die with
    // their device anyway.
    try {
      device->timeline_timer.cancel();
      device->random_timer.cancel();
    } catch (...) {  // NOLINT(bugprone-empty-catch)
    }
  }
  if (log_ != nullptr) std::fclose(log_);
}

Emulator::Device* Emulator::find(const std::string& name) {
  for (auto& device : devices_) {
    if (device->config.name == name) return device.get();
  }
  return nullptr;
}
const Emulator::Device* Emulator::find(const std::string& name) const {
  for (const auto& device : devices_) {
    if (device->config.name == name) return device.get();
  }
  return nullptr;
}

uint16_t Emulator::port(const std::string& device) const {
  const Device* d = find(device);
  return d == nullptr ? 0 : d->port;
}

std::vector<std::string> Emulator::devices() const {
  std::vector<std::string> out;
  for (const auto& device : devices_) out.push_back(device->config.name);
  return out;
}

uint64_t Emulator::requests(const std::string& device) const {
  const Device* d = find(device);
  return d == nullptr ? 0 : d->requests;
}

std::vector<std::string> Emulator::describe() const {
  std::vector<std::string> out;
  for (const auto& device : devices_) {
    const std::string address = device->config.address.empty() ? config_.address : device->config.address;
    out.push_back(fmt::format("{} {} {}:{}", device->config.name, device->config.kind, address, device->port));
  }
  return out;
}

Attributes Emulator::state(const std::string& device) const {
  const Device* d = find(device);
  if (d == nullptr) return {};
  if (!d->strip) return d->state;
  Attributes out;
  for (size_t i = 0; i < d->outlets.size(); ++i) out[fmt::format("outlet{}", i)] = static_cast<bool>(d->outlets[i]);
  return out;
}

bool Emulator::set(const std::string& device, const std::string& attribute, const Value& value) {
  Device* d = find(device);
  if (d == nullptr) return false;
  if (d->strip) {
    for (size_t i = 0; i < d->outlets.size(); ++i) {
      if (attribute == fmt::format("outlet{}", i) && std::holds_alternative<bool>(value)) {
        d->outlets[i] = std::get<bool>(value);
        return true;
      }
    }
    return false;
  }
  const auto* spec = routine::find_attribute(d->kind, attribute);
  if (spec == nullptr) return false;
  if ((spec->type == routine::AttributeType::number) != std::holds_alternative<double>(value)) return false;
  d->state[attribute] = value;
  return true;
}

namespace {

json sysinfo_of(const std::string& name, bool strip, DeviceKind kind, const std::string& device_id,
                const std::string& mac, const Attributes& state, const std::vector<bool>& outlets) {
  json info = {{"sw_ver", "1.0.0 Build 261125 Rel.meshemu"},
               {"hw_ver", "1.0"},
               {"deviceId", device_id},
               {"hwId", "MESHEMU0000000000000000000000000"},
               {"oemId", "MESHEMU0000000000000000000000000"},
               {"alias", name},
               {"mac", mac},
               {"rssi", -40},
               {"led_off", 0},
               {"updating", 0},
               {"err_code", 0}};
  if (strip) {
    info["type"] = "IOT.SMARTPLUGSWITCH";
    info["model"] = "HS300(EU)";
    info["child_num"] = outlets.size();
    json children = json::array();
    for (size_t i = 0; i < outlets.size(); ++i) {
      children.push_back({{"id", fmt::format("{}{:02}", device_id, i)},
                          {"state", outlets[i] ? 1 : 0},
                          {"alias", fmt::format("{} outlet {}", name, i)},
                          {"on_time", 0}});
    }
    info["children"] = std::move(children);
    return info;
  }
  switch (kind) {
    case DeviceKind::switch_:
    case DeviceKind::plug:
    case DeviceKind::dimmer:
      info["type"] = "IOT.SMARTPLUGSWITCH";
      info["model"] = kind == DeviceKind::plug ? "HS100(EU)" : kind == DeviceKind::switch_ ? "HS200(EU)" : "HS220(EU)";
      info["relay_state"] = get_bool(state, "power") ? 1 : 0;
      info["on_time"] = 0;
      if (kind == DeviceKind::dimmer) info["brightness"] = json_number(get_number(state, "brightness"));
      break;
    case DeviceKind::bulb: {
      info["type"] = "IOT.SMARTBULB";
      info["model"] = "KL130(EU)";
      info["is_dimmable"] = 1;
      info["is_color"] = 0;
      info["is_variable_color_temp"] = 1;
      json light = {{"mode", "normal"},
                    {"hue", 0},
                    {"saturation", 0},
                    {"color_temp", json_number(get_number(state, "color_temp"))},
                    {"brightness", json_number(get_number(state, "brightness"))}};
      if (get_bool(state, "power")) {
        light["on_off"] = 1;
        info["light_state"] = std::move(light);
      } else {
        info["light_state"] = {{"on_off", 0}, {"dft_on_state", std::move(light)}};
      }
      break;
    }
    default: {
      info["type"] = "IOT.MESHEMU";
      std::string model(routine::to_string(kind));
      for (auto& c : model) c = c == '_' ? '-' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      info["model"] = "MESHEMU-" + model;
      for (const auto& [attribute, value] : state) {
        if (const auto* b = std::get_if<bool>(&value)) {
          info[attribute] = *b ? 1 : 0;
        } else if (const auto* n = std::get_if<double>(&value)) {
          info[attribute] = json_number(*n);
        }
      }
      break;
    }
  }
  return info;
}

json light_state_reply(const Attributes& state) {
  json light = {{"mode", "normal"},
                {"hue", 0},
                {"saturation", 0},
                {"color_temp", json_number(get_number(state, "color_temp"))},
                {"brightness", json_number(get_number(state, "brightness"))}};
  if (get_bool(state, "power")) {
    light["on_off"] = 1;
    light["err_code"] = 0;
    return light;
  }
  return {{"on_off", 0}, {"dft_on_state", std::move(light)}, {"err_code", 0}};
}

}  // namespace

std::optional<std::string> Emulator::handle(const std::string& name, std::string_view text) {
  Device* device = find(name);
  if (device == nullptr) return std::nullopt;
  if (drivers::kasa::json_depth(text) > drivers::kasa::kMaxJsonDepth) return std::nullopt;
  const json request = json::parse(text.begin(), text.end(), nullptr, false);
  if (request.is_discarded() || !request.is_object()) return std::nullopt;
  ++device->requests;

  // Outlets a strip request addresses through context.child_ids.
  std::optional<std::vector<size_t>> children;
  bool unknown_child = false;
  if (const json* ids = member(request, "context") ? member(*member(request, "context"), "child_ids") : nullptr) {
    children.emplace();
    if (!ids->is_array()) unknown_child = true;
    for (const auto& id : ids->is_array() ? *ids : json::array()) {
      bool found = false;
      for (size_t i = 0; id.is_string() && i < device->outlets.size(); ++i) {
        const auto& text_id = id.get_ref<const std::string&>();
        const std::string full = fmt::format("{}{:02}", device->device_id, i);
        if (text_id == full || text_id == fmt::format("{:02}", i)) {
          children->push_back(i);
          found = true;
        }
      }
      if (!found) unknown_child = true;
    }
  }

  const bool bulb = !device->strip && device->kind == DeviceKind::bulb;
  const bool relay = device->strip || device->kind == DeviceKind::plug || device->kind == DeviceKind::switch_ ||
                     device->kind == DeviceKind::dimmer;
  json reply = json::object();
  std::string command_id;
  bool setters = false;
  bool all_ok = true;
  auto set_result = [&](json result) {
    setters = true;
    if (result.value("err_code", 0) != 0) all_ok = false;
    return result;
  };

  for (const auto& [module, methods] : request.items()) {
    if (module == "context") continue;
    if (module == drivers::kasa::kCommandIdModule) {
      if (const json* id = member(methods, "command_id"); id != nullptr && id->is_string()) {
        command_id = id->get<std::string>();
      }
      reply[module] = ok_reply();
      continue;
    }
    if (!methods.is_object()) {
      reply[module] = error_reply(-1, "module not support");
      continue;
    }
    const bool known_module =
        module == "system" ||
        (module == drivers::kasa::kDimmerModule && !device->strip && device->kind == DeviceKind::dimmer) ||
        (module == drivers::kasa::kBulbModule && bulb) ||
        (module == drivers::kasa::kLockModule && !device->strip && device->kind == DeviceKind::lock) ||
        (module == drivers::kasa::kThermostatModule && !device->strip && device->kind == DeviceKind::thermostat);
    if (!known_module) {
      reply[module] = error_reply(-1, "module not support");
      continue;
    }
    json& answers = reply[module];
    answers = json::object();
    for (const auto& [method, args] : methods.items()) {
      if (module == "system" && method == "get_sysinfo") {
        answers[method] = sysinfo_of(name, device->strip, device->kind, device->device_id, device->mac, device->state,
                                     device->outlets);
      } else if (module == "system" && method == "set_relay_state" && relay) {
        auto state = flag(member(args, "state"));
        if (!state) {
          answers[method] = set_result(error_reply(-3, "invalid argument"));
        } else if (device->strip) {
          if (unknown_child) {
            answers[method] = set_result(error_reply(-14, "entry not exist"));
          } else {
            if (children) {
              for (size_t i : *children) device->outlets[i] = *state;
            } else {
              std::fill(device->outlets.begin(), device->outlets.end(), *state);
            }
            answers[method] = set_result(ok_reply());
          }
        } else {
          device->state["power"] = *state;
          answers[method] = set_result(ok_reply());
        }
      } else if (method == "set_brightness" && module == drivers::kasa::kDimmerModule) {
        auto level = number(member(args, "brightness"));
        if (!level || *level < 0 || *level > 100 || *level != std::floor(*level)) {
          answers[method] = set_result(error_reply(-3, "invalid argument"));
        } else {
          device->state["brightness"] = *level;
          answers[method] = set_result(ok_reply());
        }
      } else if (method == "transition_light_state" && module == drivers::kasa::kBulbModule) {
        // -1: not given; gcc 12 misreads an optional<bool> here (maybe-uninitialized).
        const auto on_off_flag = flag(member(args, "on_off"));
        const int on_off = on_off_flag.has_value() ? (*on_off_flag ? 1 : 0) : -1;
        auto level = number(member(args, "brightness"));
        auto temp = number(member(args, "color_temp"));
        const bool bad = (member(args, "on_off") && on_off < 0) || (member(args, "brightness") && !level) ||
                         (member(args, "color_temp") && !temp) || (level && (*level < 0 || *level > 100)) ||
                         (temp && (*temp < 2500 || *temp > 9000));
        if (bad || !args.is_object()) {
          answers[method] = set_result(error_reply(-3, "invalid argument"));
        } else {
          if (on_off >= 0) device->state["power"] = on_off == 1;
          if (level) device->state["brightness"] = std::round(*level);
          if (temp) device->state["color_temp"] = std::round(*temp);
          answers[method] = set_result(light_state_reply(device->state));
        }
      } else if (method == "set_locked" && module == drivers::kasa::kLockModule) {
        auto locked = flag(member(args, "locked"));
        if (!locked) {
          answers[method] = set_result(error_reply(-3, "invalid argument"));
        } else {
          device->state["locked"] = *locked;
          answers[method] = set_result(ok_reply());
        }
      } else if (method == "set_target" && module == drivers::kasa::kThermostatModule) {
        auto target = number(member(args, "target"));
        if (!target || *target < 5 || *target > 35) {
          answers[method] = set_result(error_reply(-3, "invalid argument"));
        } else {
          device->state["target"] = *target;
          answers[method] = set_result(ok_reply());
        }
      } else {
        answers[method] = error_reply(-2, "member not support");
      }
    }
  }

  if (setters) {
    Actuation actuation;
    actuation.monotonic_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    actuation.wall = wall_clock_now();
    actuation.device = name;
    actuation.command_id = command_id;
    actuation.command = dump(request);
    actuation.ok = all_ok;
    log_actuation(std::move(actuation));
  }
  return dump(reply);
}

void Emulator::log_actuation(Actuation actuation) {
  if (log_ != nullptr) {
    const json line = {{"mono_s", std::round(actuation.monotonic_s * 1e6) / 1e6},
                       {"wall", actuation.wall},
                       {"device", actuation.device},
                       {"command_id", actuation.command_id.empty() ? json(nullptr) : json(actuation.command_id)},
                       {"ok", actuation.ok},
                       {"command", json::parse(actuation.command, nullptr, false)}};
    const std::string text = dump(line) + "\n";
    std::fwrite(text.data(), 1, text.size(), log_);
    std::fflush(log_);
  }
  actuations_.push_back(std::move(actuation));
}

void Emulator::accept(Device& device) {
  auto session = std::make_shared<Session>(io_, device);
  std::weak_ptr<Emulator*> alive = alive_;
  device.acceptor.async_accept(session->socket, [this, alive, session, &device](const asio::error_code& error) {
    if (alive.expired() || error == asio::error::operation_aborted) return;
    if (!error) serve(session);
    accept(device);
  });
}

void Emulator::serve(const std::shared_ptr<Session>& session) {
  auto& reader = session->reader;
  // Frames already buffered (a client that pipelines requests).
  if (!session->pending.empty()) {
    const size_t used = reader.feed(session->pending);
    session->pending.erase(0, used);
  }
  if (reader.status() == drivers::kasa::FrameReader::Status::oversized) return;  // dropping the session closes it
  if (reader.status() == drivers::kasa::FrameReader::Status::complete) {
    auto reply = handle(session->device->config.name, reader.take());
    if (!reply) return;
    session->reply = drivers::kasa::encode_frame(*reply);
    std::weak_ptr<Emulator*> alive = alive_;
    auto write = [this, alive, session] {
      asio::async_write(session->socket, asio::buffer(session->reply),
                        [this, alive, session](const asio::error_code& error, size_t) {
                          if (alive.expired() || error) return;
                          serve(session);
                        });
    };
    if (session->device->config.reply_delay.count() > 0) {
      session->delay.expires_after(session->device->config.reply_delay);
      session->delay.async_wait([alive, write](const asio::error_code& error) {
        if (!alive.expired() && !error) write();
      });
    } else {
      write();
    }
    return;
  }
  std::weak_ptr<Emulator*> alive = alive_;
  session->socket.async_read_some(asio::buffer(session->buffer),
                                  [this, alive, session](const asio::error_code& error, size_t bytes) {
                                    if (alive.expired() || error) return;
                                    session->pending.append(session->buffer.data(), bytes);
                                    serve(session);
                                  });
}

void Emulator::schedule_timeline(Device& device, size_t step, double cycle_start) {
  const auto& timeline = device.config.timeline;
  if (step >= timeline.size()) {
    if (device.config.repeat_after <= 0) return;
    step = 0;
    cycle_start += device.config.repeat_after;
  }
  const double at = cycle_start + timeline[step].at;
  device.timeline_timer.expires_at(
      started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(at)));
  std::weak_ptr<Emulator*> alive = alive_;
  device.timeline_timer.async_wait([this, alive, &device, step, cycle_start](const asio::error_code& error) {
    if (alive.expired() || error) return;
    for (const auto& [name, value] : device.config.timeline[step].values) set(device.config.name, name, value);
    schedule_timeline(device, step + 1, cycle_start);
  });
}

void Emulator::schedule_random(Device& device) {
  device.random_timer.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(device.config.random_every)));
  std::weak_ptr<Emulator*> alive = alive_;
  device.random_timer.async_wait([this, alive, &device](const asio::error_code& error) {
    if (alive.expired() || error) return;
    random_change(device);
    schedule_random(device);
  });
}

void Emulator::random_change(Device& device) {
  if (device.strip) return;
  for (const auto& spec : routine::schema(device.kind)) {
    if (spec.writable) continue;  // only readings change by themselves
    const std::string name(spec.name);
    if (spec.type != routine::AttributeType::number) {
      if (std::uniform_int_distribution<int>(0, 1)(rng_) == 1) device.state[name] = !get_bool(device.state, name);
      continue;
    }
    for (const auto& walk : kWalks) {
      if (name != walk.name) continue;
      const int direction = std::uniform_int_distribution<int>(-1, 1)(rng_);
      const double value = std::clamp(get_number(device.state, name) + direction * walk.step, walk.min, walk.max);
      device.state[name] = value;
    }
  }
}

}  // namespace mesh::meshemu
