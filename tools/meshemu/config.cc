// meshemu's configuration: a TOML file (see meshemu --help) or --device
// options.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "tools/meshemu/emulator.h"

namespace mesh::meshemu {
namespace {

uint32_t line_of(const toml::node& node) { return node.source().begin.line == 0 ? 1 : node.source().begin.line; }

class Parser {
 public:
  Parser(std::string_view source, std::string_view base_dir) : source_(source), base_dir_(base_dir) {}

  core::Expected<EmulatorConfig, std::string> parse(std::string_view text) {
    toml::table root;
    try {
      root = toml::parse(text, std::string(source_));
    } catch (const toml::parse_error& e) {
      return core::Unexpected(fmt::format("{}:{}: {}", source_, e.source().begin.line, e.description()));
    }
    EmulatorConfig config;
    for (const auto& [key, node] : root) {
      const std::string name(key.str());
      if (name == "address") {
        if (!string(node, name, config.address)) return error();
      } else if (name == "actuation_log") {
        if (!string(node, name, config.actuation_log)) return error();
        if (!config.actuation_log.empty() && std::filesystem::path(config.actuation_log).is_relative()) {
          config.actuation_log = (std::filesystem::path(base_dir_) / config.actuation_log).string();
        }
      } else if (name == "seed") {
        int64_t seed = 0;
        if (!integer(node, name, 0, INT64_MAX, seed)) return error();
        config.seed = static_cast<uint64_t>(seed);
      } else if (name == "device") {
        const auto* devices = node.as_array();
        if (devices == nullptr) return fail(node, name, "must be [[device]] tables");
        for (const auto& entry : *devices) {
          const auto* table = entry.as_table();
          if (table == nullptr) return fail(entry, name, "must be [[device]] tables");
          auto device = parse_device(*table);
          if (!device) return error();
          config.devices.push_back(std::move(*device));
        }
      } else {
        return fail(node, name, "unknown key (known: address, actuation_log, seed, [[device]])");
      }
    }
    if (config.devices.empty()) {
      return core::Unexpected(fmt::format("{}: no [[device]] table: nothing to emulate", source_));
    }
    return config;
  }

 private:
  core::Unexpected<std::string> error() { return core::Unexpected(error_); }
  core::Unexpected<std::string> fail(const toml::node& node, std::string_view key, std::string_view what) {
    error_ = fmt::format("{}:{}: {}: {}", source_, line_of(node), key, what);
    return core::Unexpected(error_);
  }
  bool set_error(const toml::node& node, std::string_view key, std::string_view what) {
    fail(node, key, what);
    return false;
  }

  bool string(const toml::node& node, std::string_view key, std::string& out) {
    const auto* value = node.as_string();
    if (value == nullptr) return set_error(node, key, "must be a string");
    out = value->get();
    return true;
  }
  bool integer(const toml::node& node, std::string_view key, int64_t min, int64_t max, int64_t& out) {
    const auto* value = node.as_integer();
    if (value == nullptr || value->get() < min || value->get() > max) {
      return set_error(node, key, fmt::format("must be an integer {}..{}", min, max));
    }
    out = value->get();
    return true;
  }
  bool seconds(const toml::node& node, std::string_view key, double& out) {
    if (const auto* i = node.as_integer()) {
      out = static_cast<double>(i->get());
    } else if (const auto* f = node.as_floating_point()) {
      out = f->get();
    } else {
      return set_error(node, key, "must be a number of seconds");
    }
    if (!(out >= 0 && out < 1e7)) return set_error(node, key, "must be a number of seconds >= 0");
    return true;
  }

  // An attribute value of `kind` (a strip's outlets are plugs).
  bool value(const toml::node& node, routine::DeviceKind kind, std::string_view key, routine::Value& out) {
    const auto* spec = routine::find_attribute(kind, key);
    if (spec == nullptr) return false;
    if (const auto* text = node.as_string()) {
      auto parsed = routine::parse_value(*spec, text->get());
      if (!parsed) return set_error(node, key, parsed.error());
      out = *parsed;
      return true;
    }
    if (const auto* flag = node.as_boolean()) {
      if (spec->type == routine::AttributeType::number) return set_error(node, key, "must be " + spec->allowed());
      out = flag->get();
      return true;
    }
    double number = 0;
    if (const auto* i = node.as_integer()) {
      number = static_cast<double>(i->get());
    } else if (const auto* f = node.as_floating_point()) {
      number = f->get();
    } else {
      return set_error(node, key, "must be " + spec->allowed());
    }
    if (spec->type != routine::AttributeType::number) return set_error(node, key, "must be " + spec->allowed());
    auto parsed = routine::parse_value(*spec, fmt::format("{}", number));
    if (!parsed) return set_error(node, key, parsed.error());
    out = *parsed;
    return true;
  }

