#include "agent/catalog_file.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "agent/toml_source.h"
#include "core/sha256.h"

namespace mesh::agent {
namespace {

constexpr std::array<std::string_view, 6> kDeviceKeys = {"id", "kind", "location", "room", "floor", "driver"};
constexpr std::string_view kKeys = "id, kind, location, room, floor, driver";
constexpr std::array<std::string_view, 9> kRoutineKeys = {"id",      "trigger", "window", "days",   "min_retrigger_s",
                                                          "enabled", "lock",    "uses",   "command"};
constexpr std::string_view kRoutineKeyList = "id, trigger, window, days, min_retrigger_s, enabled, lock, uses, command";
constexpr std::array<std::string_view, 5> kCommandKeys = {"device", "set", "duration_s", "must", "undo"};
constexpr std::string_view kCommandKeyList = "device, set, duration_s, must, undo";

std::string kinds() {
  std::string out;
  for (routine::DeviceKind kind : routine::all_kinds()) {
    out += fmt::format("{}{}", out.empty() ? "" : ", ", routine::to_string(kind));
  }
  return out;
}

bool looks_like_uri(std::string_view uri) {
  const size_t colon = uri.find("://");
  if (colon == std::string_view::npos || colon == 0 || colon + 3 >= uri.size()) return false;
  for (size_t i = 0; i < colon; ++i) {
    const char c = uri[i];
    const bool ok = (c >= 'a' && c <= 'z') || (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
    if (!ok) return false;
  }
  for (char c : uri) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

class CatalogParser {
 public:
  CatalogParser(std::string source, const routine::DeviceCatalog* known_devices)
      : source_(std::move(source)), known_devices_(known_devices) {}

  core::Expected<CatalogFile, std::string> parse(std::string_view text) {
    toml::table root;
    try {
      root = toml::parse(text, source_);
    } catch (const toml::parse_error& e) {
      const auto& begin = e.source().begin;
      return core::Unexpected(fmt::format(
          "{}:{}:{}: TOML syntax error: {}. Fix: correct the syntax there (strings need double quotes, each device "
          "is a [[device]] table).",
          source_, begin.line == 0 ? 1 : begin.line, begin.column, e.description()));
    }
    CatalogFile file;
    const auto digest = core::sha256(text);
    file.digest.assign(digest.begin(), digest.end());
    for (const auto& [key, node] : root) {
      if (key.str() != "device" && key.str() != "routine" && key.str() != "precondition") {
        fail(line_of(node), key.str(), "unknown table",
             "a catalog holds [[device]], [[routine]] and [[precondition]] tables only");
      }
    }
    if (const toml::node* devices = root.get("device")) {
      const toml::array* list = devices->as_array();
      if (list == nullptr) {
        fail(line_of(*devices), "device", "expected [[device]] tables", "write each device as a [[device]] table");
      } else {
        for (const toml::node& entry : *list) {
          if (const toml::table* table = entry.as_table()) {
            read_device(*table, file);
          } else {
            fail(line_of(entry), "device", "expected a table", "write each device as a [[device]] table");
          }
        }
      }
    }
    if (const toml::node* routines = root.get("routine")) {
      const toml::array* list = routines->as_array();
      if (list == nullptr) {
        fail(line_of(*routines), "routine", "expected [[routine]] tables", "write each routine as a [[routine]] table");
      } else {
        for (const toml::node& entry : *list) {
          if (const toml::table* table = entry.as_table()) {
            read_routine(*table, file);
          } else {
            fail(line_of(entry), "routine", "expected a table", "write each routine as a [[routine]] table");
          }
        }
      }
    }
    // The rules file's parser reads [[precondition]] tables, so a rule means
    // the same in a catalog as in a rules file; the file's devices and the
    // mesh's are what its conditions may name.
    if (root.contains("precondition")) {
      auto rules =
          routine::parse_precondition_rule_specs(text, source_, usable_devices(file), routine::RuleFileKind::catalog);
      if (rules) {
        file.preconditions = std::move(*rules);
      } else {
        errors_.push_back(rules.error());
      }
    }
    if (!errors_.empty()) {
      std::string message;
      for (const auto& error : errors_) message += (message.empty() ? "" : "\n") + error;
      return core::Unexpected(std::move(message));
    }
    return file;
  }

 private:
  void fail(uint32_t line, std::string_view key, std::string_view problem, std::string_view fix) {
    errors_.push_back(fmt::format("{}:{}: {}: {}. Fix: {}.", source_, line, key, problem, fix));
  }

  std::optional<std::string> text(const toml::table& table, std::string_view key, std::string_view where,
                                  bool required) {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
      if (required) {
        fail(line_of(table), fmt::format("{}.{}", where, key), "missing",
             fmt::format("add {} = \"...\" to this {}", key, table_name_));
      }
      return std::nullopt;
    }
    if (!node->is_string()) {
      fail(line_of(*node), fmt::format("{}.{}", where, key), "expected a string", "write it in double quotes");
      return std::nullopt;
    }
    return node->as_string()->get();
  }

  void read_device(const toml::table& table, CatalogFile& file) {
    table_name_ = "[[device]]";
    const uint32_t line = line_of(table);
    std::string where = "device";
    routine::DeviceSpec spec;
    bool ok = true;
    if (auto id = text(table, "id", where, true)) {
      if (auto problem = routine::check_device_id(*id)) {
        fail(line_of(*table.get("id")), "device.id", *problem, "use lower-case letters, digits, '_', '.' and '-'");
        ok = false;
      } else {
        spec.id = *id;
        where = fmt::format("device {}", *id);
      }
    } else {
      ok = false;
    }
    for (const auto& [key, node] : table) {
      const std::string_view name = key.str();
      if (std::find(kDeviceKeys.begin(), kDeviceKeys.end(), name) == kDeviceKeys.end()) {
        fail(line_of(node), fmt::format("{}.{}", where, name), "unknown key",
             fmt::format("remove it; a [[device]] accepts {}", kKeys));
        ok = false;
      }
    }
    if (auto kind = text(table, "kind", where, true)) {
      if (auto parsed = routine::parse_kind(*kind)) {
        spec.kind = *parsed;
      } else {
        fail(line_of(*table.get("kind")), fmt::format("{}.kind", where), fmt::format("unknown kind \"{}\"", *kind),
             fmt::format("use one of {}", kinds()));
        ok = false;
      }
    } else {
      ok = false;
    }
    if (const toml::node* location = table.get("location")) {
      const toml::array* coordinates = location->as_array();
      bool valid = coordinates != nullptr && coordinates->size() == 3;
      for (size_t i = 0; valid && i < 3; ++i) {
        const auto value = coordinates->get(i)->value<double>();
        valid = value.has_value() && std::isfinite(*value) && std::abs(*value) <= 500000.0;
        if (valid) spec.location[i] = *value;
      }
      if (!valid) {
        fail(line_of(*location), fmt::format("{}.location", where), "expected [x, y, z] in metres",
             "write three numbers, e.g. location = [4.0, 1.5, 0.0]");
        ok = false;
      }
    } else {
      fail(line, fmt::format("{}.location", where), "missing", "add location = [x, y, z] in metres");
      ok = false;
    }
    spec.room = text(table, "room", where, false).value_or("");
    spec.floor = text(table, "floor", where, false).value_or("");
    if (auto driver = text(table, "driver", where, true)) {
      if (!looks_like_uri(*driver)) {
        fail(line_of(*table.get("driver")), fmt::format("{}.driver", where),
             fmt::format("\"{}\" is not a driver URI", *driver),
             "write SCHEME://ADDRESS, e.g. kasa://10.0.0.20, z2m://broker/zigbee2mqtt/hall_light");
        ok = false;
      } else {
        spec.driver = *driver;
      }
    } else {
      ok = false;
    }
    if (!ok) return;
    if (const auto seen = first_line_.find(spec.id); seen != first_line_.end()) {
      fail(line, fmt::format("device {}", spec.id), fmt::format("defined twice (first at line {})", seen->second),
           "keep one definition of each device id");
      return;
    }
    first_line_[spec.id] = line;
    file.devices.push_back(std::move(spec));
  }

  // Reports keys of `table` not in `known`; false if there were any.
  template <size_t N>
  bool only_keys(const toml::table& table, const std::array<std::string_view, N>& known, std::string_view where,
                 std::string_view list) {
    bool ok = true;
    for (const auto& [key, node] : table) {
      if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
        fail(line_of(node), fmt::format("{}.{}", where, key.str()), "unknown key",
             fmt::format("remove it; a {} accepts {}", table_name_, list));
        ok = false;
      }
    }
    return ok;
  }

  // A number of seconds in [min, max] (min excluded if `positive`).
  std::optional<core::Duration> seconds(const toml::node& node, std::string_view key, double max, bool positive) {
    const auto value = node.value<double>();
    if (!node.is_number() || !value || !std::isfinite(*value) || *value < 0 || (positive && *value == 0) ||
        *value > max) {
      fail(line_of(node), key, "expected a number of seconds",
           fmt::format("write a number {} {}, e.g. 300", positive ? "above 0 and at most" : "from 0 to",
                       routine::format_value(routine::Value{max})));
      return std::nullopt;
    }
    return core::from_seconds(*value);
  }

  std::optional<std::vector<std::string>> strings(const toml::node& node, std::string_view key,
                                                  std::string_view example) {
    std::vector<std::string> out;
    if (const auto* single = node.as_string()) {
      out.push_back(single->get());
      return out;
    }
    const toml::array* list = node.as_array();
    bool ok = list != nullptr;
    if (ok) {
      for (const toml::node& item : *list) {
        if (!item.is_string()) ok = false;
        if (ok) out.push_back(item.as_string()->get());
      }
    }
    if (!ok) {
      fail(line_of(node), key, "expected a list of strings", fmt::format("write e.g. {}", example));
      return std::nullopt;
    }
    return out;
  }

  // The devices a routine of this file may use: those of the file, over the
  // mesh's when given.
  routine::DeviceCatalog usable_devices(const CatalogFile& file) const {
    routine::DeviceCatalog devices = known_devices_ != nullptr ? *known_devices_ : routine::DeviceCatalog{};
    for (const auto& device : file.devices) devices[device.id] = device;
    return devices;
  }

  std::string_view add_device_fix() const {
    return known_devices_ != nullptr
               ? "use a device of the mesh's catalog (meshctl devices lists them), or add it first with meshctl device "
                 "add"
               : "use a device of this file, or define it with a [[device]] table";
  }

  void read_routine(const toml::table& table, CatalogFile& file) {
    table_name_ = "[[routine]]";
    const uint32_t line = line_of(table);
    std::string where = "routine";
    routine::RoutineSpec spec;
    bool ok = true;
    if (auto id = text(table, "id", where, true)) {
      if (auto problem = routine::check_routine_id(*id)) {
        fail(line_of(*table.get("id")), "routine.id", *problem, "use lower-case letters, digits, '_', '.' and '-'");
        ok = false;
      } else {
        spec.id = *id;
        where = fmt::format("routine {}", *id);
      }
    } else {
      ok = false;
    }
    ok = only_keys(table, kRoutineKeys, where, kRoutineKeyList) && ok;
    const routine::DeviceCatalog devices = usable_devices(file);
    if (auto trigger = text(table, "trigger", where, true)) {
      auto parsed = routine::parse_trigger(*trigger, devices);
      if (parsed) {
        spec.trigger_text = *trigger;
        spec.trigger = std::move(*parsed);
      } else {
        const bool unknown_device = parsed.error().message.rfind("no device ", 0) == 0;
        fail(line_of(*table.get("trigger")), fmt::format("{}.trigger", where), parsed.error().text(),
             unknown_device ? add_device_fix()
                            : "write comparisons DEVICE.ATTR OP VALUE (OP one of == != < <= > >=) joined by and, or, "
                              "not and parentheses, or manual");
        ok = false;
      }
    } else {
      ok = false;
    }
    if (auto window = text(table, "window", where, false)) {
      if (auto parsed = routine::parse_window(*window)) {
        spec.trigger.window = *parsed;
      } else {
        fail(line_of(*table.get("window")), fmt::format("{}.window", where), parsed.error(),
             "write HH:MM-HH:MM, e.g. window = \"22:00-06:00\"");
        ok = false;
      }
    }
    if (const toml::node* days = table.get("days")) {
      const std::string key = fmt::format("{}.days", where);
      if (auto names = strings(*days, key, "days = [\"mon..fri\"] or days = [\"sat\", \"sun\"]")) {
        spec.trigger.days.mask = 0;
        for (const std::string& name : *names) {
          if (auto parsed = routine::parse_days(name)) {
            spec.trigger.days.mask = static_cast<uint8_t>(spec.trigger.days.mask | parsed->mask);
          } else {
            fail(line_of(*days), key, parsed.error(),
                 "use mon, tue, wed, thu, fri, sat, sun or ranges such as mon..fri");
            ok = false;
          }
        }
        if (names->empty()) {
          fail(line_of(*days), key, "an empty list names no day", "list days, or leave days out to mean every day");
          ok = false;
        }
      } else {
        ok = false;
      }
    }
    if (spec.trigger.manual && (spec.trigger.window || !spec.trigger.days.every())) {
      fail(line, fmt::format("{}.trigger", where),
           "a manual routine runs only on demand, so a window or days mean "
           "nothing",
           "remove window and days, or write a trigger condition");
      ok = false;
    }
    if (const toml::node* node = table.get("min_retrigger_s")) {
      if (auto value = seconds(*node, fmt::format("{}.min_retrigger_s", where),
                               core::to_seconds(routine::kMaxMinRetrigger), false)) {
        spec.min_retrigger = *value;
      } else {
        ok = false;
      }
    }
    if (const toml::node* node = table.get("enabled")) {
      if (const auto value = node->value<bool>(); node->is_boolean() && value) {
        spec.enabled = *value;
      } else {
        fail(line_of(*node), fmt::format("{}.enabled", where), "expected true or false", "write enabled = false");
        ok = false;
      }
    }
    if (auto lock = text(table, "lock", where, false)) {
      if (auto strategy = routine::parse_lock_strategy(*lock)) {
        spec.lock_strategy = *strategy;
      } else {
        fail(line_of(*table.get("lock")), fmt::format("{}.lock", where), fmt::format("unknown strategy \"{}\"", *lock),
             "use default (the mesh's), sla (one lock at a time) or ola (all at once)");
        ok = false;
      }
    }
    if (const toml::node* uses = table.get("uses")) {
      const std::string key = fmt::format("{}.uses", where);
      if (auto names = strings(*uses, key, "uses = [\"pump\"]")) {
        spec.uses = std::move(*names);
      } else {
        ok = false;
      }
    }
    const toml::node* commands = table.get("command");
    const toml::array* list = commands != nullptr ? commands->as_array() : nullptr;
    if (commands == nullptr || (list != nullptr && list->empty())) {
      fail(line, fmt::format("{}.command", where), "missing",
           "add at least one [[routine.command]] table with device and set after this [[routine]]");
      ok = false;
    } else if (list == nullptr) {
      fail(line_of(*commands), fmt::format("{}.command", where), "expected [[routine.command]] tables",
           "write each command as a [[routine.command]] table");
      ok = false;
    } else {
      for (size_t i = 0; i < list->size(); ++i) {
        const toml::node& entry = *list->get(i);
        const std::string command_where = fmt::format("{}.command[{}]", where, i + 1);
        const toml::table* command_table = entry.as_table();
        if (command_table == nullptr) {
          fail(line_of(entry), command_where, "expected a table", "write each command as a [[routine.command]] table");
          ok = false;
          continue;
        }
        auto command = read_command(*command_table, command_where, devices);
        table_name_ = "[[routine]]";
        if (command) {
          spec.commands.push_back(std::move(*command));
        } else {
          ok = false;
        }
      }
    }
    if (!ok) return;
    // What the sections above cannot see alone (limits on counts and names).
    if (auto problem = routine::check(spec, devices)) {
      const std::string prefix = fmt::format("routine {}: ", spec.id);
      if (problem->rfind(prefix, 0) == 0) problem->erase(0, prefix.size());
      fail(line, where, *problem, "correct the routine as the message says");
      return;
    }
    if (const auto seen = first_routine_line_.find(spec.id); seen != first_routine_line_.end()) {
      fail(line, where, fmt::format("defined twice (first at line {})", seen->second),
           "keep one definition of each routine id");
      return;
    }
    first_routine_line_[spec.id] = line;
    file.routines.push_back(std::move(spec));
  }

  std::optional<routine::RoutineCommand> read_command(const toml::table& table, const std::string& where,
                                                      const routine::DeviceCatalog& devices) {
    table_name_ = "[[routine.command]]";
    bool ok = only_keys(table, kCommandKeys, where, kCommandKeyList);
    routine::RoutineCommand command;
    const routine::DeviceSpec* device = nullptr;
    if (auto id = text(table, "device", where, true)) {
      command.device = *id;
      const auto it = devices.find(*id);
      if (it == devices.end()) {
        fail(line_of(*table.get("device")), fmt::format("{}.device", where),
             fmt::format("no device {} in the catalog", *id), add_device_fix());
        ok = false;
      } else {
        device = &it->second;
      }
    } else {
      ok = false;
    }
    const toml::node* set = table.get("set");
    const toml::table* values = set != nullptr ? set->as_table() : nullptr;
    if (values == nullptr || values->empty()) {
      fail(set != nullptr ? line_of(*set) : line_of(table), fmt::format("{}.set", where),
           set == nullptr ? "missing" : "expected a table of attribute values",
           "write e.g. set = { power = \"on\", brightness = 30 }");
      ok = false;
    } else if (device != nullptr) {
      ok = read_values(*values, fmt::format("{}.set", where), *device, command.values) && ok;
    }
    if (const toml::node* undo = table.get("undo")) {
      const toml::table* undo_values = undo->as_table();
      if (undo_values == nullptr || undo_values->empty()) {
        fail(line_of(*undo), fmt::format("{}.undo", where), "expected a table of attribute values",
             "write e.g. undo = { power = \"off\" }, naming attributes the command sets, or leave undo out to "
             "restore what they were before");
        ok = false;
      } else if (device != nullptr) {
        ok = read_values(*undo_values, fmt::format("{}.undo", where), *device, command.undo) && ok;
      }
    }
    if (const toml::node* node = table.get("duration_s")) {
      if (auto value = seconds(*node, fmt::format("{}.duration_s", where),
                               core::to_seconds(routine::kMaxCommandDuration), true)) {
        command.duration = *value;
      } else {
        ok = false;
      }
    }
    if (const toml::node* node = table.get("must")) {
      if (const auto value = node->value<bool>(); node->is_boolean() && value) {
        command.must = *value;
      } else {
        fail(line_of(*node), fmt::format("{}.must", where), "expected true or false",
             "write must = false for a best-effort command");
        ok = false;
      }
    }
    if (!ok) return std::nullopt;
    return command;
  }

  // Reads a table of attribute values of `device` (a command's `set` or
  // `undo`) into `out`; reports each bad one at its own line.
  bool read_values(const toml::table& values, const std::string& key, const routine::DeviceSpec& device,
                   routine::Attributes& out) {
    bool ok = true;
    for (const auto& [attribute_key, node] : values) {
      const std::string name(attribute_key.str());
      const routine::AttributeSpec* attribute = routine::find_attribute(device.kind, name);
      routine::Value value;
      std::optional<std::string> problem;
      if (attribute == nullptr) {
        problem = routine::check_command(device, {{name, true}});
      } else if (const auto* string = node.as_string()) {
        auto parsed = routine::parse_value(*attribute, string->get());
        if (parsed) {
          value = *parsed;
        } else {
          problem = fmt::format("device {}: {}", device.id, parsed.error());
        }
      } else if (const auto flag = node.value<bool>(); node.is_boolean() && flag) {
        value = *flag;
      } else if (const auto number = node.value<double>(); node.is_number() && number) {
        value = *number;
      } else {
        problem = fmt::format("device {}: {} must be {}", device.id, name, attribute->allowed());
      }
      if (!problem) problem = routine::check_command(device, {{name, value}});
      if (problem) {
        fail(line_of(node), fmt::format("{}.{}", key, name), *problem,
             attribute == nullptr ? "set only the attributes the message lists"
                                  : fmt::format("write {} = {}", name, attribute->allowed()));
        ok = false;
      } else {
        out[name] = value;
      }
    }
    return ok;
  }

  std::string source_;
  const routine::DeviceCatalog* known_devices_;
  std::string_view table_name_ = "[[device]]";
  std::vector<std::string> errors_;
  std::map<std::string, uint32_t> first_line_;
  std::map<std::string, uint32_t> first_routine_line_;
};

}  // namespace

core::Expected<CatalogFile, std::string> parse_catalog(std::string_view text, const std::string& source,
                                                       const routine::DeviceCatalog* known_devices) {
  return CatalogParser(source, known_devices).parse(text);
}

core::Expected<CatalogFile, std::string> load_catalog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::Unexpected(fmt::format("cannot read catalog file \"{}\": {}", path, std::strerror(errno)));
  std::string text(kMaxCatalogBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return core::Unexpected(fmt::format("cannot read catalog file \"{}\": read error", path));
  if (text.size() > kMaxCatalogBytes) {
    return core::Unexpected(
        fmt::format("catalog file \"{}\" is larger than {} bytes; is it the right file?", path, kMaxCatalogBytes));
  }
  return parse_catalog(text, path);
}

}  // namespace mesh::agent
