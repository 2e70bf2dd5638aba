#include "sim/routine_workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "core/rng.h"
#include "routine/routine_group_state.h"
#include "routine/routine_model.h"

namespace mesh::sim {
namespace {

// A run's arrivals are matched to its routine groups' invocation records,
// and a group keeps only this many finished ones.
static_assert(kMaxArrivalsPerRoutine <= routine::RoutineGroupState::kMaxFinished);

constexpr double kMaxZipf = 10.0;
constexpr double kMaxShrink = 1000.0;
// The salt of the generator's stream: a run seed also drives the mesh, and
// the workload must not shift when the mesh draws differently.
constexpr uint64_t kGeneratorSalt = 0x5afe'4043;
// The failures' own stream: a workload's routines and arrivals are the same
// whatever its device_failure_ratio, so runs at several ratios compare.
constexpr uint64_t kFailureSalt = 0xfa11'0e75;

// Reads one file's TOML tables; every failure names file:line:column, the
// key, the problem and the fix.
class WorkloadReader {
 public:
  explicit WorkloadReader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::source_region& where, std::string_view key, std::string_view problem,
                         std::string_view fix) const {
    throw WorkloadError(
        fmt::format("{}:{}:{}: {}: {}; {}", file_, where.begin.line, where.begin.column, key, problem, fix));
  }

  void check_keys(const toml::table& table, std::string_view section,
                  std::initializer_list<std::string_view> allowed) const {
    for (auto&& [key, node] : table) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      fail(key.source(), qualified(section, key.str()), "unknown key",
           fmt::format("remove it or use one of: {}", fmt::join(allowed, ", ")));
    }
  }

  double number(const toml::table& table, std::string_view section, std::string_view key, double fallback, double lo,
                double hi) const {
    const toml::node* node = table.get(key);
    if (node == nullptr) return fallback;
    const std::string name = qualified(section, key);
    double value = 0.0;
    if (auto i = node->as_integer()) {
      value = static_cast<double>(i->get());
    } else if (auto f = node->as_floating_point()) {
      value = f->get();
    } else {
      fail(node->source(), name, "must be a number", fmt::format("write e.g. {} = {}", key, lo));
    }
    if (!std::isfinite(value) || value < lo || value > hi) {
      fail(node->source(), name, fmt::format("{} is out of range", value),
           fmt::format("use a number in [{}, {}]", lo, hi));
    }
    return value;
  }

  int64_t integer(const toml::table& table, std::string_view section, std::string_view key, int64_t fallback,
                  int64_t lo, int64_t hi) const {
    const toml::node* node = table.get(key);
    if (node == nullptr) return fallback;
    return integer_value(*node, qualified(section, key), key, lo, hi);
  }

  int64_t integer_value(const toml::node& node, std::string_view name, std::string_view key, int64_t lo,
                        int64_t hi) const {
    auto i = node.as_integer();
    if (!i) fail(node.source(), name, "must be an integer", fmt::format("write e.g. {} = {}", key, lo));
    const int64_t value = i->get();
    if (value < lo || value > hi) {
      fail(node.source(), name, fmt::format("{} is out of range", value),
           fmt::format("use an integer in [{}, {}]", lo, hi));
    }
    return value;
  }

  const toml::node& required(const toml::table& table, std::string_view section, std::string_view key,
                             std::string_view example) const {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
      fail(table.source(), qualified(section, key), "missing key", fmt::format("add {}", example));
    }
    return *node;
  }

  std::string string_value(const toml::node& node, std::string_view name, std::string_view example) const {
    auto s = node.as_string();
    if (!s) fail(node.source(), name, "must be a string", fmt::format("write e.g. {}", example));
    return s->get();
  }

  static std::string qualified(std::string_view section, std::string_view key) {
    return section.empty() ? std::string(key) : fmt::format("{}.{}", section, key);
  }

 private:
  std::string file_;
};