  core::Expected<DeviceConfig, std::string> parse_device(const toml::table& table) {
    DeviceConfig device;
    const toml::node* name = table.get("name");
    const toml::node* kind = table.get("kind");
    if (name == nullptr || !string(*name, "name", device.name)) {
      if (name == nullptr) fail(table, "device", "needs name = \"...\"");
      return error();
    }
    if (kind == nullptr || !string(*kind, "kind", device.kind)) {
      if (kind == nullptr) fail(table, "device " + device.name, "needs kind = \"...\"");
      return error();
    }
    routine::DeviceKind model_kind = routine::DeviceKind::plug;
    if (device.kind != "strip") {
      auto parsed = routine::parse_kind(device.kind);
      if (!parsed) {
        return fail(*kind, "kind",
                    fmt::format("unknown kind '{}' (known: {})", device.kind, fmt::join(emulated_kinds(), ", ")));
      }
      model_kind = *parsed;
    }
    for (const auto& [key, node] : table) {
      const std::string k(key.str());
      if (k == "name" || k == "kind") continue;
      if (k == "port") {
        int64_t port = 0;
        if (!integer(node, k, 0, 65535, port)) return error();
        device.port = static_cast<uint16_t>(port);
      } else if (k == "address") {
        if (!string(node, k, device.address)) return error();
      } else if (k == "outlets") {
        int64_t outlets = 0;
        if (device.kind != "strip") return fail(node, k, "only a strip has outlets");
        if (!integer(node, k, 1, 16, outlets)) return error();
        device.outlets = static_cast<int>(outlets);
      } else if (k == "reply_delay_ms") {
        int64_t ms = 0;
        if (!integer(node, k, 0, 3600000, ms)) return error();
        device.reply_delay = std::chrono::milliseconds(ms);
      } else if (k == "random_every") {
        if (!seconds(node, k, device.random_every)) return error();
      } else if (k == "repeat_after") {
        if (!seconds(node, k, device.repeat_after)) return error();
      } else if (k == "timeline") {
        const auto* steps = node.as_array();
        if (steps == nullptr) return fail(node, k, "must be an array of { at = SECONDS, ATTRIBUTE = VALUE, ... }");
        double previous = -1;
        for (const auto& entry : *steps) {
          const auto* step_table = entry.as_table();
          if (step_table == nullptr) return fail(entry, k, "each step is { at = SECONDS, ATTRIBUTE = VALUE, ... }");
          DeviceConfig::Step step;
          bool has_at = false;
          for (const auto& [step_key, step_node] : *step_table) {
            const std::string sk(step_key.str());
            if (sk == "at") {
              if (!seconds(step_node, "timeline.at", step.at)) return error();
              has_at = true;
            } else {
              routine::Value v;
              if (!value(step_node, model_kind, sk, v)) {
                if (error_.empty()) fail(step_node, "timeline." + sk, "not an attribute of a " + device.kind);
                return error();
              }
              step.values[sk] = v;
            }
          }
          if (!has_at) return fail(entry, k, "a step needs at = SECONDS");
          if (step.at < previous) return fail(entry, k, "steps must be in time order");
          previous = step.at;
          device.timeline.push_back(std::move(step));
        }
      } else {
        routine::Value v;
        if (!value(node, model_kind, k, v) || (device.kind == "strip" && k != "power")) {
          if (error_.empty()) {
            fail(node, k,
                 fmt::format("unknown key: not an attribute of a {} nor one of port, address, outlets, "
                             "reply_delay_ms, random_every, repeat_after, timeline",
                             device.kind));
          }
          return error();
        }
        device.initial[k] = v;
      }
    }
    if (device.random_every > 0) {
      bool has_reading = false;
      if (device.kind != "strip") {
        for (const auto& spec : routine::schema(model_kind)) has_reading = has_reading || !spec.writable;
      }
      if (!has_reading) return fail(table, "random_every", "only sensors change at random");
    }
    if (device.repeat_after > 0 && !device.timeline.empty() && device.repeat_after <= device.timeline.back().at) {
      return fail(table, "repeat_after", "must be longer than the timeline's last step");
    }
    return device;
  }

  std::string source_;
  std::string base_dir_;
  std::string error_;
};

}  // namespace

core::Expected<EmulatorConfig, std::string> parse_config(std::string_view toml_text, std::string_view source_name,
                                                         std::string_view base_dir) {
  return Parser(source_name, base_dir).parse(toml_text);
}

core::Expected<EmulatorConfig, std::string> load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return core::Unexpected(fmt::format("{}: cannot read the file", path));
  std::stringstream text;
  text << in.rdbuf();
  const auto dir = std::filesystem::path(path).parent_path();
  return parse_config(text.str(), path, dir.empty() ? "." : dir.string());
}

core::Expected<DeviceConfig, std::string> parse_device_option(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (colon == std::string_view::npos || parts.size() == 3) {
      if (colon != std::string_view::npos) parts.push_back(text.substr(colon + 1));
      break;
    }
    start = colon + 1;
  }
  if (parts.size() < 3) return core::Unexpected(fmt::format("--device '{}': expected KIND:NAME:PORT[:ADDRESS]", text));
  DeviceConfig device;
  device.kind = std::string(parts[0]);
  device.name = std::string(parts[1]);
  const auto kinds = emulated_kinds();
  if (std::find(kinds.begin(), kinds.end(), device.kind) == kinds.end()) {
    return core::Unexpected(
        fmt::format("--device '{}': unknown kind '{}' (known: {})", text, device.kind, fmt::join(kinds, ", ")));
  }
  if (device.name.empty()) return core::Unexpected(fmt::format("--device '{}': empty name", text));
  unsigned port = 0;
  auto [end, ec] = std::from_chars(parts[2].data(), parts[2].data() + parts[2].size(), port);
  if (ec != std::errc() || end != parts[2].data() + parts[2].size() || port > 65535) {
    return core::Unexpected(fmt::format("--device '{}': port '{}' is not a number 0..65535", text, parts[2]));
  }
  device.port = static_cast<uint16_t>(port);
  if (parts.size() == 4) device.address = std::string(parts[3]);
  return device;
}

}  // namespace mesh::meshemu