WorkloadGenerator read_generator(const WorkloadReader& r, const toml::table& t) {
  r.check_keys(t, "generator",
               {"routines", "devices", "zipf", "commands_min", "commands_max", "long_share", "long_ms", "short_ms",
                "must_share", "load", "shrink", "device_failure_ratio", "seed"});
  WorkloadGenerator g;
  g.routines = static_cast<int>(r.integer(t, "generator", "routines", g.routines, 1, kMaxWorkloadRoutines));
  g.devices = static_cast<int>(r.integer(t, "generator", "devices", g.devices, 1, kMaxWorkloadDevices));
  g.zipf = r.number(t, "generator", "zipf", g.zipf, 0.0, kMaxZipf);
  const auto max_commands = static_cast<int64_t>(routine::kMaxRoutineCommands);
  g.commands_min = static_cast<int>(r.integer(t, "generator", "commands_min", g.commands_min, 1, max_commands));
  if (g.commands_min > g.devices) {
    r.fail(t.get("commands_min")->source(), "generator.commands_min",
           fmt::format("{} exceeds devices = {} (a routine uses each device at most once)", g.commands_min, g.devices),
           "lower commands_min or raise devices");
  }
  // Unless given, at most the default and at most one command per device.
  g.commands_max = static_cast<int>(r.integer(
      t, "generator", "commands_max", std::max(g.commands_min, std::min(g.commands_max, g.devices)), 1, max_commands));
  if (g.commands_max < g.commands_min) {
    r.fail(t.get("commands_max")->source(), "generator.commands_max",
           fmt::format("{} is below commands_min = {}", g.commands_max, g.commands_min),
           "make commands_max at least commands_min");
  }
  if (g.commands_max > g.devices) {
    r.fail(t.get("commands_max")->source(), "generator.commands_max",
           fmt::format("{} exceeds devices = {} (a routine uses each device at most once)", g.commands_max, g.devices),
           "lower commands_max or raise devices");
  }
  g.long_share = r.number(t, "generator", "long_share", g.long_share, 0.0, 1.0);
  g.long_duration = std::chrono::milliseconds(
      r.integer(t, "generator", "long_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(g.long_duration).count(), 0, kMaxCommandMs));
  g.short_duration = std::chrono::milliseconds(
      r.integer(t, "generator", "short_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(g.short_duration).count(), 0, kMaxCommandMs));
  g.must_share = r.number(t, "generator", "must_share", g.must_share, 0.0, 1.0);
  const toml::node* load = t.get("load");
  const toml::node* shrink = t.get("shrink");
  if (load != nullptr && shrink != nullptr) {
    r.fail(shrink->source(), "generator.shrink", "given together with load (load = 1 / shrink)",
           "keep one of load and shrink");
  }
  if (load != nullptr) g.shrink = 1.0 / r.number(t, "generator", "load", 1.0, 1.0 / kMaxShrink, kMaxShrink);
  if (shrink != nullptr) g.shrink = r.number(t, "generator", "shrink", g.shrink, 1.0 / kMaxShrink, kMaxShrink);
  g.device_failure_ratio = r.number(t, "generator", "device_failure_ratio", g.device_failure_ratio, 0.0, 1.0);
  if (t.get("seed") != nullptr) g.seed = static_cast<uint64_t>(r.integer(t, "generator", "seed", 0, 0, INT64_MAX));
  return g;
}

// A command or initial-state value as the device's schema types it: TOML
// booleans and numbers as themselves, strings as the schema writes values
// ("on", "21.5").
FactoryGenerator read_factory(const WorkloadReader& r, const toml::table& t) {
  r.check_keys(
      t, "factory",
      {"stages", "local_devices", "shared_devices", "global_devices", "local_share", "neighbour_share", "global_share",
       "routines_per_stage", "commands_min", "commands_max", "command_ms", "shift_ms", "must_share", "seed"});
  FactoryGenerator f;
  auto count = [&](std::string_view key, int fallback, int lo, int hi) {
    return static_cast<int>(r.integer(t, "factory", key, fallback, lo, hi));
  };
  f.stages = count("stages", f.stages, 1, kMaxWorkloadRoutines);
  f.local_devices = count("local_devices", f.local_devices, 0, kMaxWorkloadDevices);
  f.shared_devices = count("shared_devices", f.shared_devices, 0, kMaxWorkloadDevices);
  f.global_devices = count("global_devices", f.global_devices, 0, kMaxWorkloadDevices);
  if (f.devices() < 1 || f.devices() > kMaxWorkloadDevices) {
    r.fail(t.source(), "factory", fmt::format("makes {} devices", f.devices()),
           fmt::format("choose stages x local_devices + (stages - 1) x shared_devices + global_devices in [1, {}]",
                       kMaxWorkloadDevices));
  }
  f.local_share = r.number(t, "factory", "local_share", f.local_share, 0.0, 1.0);
  f.neighbour_share = r.number(t, "factory", "neighbour_share", f.neighbour_share, 0.0, 1.0);
  f.global_share = r.number(t, "factory", "global_share", f.global_share, 0.0, 1.0);
  if (std::abs(f.local_share + f.neighbour_share + f.global_share - 1.0) > 1e-9) {
    r.fail(t.source(), "factory",
           fmt::format("local_share + neighbour_share + global_share is {}",
                       f.local_share + f.neighbour_share + f.global_share),
           "make the three shares sum to 1");
  }
  f.routines_per_stage = count("routines_per_stage", f.routines_per_stage, 1, kMaxWorkloadRoutines);
  if (f.routines() > kMaxWorkloadRoutines) {
    r.fail(t.source(), "factory", fmt::format("makes {} routines", f.routines()),
           fmt::format("keep stages x routines_per_stage at most {}", kMaxWorkloadRoutines));
  }
  constexpr int max_commands = 32;
  f.commands_min = count("commands_min", f.commands_min, 1, max_commands);
  f.commands_max = count("commands_max", std::max(f.commands_min, f.commands_max), 1, max_commands);
  if (f.commands_max < f.commands_min) {
    r.fail(t.get("commands_max")->source(), "factory.commands_max",
           fmt::format("{} is below commands_min ({})", f.commands_max, f.commands_min),
           "make commands_max at least commands_min");
  }
  f.command_duration = std::chrono::milliseconds(
      r.integer(t, "factory", "command_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(f.command_duration).count(), 1, kMaxCommandMs));
  f.shift = std::chrono::milliseconds(r.integer(t, "factory", "shift_ms",
                                                std::chrono::duration_cast<std::chrono::milliseconds>(f.shift).count(),
                                                1, kMaxArrivalMs));
  const int64_t most = static_cast<int64_t>(kMaxArrivalsPerRoutine) * f.routines_per_stage;
  if (f.most_arrivals_per_stage() > most) {
    const toml::node* shift = t.get("shift_ms");
    r.fail(shift != nullptr ? shift->source() : t.source(), "factory.shift_ms",
           fmt::format("lets a worker start up to {} routines, more than its {} routines x {} arrivals each",
                       f.most_arrivals_per_stage(), f.routines_per_stage, kMaxArrivalsPerRoutine),
           "shorten shift_ms, or raise routines_per_stage, commands_min or command_ms");
  }
  f.must_share = r.number(t, "factory", "must_share", f.must_share, 0.0, 1.0);
  if (t.get("seed") != nullptr) f.seed = static_cast<uint64_t>(r.integer(t, "factory", "seed", 0, 0, INT64_MAX));
  return f;
}

routine::Attributes read_attribute_values(const WorkloadReader& r, const toml::node& node, std::string_view name,
                                          const routine::DeviceSpec& device) {
  const toml::table* table = node.as_table();
  if (table == nullptr || table->empty()) {
    r.fail(node.source(), name, "must be a non-empty table of attribute values",
           "write e.g. { power = \"on\", brightness = 40 }");
  }
  routine::Attributes values;
  for (auto&& [key, value] : *table) {
    const std::string attribute(key.str());
    const routine::AttributeSpec* spec = routine::find_attribute(device.kind, attribute);
    if (spec == nullptr || !spec->writable) {
      std::vector<std::string_view> writable;
      for (const auto& a : routine::schema(device.kind)) {
        if (a.writable) writable.push_back(a.name);
      }
      r.fail(key.source(), WorkloadReader::qualified(name, attribute),
             fmt::format("{} has no writable attribute {}", routine::to_string(device.kind), attribute),
             fmt::format("use one of: {}", fmt::join(writable, ", ")));
    }
    if (auto b = value.as_boolean()) {
      values[attribute] = b->get();
    } else if (auto i = value.as_integer()) {
      values[attribute] = static_cast<double>(i->get());
    } else if (auto f = value.as_floating_point()) {
      values[attribute] = f->get();
    } else if (auto s = value.as_string()) {
      auto parsed = routine::parse_value(*spec, s->get());
      if (!parsed) {
        r.fail(value.source(), WorkloadReader::qualified(name, attribute), parsed.error(),
               fmt::format("write {}", spec->allowed()));
      }
      values[attribute] = parsed.value();
    } else {
      r.fail(value.source(), WorkloadReader::qualified(name, attribute), "must be a boolean, number or string",
             fmt::format("write {}", spec->allowed()));
    }
  }
  if (const auto problem = routine::check_command(device, values)) {
    r.fail(node.source(), name, *problem, "use values the device's kind allows");
  }
  return values;
}

// What check_command needs of a device: its id and kind.
routine::DeviceSpec device_spec_of(const WorkloadDevice& device) {
  routine::DeviceSpec spec;
  spec.id = device.id;
  spec.kind = device.kind;
  return spec;
}

const toml::array& array_of_tables(const WorkloadReader& r, const toml::node& node, std::string_view name) {
  const toml::array* array = node.as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    r.fail(node.source(), name, "must be an array of tables", fmt::format("write each entry as [[{}]]", name));
  }
  return *array;
}

WorkloadDevice read_device(const WorkloadReader& r, const toml::table& t, const std::string& section) {
  r.check_keys(t, section, {"id", "kind", "initial"});
  WorkloadDevice device;
  device.id = r.string_value(r.required(t, section, "id", "id = \"hall_light\""), section + ".id", "id = \"hall\"");
  if (const auto problem = routine::check_device_id(device.id)) {
    r.fail(t.get("id")->source(), section + ".id", *problem, "use [a-z0-9_.-]+, e.g. id = \"hall_light\"");
  }
  const toml::node& kind_node = r.required(t, section, "kind", "kind = \"dimmer\"");
  const std::string kind_text = r.string_value(kind_node, section + ".kind", "kind = \"dimmer\"");
  std::vector<std::string_view> actuators;
  for (routine::DeviceKind kind : routine::all_kinds()) {
    if (!initial_state_of(kind).empty()) actuators.push_back(routine::to_string(kind));
  }
  const auto kind = routine::parse_kind(kind_text);
  if (!kind || initial_state_of(*kind).empty()) {
    r.fail(kind_node.source(), section + ".kind", fmt::format("\"{}\" is not a kind a routine can command", kind_text),
           fmt::format("use one of: {}", fmt::join(actuators, ", ")));
  }
  device.kind = *kind;
  device.initial = initial_state_of(device.kind);
  if (const toml::node* initial = t.get("initial")) {
    for (auto& [attribute, value] : read_attribute_values(r, *initial, section + ".initial", device_spec_of(device))) {
      device.initial[attribute] = value;
    }
  }
  return device;
}

std::vector<core::Duration> read_arrival_times(const WorkloadReader& r, const toml::table& t,
                                               const std::string& section) {
  const toml::node& node = r.required(t, section, "at_ms", "at_ms = 1500 (or a list: at_ms = [0, 60000])");
  const std::string name = section + ".at_ms";
  std::vector<core::Duration> times;
  if (const toml::array* list = node.as_array()) {
    if (list->empty() || list->size() > kMaxArrivalsPerRoutine) {
      r.fail(node.source(), name, fmt::format("lists {} arrivals", list->size()),
             fmt::format("list 1 to {} times in ms", kMaxArrivalsPerRoutine));
    }
    for (const toml::node& at : *list) {
      times.push_back(std::chrono::milliseconds(r.integer_value(at, name, "at_ms", 0, kMaxArrivalMs)));
    }
  } else {
    times.push_back(std::chrono::milliseconds(r.integer_value(node, name, "at_ms", 0, kMaxArrivalMs)));
  }
  return times;
}

WorkloadRoutine read_routine(const WorkloadReader& r, const toml::table& t, const std::string& section,
                             const std::vector<WorkloadDevice>& devices) {
  r.check_keys(t, section, {"id", "at_ms", "command"});
  WorkloadRoutine planned;
  planned.id = r.string_value(r.required(t, section, "id", "id = \"wake_up\""), section + ".id", "id = \"wake_up\"");
  if (const auto problem = routine::check_routine_id(planned.id)) {
    r.fail(t.get("id")->source(), section + ".id", *problem, "use [a-z0-9_.-]+, e.g. id = \"wake_up\"");
  }
  const toml::node& commands_node = r.required(t, section, "command", "[[routine.command]] tables");
  const toml::array& commands = array_of_tables(r, commands_node, section + ".command");
  if (commands.empty() || commands.size() > routine::kMaxRoutineCommands) {
    r.fail(commands_node.source(), section + ".command", fmt::format("{} commands", commands.size()),
           fmt::format("give 1 to {} [[routine.command]] tables", routine::kMaxRoutineCommands));
  }
  std::set<std::string> used;
  for (size_t i = 0; i < commands.size(); ++i) {
    const toml::table& c = *commands.get(i)->as_table();
    const std::string name = fmt::format("{}.command[{}]", section, i);
    r.check_keys(c, name, {"device", "set", "duration_ms", "must"});
    WorkloadCommand command;
    const toml::node& device_node = r.required(c, name, "device", "device = \"<a [[device]] id>\"");
    command.device = r.string_value(device_node, name + ".device", "device = \"hall_light\"");
    const auto device = std::find_if(devices.begin(), devices.end(),
                                     [&command](const WorkloadDevice& d) { return d.id == command.device; });
    if (device == devices.end()) {
      r.fail(device_node.source(), name + ".device", fmt::format("no [[device]] has id \"{}\"", command.device),
             "declare the device in a [[device]] table or fix the id");
    }
    if (!used.insert(command.device).second) {
      r.fail(device_node.source(), name + ".device", fmt::format("the routine already commands \"{}\"", command.device),
             "merge the two commands: a routine uses each device at most once");
    }
    command.values = read_attribute_values(r, r.required(c, name, "set", "set = { power = \"on\" }"), name + ".set",
                                           device_spec_of(*device));
    command.duration = std::chrono::milliseconds(r.integer(c, name, "duration_ms", 0, 0, kMaxCommandMs));
    if (const toml::node* must = c.get("must")) {
      auto b = must->as_boolean();
      if (!b) r.fail(must->source(), name + ".must", "must be a boolean", "write must = true or must = false");
      command.must = b->get();
    }
    planned.commands.push_back(std::move(command));
  }
  return planned;
}

WorkloadFailure read_failure(const WorkloadReader& r, const toml::table& t, const std::string& section,
                             const std::vector<WorkloadDevice>& devices) {
  r.check_keys(t, section, {"device", "at_ms", "down_ms"});
  WorkloadFailure failure;
  const toml::node& device_node = r.required(t, section, "device", "device = \"<a [[device]] id>\"");
  const std::string id = r.string_value(device_node, section + ".device", "device = \"hall_light\"");
  const auto device =
      std::find_if(devices.begin(), devices.end(), [&id](const WorkloadDevice& d) { return d.id == id; });
  if (device == devices.end()) {
    r.fail(device_node.source(), section + ".device", fmt::format("no [[device]] has id \"{}\"", id),
           "declare the device in a [[device]] table or fix the id");
  }
  failure.device = static_cast<size_t>(device - devices.begin());
  const toml::node& at = r.required(t, section, "at_ms", "at_ms = 1500");
  failure.at = std::chrono::milliseconds(r.integer_value(at, section + ".at_ms", "at_ms", 0, kMaxArrivalMs));
  if (t.get("down_ms") != nullptr) {
    failure.down_for = std::chrono::milliseconds(r.integer(t, section, "down_ms", 1, 1, kMaxArrivalMs));
  }
  return failure;
}

Workload read_fixed_workload(const WorkloadReader& r, const toml::table& root) {
  Workload w;
  const toml::node* device_node = root.get("device");
  if (device_node == nullptr) {
    r.fail(root.source(), "device", "missing",
           "give [[device]] and [[routine]] tables, or a [generator] or [factory] section (see "
           "sim/scenarios/WORKLOADS.md)");
  }
  const toml::array& devices = array_of_tables(r, *device_node, "device");
  if (devices.size() > static_cast<size_t>(kMaxWorkloadDevices)) {
    r.fail(device_node->source(), "device", fmt::format("{} devices", devices.size()),
           fmt::format("keep at most {}", kMaxWorkloadDevices));
  }
  std::set<std::string> device_ids;
  for (size_t i = 0; i < devices.size(); ++i) {
    const toml::table& t = *devices.get(i)->as_table();
    const std::string section = fmt::format("device[{}]", i);
    w.devices.push_back(read_device(r, t, section));
    if (!device_ids.insert(w.devices.back().id).second) {
      r.fail(t.get("id")->source(), section + ".id", fmt::format("\"{}\" is declared twice", w.devices.back().id),
             "give every device its own id");
    }
  }
  const toml::node* routine_node = root.get("routine");
  if (routine_node == nullptr) {
    r.fail(root.source(), "routine", "missing", "give [[routine]] tables (see sim/scenarios/WORKLOADS.md)");
  }
  const toml::array& routines = array_of_tables(r, *routine_node, "routine");
  if (routines.size() > static_cast<size_t>(kMaxWorkloadRoutines)) {
    r.fail(routine_node->source(), "routine", fmt::format("{} routines", routines.size()),
           fmt::format("keep at most {}", kMaxWorkloadRoutines));
  }
  std::set<std::string> routine_ids;
  for (size_t i = 0; i < routines.size(); ++i) {
    const toml::table& t = *routines.get(i)->as_table();
    const std::string section = fmt::format("routine[{}]", i);
    w.routines.push_back(read_routine(r, t, section, w.devices));
    if (!routine_ids.insert(w.routines.back().id).second) {
      r.fail(t.get("id")->source(), section + ".id", fmt::format("\"{}\" is declared twice", w.routines.back().id),
             "give every routine its own id, or list its arrivals in one at_ms = [...]");
    }
    for (core::Duration at : read_arrival_times(r, t, section)) w.arrivals.push_back({at, i});
  }
  std::stable_sort(w.arrivals.begin(), w.arrivals.end(),
                   [](const WorkloadArrival& a, const WorkloadArrival& b) { return a.at < b.at; });
  if (const toml::node* failure_node = root.get("failure")) {
    const toml::array& failures = array_of_tables(r, *failure_node, "failure");
    for (size_t i = 0; i < failures.size(); ++i) {
      w.failures.push_back(read_failure(r, *failures.get(i)->as_table(), fmt::format("failure[{}]", i), w.devices));
    }
    std::stable_sort(w.failures.begin(), w.failures.end(),
                     [](const WorkloadFailure& a, const WorkloadFailure& b) { return a.at < b.at; });
  }
  return w;
}

// Picks `count` distinct indices in [0, weights.size()), each draw in
// proportion to the weights of the indices not yet taken.
std::vector<size_t> draw_distinct_weighted(core::Rng& rng, std::vector<double> weights, size_t count) {
  std::vector<size_t> picked;
  double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  while (picked.size() < count) {
    double target = rng.unit() * total;
    size_t chosen = weights.size();
    for (size_t i = 0; i < weights.size(); ++i) {
      if (weights[i] <= 0.0) continue;
      chosen = i;  // the last index left when rounding leaves target past every weight
      if (target < weights[i]) break;
      target -= weights[i];
    }
    picked.push_back(chosen);
    total -= weights[chosen];
    weights[chosen] = 0.0;
  }
  return picked;
}

}  // namespace

WorkloadFile parse_workload(std::string_view text, std::string_view source_name) {
  WorkloadFile file;
  file.source = std::string(source_name);
  const WorkloadReader r(file.source);
  toml::table root;
  try {
    root = toml::parse(text, source_name);
  } catch (const toml::parse_error& e) {
    throw WorkloadError(
        fmt::format("{}:{}:{}: {}", file.source, e.source().begin.line, e.source().begin.column, e.description()));
  }
  r.check_keys(root, "", {"generator", "factory", "device", "routine", "failure"});
  for (const char* section : {"generator", "factory"}) {
    const toml::node* generator = root.get(section);
    if (generator == nullptr) continue;
    if (!generator->is_table()) {
      r.fail(generator->source(), section, "must be a table", fmt::format("write it as a [{}] section", section));
    }
    for (const char* other : {"generator", "factory", "device", "routine", "failure"}) {
      const toml::node* n = root.get(other);
      if (n == nullptr || n == generator) continue;
      r.fail(n->source(), other, fmt::format("given together with [{}]", section),
             "keep one of: a [generator] section, a [factory] section, or [[device]], [[routine]] and "
             "[[failure]] tables");
    }
    if (std::string_view(section) == "factory") {
      file.content = read_factory(r, *generator->as_table());
    } else {
      file.content = read_generator(r, *generator->as_table());
    }
    return file;
  }
  file.content = read_fixed_workload(r, root);
  return file;
}

WorkloadFile load_workload(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw WorkloadError(fmt::format("{}: cannot open the workload file; check the path", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_workload(buffer.str(), path);
}

routine::Attributes initial_state_of(routine::DeviceKind kind) {
  routine::Attributes state;
  for (const auto& a : routine::schema(kind)) {
    if (!a.writable) continue;
    if (a.type == routine::AttributeType::number) {
      state[std::string(a.name)] = a.min;
    } else {
      state[std::string(a.name)] = false;
    }
  }
  return state;
}

core::Duration back_to_back(const WorkloadRoutine& planned) {
  core::Duration sum{};
  for (const auto& command : planned.commands) sum += command.duration;
  return sum;
}

Workload generate_workload(const WorkloadGenerator& g, uint64_t seed) {
  core::Rng rng = core::Rng(seed).fork(kGeneratorSalt);
  Workload w;
  const auto device_digits = fmt::format("{}", g.devices - 1).size();
  std::vector<double> popularity;
  for (int i = 0; i < g.devices; ++i) {
    WorkloadDevice device;
    device.id = fmt::format("d{:0{}}", i, device_digits);
    device.kind = routine::DeviceKind::dimmer;
    device.initial = initial_state_of(device.kind);
    w.devices.push_back(std::move(device));
    // Zipf: the device of rank i + 1 is drawn in proportion to 1 / (i + 1)^alpha.
    popularity.push_back(1.0 / std::pow(static_cast<double>(i + 1), g.zipf));
  }
  std::vector<WorkloadRoutine> drawn;
  for (int r = 0; r < g.routines; ++r) {
    WorkloadRoutine planned;
    const auto count = static_cast<size_t>(rng.between(g.commands_min, g.commands_max));
    const bool long_running = rng.chance(g.long_share);
    const std::vector<size_t> devices = draw_distinct_weighted(rng, popularity, count);
    for (size_t i = 0; i < devices.size(); ++i) {
      WorkloadCommand command;
      command.device = w.devices[devices[i]].id;
      // A brightness drawn from 101 values: two routines rarely leave a
      // device the same way, so an incongruent end state shows.
      command.values = {{"brightness", static_cast<double>(rng.between(0, 100))}};
      command.duration = long_running && i == devices.size() / 2 ? g.long_duration : g.short_duration;
      command.must = rng.chance(g.must_share);
      planned.commands.push_back(std::move(command));
    }
    drawn.push_back(std::move(planned));
  }
  core::Duration total{};
  for (const auto& planned : drawn) total += back_to_back(planned);
  const double window_us = g.shrink * static_cast<double>(total.count());
  std::vector<std::pair<core::Duration, size_t>> order;
  for (size_t r = 0; r < drawn.size(); ++r) {
    order.emplace_back(core::Duration(static_cast<int64_t>(rng.unit() * window_us)), r);
  }
  std::sort(order.begin(), order.end());
  // Routines are named in arrival order, as SafeHome numbers them.
  const auto routine_digits = fmt::format("{}", g.routines - 1).size();
  for (const auto& [at, index] : order) {
    w.arrivals.push_back({at, w.routines.size()});
    w.routines.push_back(std::move(drawn[index]));
    w.routines.back().id = fmt::format("r{:0{}}", w.arrivals.size() - 1, routine_digits);
  }
  if (g.device_failure_ratio > 0) {
    core::Rng failures = core::Rng(seed).fork(kFailureSalt);
    const core::Duration instant(static_cast<int64_t>(failures.unit() * window_us));
    std::set<std::string> commanded;
    for (const auto& planned : w.routines) {
      for (const auto& command : planned.commands) commanded.insert(command.device);
    }
    for (size_t d = 0; d < w.devices.size(); ++d) {
      if (commanded.count(w.devices[d].id) != 0 && failures.chance(g.device_failure_ratio)) {
        w.failures.push_back({d, instant, std::nullopt});
      }
    }
  }
  return w;
}

Workload instantiate(const WorkloadFile& file, uint64_t run_seed) {
  if (const auto* fixed = std::get_if<Workload>(&file.content)) return *fixed;
  if (const auto* factory = std::get_if<FactoryGenerator>(&file.content)) {
    return generate_factory_workload(*factory, factory->seed.value_or(run_seed));
  }
  const auto& generator = std::get<WorkloadGenerator>(file.content);
  return generate_workload(generator, generator.seed.value_or(run_seed));
}

}  // namespace mesh::sim
