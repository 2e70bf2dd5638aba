#include "agent/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "agent/catalog_file.h"
#include "agent/toml_source.h"
#include "agent/topology_file.h"
#include "core/log.h"

namespace mesh::agent {
namespace {

class Parser;

// One key of the config file and how it is read. Scalars (integers,
// durations, numbers, booleans, paths, one-of-several strings) are read by
// Parser::read_section from these fields alone, with the range and meaning
// named in every error message; keys that need more (addresses, arrays,
// related checks) name a reader of their own. Relations between keys are
// checked after every table is read (Parser::check_cross_fields).
struct KeySpec {
  enum class Kind { integer, millis, seconds, number, boolean, path, choice, custom };
  using IntegerSetter = void (*)(AgentConfig&, int64_t);
  using DurationSetter = void (*)(AgentConfig&, core::Duration);
  using NumberSetter = void (*)(AgentConfig&, double);
  using BooleanSetter = void (*)(AgentConfig&, bool);
  using StringSetter = void (*)(AgentConfig&, const std::string&);
  using Reader = void (Parser::*)(AgentConfig&);

  std::string_view name{};
  Kind kind = Kind::custom;
  int64_t low = 0;  // integer, millis, seconds
  int64_t high = 0;
  double low_number = 0;  // number
  double high_number = 0;
  // What the key means, for "Fix: set KEY to ... (MEANING)"; for a choice,
  // the whole fix.
  std::string_view meaning{};
  std::vector<std::string_view> choices{};  // choice
  std::variant<IntegerSetter, DurationSetter, NumberSetter, BooleanSetter, StringSetter, Reader> set{};
};

// An integer from low to high.
KeySpec integer_key(std::string_view name, int64_t low, int64_t high, std::string_view meaning,
                    KeySpec::IntegerSetter set) {
  return {.name = name, .kind = KeySpec::Kind::integer, .low = low, .high = high, .meaning = meaning, .set = set};
}

// An integer number of milliseconds from low to high.
KeySpec millis_key(std::string_view name, int64_t low, int64_t high, std::string_view meaning,
                   KeySpec::DurationSetter set) {
  return {.name = name, .kind = KeySpec::Kind::millis, .low = low, .high = high, .meaning = meaning, .set = set};
}

// An integer number of seconds from low to high.
KeySpec seconds_key(std::string_view name, int64_t low, int64_t high, std::string_view meaning,
                    KeySpec::DurationSetter set) {
  return {.name = name, .kind = KeySpec::Kind::seconds, .low = low, .high = high, .meaning = meaning, .set = set};
}

// A number (integer or floating point) from low to high.
KeySpec number_key(std::string_view name, double low, double high, std::string_view meaning,
                   KeySpec::NumberSetter set) {
  return {.name = name,
          .kind = KeySpec::Kind::number,
          .low_number = low,
          .high_number = high,
          .meaning = meaning,
          .set = set};
}

KeySpec boolean_key(std::string_view name, std::string_view meaning, KeySpec::BooleanSetter set) {
  return {.name = name, .kind = KeySpec::Kind::boolean, .meaning = meaning, .set = set};
}

// A non-empty path, stored resolved against the config file's directory.
KeySpec path_key(std::string_view name, std::string_view meaning, KeySpec::StringSetter set) {
  return {.name = name, .kind = KeySpec::Kind::path, .meaning = meaning, .set = set};
}

// One of `choices`; `fix` is the whole "Fix:" text.
KeySpec choice_key(std::string_view name, std::vector<std::string_view> choices, std::string_view fix,
                   KeySpec::StringSetter set) {
  return {.name = name, .kind = KeySpec::Kind::choice, .meaning = fix, .choices = std::move(choices), .set = set};
}

// A key read by a Parser member function of its own.
KeySpec custom_key(std::string_view name, KeySpec::Reader read) {
  return {.name = name, .kind = KeySpec::Kind::custom, .set = read};
}

// One [table] of the config file: its keys in the order they are read and
// listed in messages ("[link] accepts mode, interfaces, ...").
struct SectionSpec {
  std::string_view name;
  std::vector<KeySpec> keys;
};

// The accepted tables and their keys' names; "layers" in [log] is itself a
// table. Derived from Parser::sections().
struct TableSpec {
  std::string_view name;
  std::vector<std::string_view> keys;
};

const std::vector<TableSpec>& table_specs();

constexpr std::array<std::string_view, 7> kLogLayers = {"core",  "routing", "membership", "kgroup",
                                                        "mutex", "routine", "agent"};
constexpr std::array<std::string_view, 7> kLogLevels = {"trace", "debug", "info", "warn", "error", "critical", "off"};

// A key file holds 64 hex digits and a newline; anything far longer is not one.
constexpr size_t kMaxKeyFileBytes = 4096;
// The kernel's IFNAMSIZ (16) includes the terminating NUL.
constexpr size_t kMaxInterfaceName = 15;
constexpr size_t kMaxNodeName = 64;

// Optimal string alignment distance: Levenshtein plus adjacent transpositions,
// so "intrefaces" is one edit from "interfaces".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The closest candidate, if close enough to be a plausible typo.
std::optional<std::string_view> closest(std::string_view word, const std::vector<std::string_view>& candidates) {
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::optional<std::string_view> best;
  size_t best_distance = limit + 1;
  for (std::string_view candidate : candidates) {
    const size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  return best;
}

std::string join(const std::vector<std::string_view>& words, std::string_view separator, std::string_view prefix = {},
                 std::string_view suffix = {}) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += separator;
    out += prefix;
    out += words[i];
    out += suffix;
  }
  return out;
}

template <size_t N>
std::vector<std::string_view> to_vector(const std::array<std::string_view, N>& words) {
  return {words.begin(), words.end()};
}

std::string describe(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return fmt::format("a string (\"{}\")", node.as_string()->get());
    case toml::node_type::integer:
      return fmt::format("an integer ({})", node.as_integer()->get());
    case toml::node_type::floating_point:
      return fmt::format("a number ({})", node.as_floating_point()->get());
    case toml::node_type::boolean:
      return fmt::format("a boolean ({})", node.as_boolean()->get());
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time:
      return "a date/time";
    case toml::node_type::none:
      break;
  }
  return "nothing";
}

std::string resolve_path(const std::string& base_dir, const std::string& path) {
  if (path.empty() || base_dir.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0 || buffer[0] == '\0') return "meshagent";
  return std::string(buffer, ::strnlen(buffer, sizeof buffer));
}

// What the user should write, for the "Fix:" part of a message.
struct Help {
  std::string_view allowed;  // e.g. "an integer from 100 to 60000"
  std::string_view meaning;  // e.g. "milliseconds between HELLO messages"
};

class Parser {
 public:
  Parser(std::string source, std::string base_dir) : source_(std::move(source)), base_dir_(std::move(base_dir)) {}

  // Every table and its keys, in reading order (defined below the class).
  static const std::vector<SectionSpec>& sections();

  AgentConfig parse(std::string_view text) {
    try {
      root_ = toml::parse(text, source_);
    } catch (const toml::parse_error& e) {
      const auto& begin = e.source().begin;
      throw ConfigError(
          fmt::format("{}:{}:{}: TOML syntax error: {}. Fix: correct the syntax at line {}, column {} "
                      "(strings need double quotes, tables are written [name], see https://toml.io).",
                      source_, begin.line == 0 ? 1 : begin.line, begin.column, e.description(),
                      begin.line == 0 ? 1 : begin.line, begin.column));
    }
    check_structure();
    AgentConfig config;
    config.source = source_;
    for (const SectionSpec& section : sections()) read_section(section, config);
    check_cross_fields(config);
    if (errors_.empty()) read_mesh_key(config);
    if (errors_.empty()) read_catalog(config);
    if (errors_.empty()) check_topology(config);
    if (!errors_.empty()) {
      std::string message;
      for (const auto& error : errors_) {
        if (!message.empty()) message += '\n';
        message += error;
      }
      throw ConfigError(message);
    }
    return config;
  }

 private:
  void fail(uint32_t line, std::string_view key, std::string_view problem, std::string_view fix) {
    // A problem may end in a question ("did you mean ...?"), which needs no full stop.
    const std::string_view stop = !problem.empty() && problem.back() == '?' ? "" : ".";
    errors_.push_back(fmt::format("{}:{}: {}: {}{} Fix: {}.", source_, line, key, problem, stop, fix));
  }

  static std::string dotted(std::string_view table, std::string_view key) { return fmt::format("{}.{}", table, key); }

  // Unknown tables and keys, and known tables of the wrong type.
  void check_structure() {
    std::vector<std::string_view> table_names;
    for (const auto& spec : table_specs()) table_names.push_back(spec.name);

    for (auto&& [key, node] : root_) {
      const std::string_view name = key.str();
      const uint32_t line = line_of(key.source().begin.line != 0 ? key.source() : node.source());
      const auto spec =
          std::find_if(table_specs().begin(), table_specs().end(), [&](const TableSpec& s) { return s.name == name; });
      if (spec == table_specs().end()) {
        report_unknown_top_level(name, node, line, table_names);
        continue;
      }
      if (!node.is_table()) {
        fail(line, name, fmt::format("expected a table, got {}", describe(node)),
             fmt::format("write the {} settings under a [{}] header, one key = value per line", name, name));
        continue;
      }
      for (auto&& [child_key, child] : *node.as_table()) {
        const std::string_view child_name = child_key.str();
        const uint32_t child_line = line_of(child_key.source().begin.line != 0 ? child_key.source() : child.source());
        if (std::find(spec->keys.begin(), spec->keys.end(), child_name) == spec->keys.end()) {
          report_unknown_key(*spec, child_name, child_line);
        } else if (name == "log" && child_name == "layers") {
          check_log_layers(child, child_line);
        }
      }
    }
  }

  void report_unknown_top_level(std::string_view name, const toml::node& node, uint32_t line,
                                const std::vector<std::string_view>& table_names) {
    const std::string known = join(table_names, ", ", "[", "]");
    if (node.is_table()) {
      const auto suggestion = closest(name, table_names);
      fail(line, name,
           suggestion ? fmt::format("unknown table [{}]; did you mean [{}]?", name, *suggestion)
                      : fmt::format("unknown table [{}]", name),
           fmt::format("rename or remove the table; the known tables are {}", known));
      return;
    }
    // A key outside any table: usually one that belongs in a table.
    for (const auto& spec : table_specs()) {
      if (std::find(spec.keys.begin(), spec.keys.end(), name) != spec.keys.end()) {
        fail(line, name, fmt::format("unknown top-level key; did you mean {}.{}?", spec.name, name),
             fmt::format("move {} below the [{}] header", name, spec.name));
        return;
      }
    }
    fail(line, name, "unknown top-level key",
         fmt::format("every setting belongs in one of the tables {}; remove this key or move it into one", known));
  }

  void report_unknown_key(const TableSpec& spec, std::string_view name, uint32_t line) {
    const std::string key = dotted(spec.name, name);
    const std::string accepted = join(spec.keys, ", ");
    if (const auto suggestion = closest(name, spec.keys)) {
      fail(line, key, fmt::format("unknown key; did you mean \"{}\"?", *suggestion),
           fmt::format("rename it to {}, or remove it; [{}] accepts {}", *suggestion, spec.name, accepted));
      return;
    }
    for (const auto& other : table_specs()) {
      if (std::find(other.keys.begin(), other.keys.end(), name) != other.keys.end()) {
        fail(line, key, fmt::format("unknown key in [{}]; did you mean {}.{}?", spec.name, other.name, name),
             fmt::format("move {} below the [{}] header", name, other.name));
        return;
      }
    }
    fail(line, key, "unknown key", fmt::format("remove it; [{}] accepts {}", spec.name, accepted));
  }

  void check_log_layers(const toml::node& node, uint32_t line) {
    if (!node.is_table()) {
      fail(line, "log.layers", fmt::format("expected a table, got {}", describe(node)),
           "write per-layer levels under a [log.layers] header, e.g. routing = \"debug\"");
      return;
    }
    const auto layers = to_vector(kLogLayers);
    for (auto&& [key, value] : *node.as_table()) {
      const std::string_view name = key.str();
      if (std::find(layers.begin(), layers.end(), name) != layers.end()) continue;
      const uint32_t key_line = line_of(key.source().begin.line != 0 ? key.source() : value.source());
      const auto suggestion = closest(name, layers);
      fail(key_line, dotted("log.layers", name),
           suggestion ? fmt::format("unknown layer; did you mean \"{}\"?", *suggestion) : std::string("unknown layer"),
           fmt::format("use one of the layers {}", join(layers, ", ")));
    }
  }

  const toml::table* table(std::string_view name) const {
    const toml::node* node = root_.get(name);
    return node ? node->as_table() : nullptr;
  }

  // The line to blame for a missing key: its table's header, else line 1.
  uint32_t table_line(std::string_view name) const {
    const toml::table* t = table(name);
    return t ? line_of(*t) : 1;
  }

  const toml::node* find(std::string_view table_name, std::string_view key) const {
    const toml::table* t = table(table_name);
    return t ? t->get(key) : nullptr;
  }

  bool present(std::string_view table_name, std::string_view key) const { return find(table_name, key) != nullptr; }

  uint32_t key_line(std::string_view table_name, std::string_view key) const {
    const toml::node* node = find(table_name, key);
    return node ? line_of(*node) : table_line(table_name);
  }

  void mark_invalid(std::string_view table_name, std::string_view key) { invalid_.insert(dotted(table_name, key)); }
  bool valid(std::string_view table_name, std::string_view key) const {
    return invalid_.count(dotted(table_name, key)) == 0;
  }

  void type_error(std::string_view table_name, std::string_view key, const toml::node& node, std::string_view expected,
                  const Help& help) {
    mark_invalid(table_name, key);
    fail(line_of(node), dotted(table_name, key), fmt::format("expected {}, got {}", expected, describe(node)),
         fmt::format("set {} to {} ({})", key, help.allowed, help.meaning));
  }

  std::optional<int64_t> integer(std::string_view table_name, std::string_view key, int64_t low, int64_t high,
                                 std::string_view meaning) {
    const toml::node* node = find(table_name, key);
    if (!node) return std::nullopt;
    const std::string allowed = fmt::format("an integer from {} to {}", low, high);
    if (!node->is_integer()) {
      type_error(table_name, key, *node, "an integer", {allowed, meaning});
      return std::nullopt;
    }
    const int64_t value = node->as_integer()->get();
    if (value < low || value > high) {
      mark_invalid(table_name, key);
      fail(line_of(*node), dotted(table_name, key), fmt::format("{} is out of range {}..{}", value, low, high),
           fmt::format("set {} to {} ({})", key, allowed, meaning));
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> boolean(std::string_view table_name, std::string_view key, std::string_view meaning) {
    const toml::node* node = find(table_name, key);
    if (!node) return std::nullopt;
    if (!node->is_boolean()) {
      type_error(table_name, key, *node, "a boolean", {"true or false, without quotes", meaning});
      return std::nullopt;
    }
    return node->as_boolean()->get();
  }

  std::optional<core::Duration> millis(std::string_view table_name, std::string_view key, int64_t low, int64_t high,
                                       std::string_view meaning) {
    const auto value = integer(table_name, key, low, high, meaning);
    if (!value) return std::nullopt;
    return std::chrono::milliseconds(*value);
  }

  std::optional<double> number(std::string_view table_name, std::string_view key, double low, double high,
                               std::string_view meaning) {
    const toml::node* node = find(table_name, key);
    if (!node) return std::nullopt;
    const std::string allowed = fmt::format("a number from {} to {}", low, high);
    double value = 0;
    if (node->is_floating_point()) {
      value = node->as_floating_point()->get();
    } else if (node->is_integer()) {
      value = static_cast<double>(node->as_integer()->get());
    } else {
      type_error(table_name, key, *node, "a number", {allowed, meaning});
      return std::nullopt;
    }
    if (!std::isfinite(value) || value < low || value > high) {
      mark_invalid(table_name, key);
      fail(line_of(*node), dotted(table_name, key), fmt::format("{} is out of range {}..{}", value, low, high),
           fmt::format("set {} to {} ({})", key, allowed, meaning));
      return std::nullopt;
    }
    return value;
  }

  std::optional<std::string> string(std::string_view table_name, std::string_view key, const Help& help) {
    const toml::node* node = find(table_name, key);
    if (!node) return std::nullopt;
    if (!node->is_string()) {
      type_error(table_name, key, *node, "a string", help);
      return std::nullopt;
    }
    return std::string(node->as_string()->get());
  }

  std::optional<std::string> path(std::string_view table_name, std::string_view key, std::string_view meaning) {
    const Help help{"a path in double quotes, absolute or relative to the config file's directory", meaning};
    auto value = string(table_name, key, help);
    if (!value) return std::nullopt;
    if (value->empty()) {
      mark_invalid(table_name, key);
      fail(key_line(table_name, key), dotted(table_name, key), "the path is empty",
           fmt::format("set {} to {} ({}), or remove the line to use the default", key, help.allowed, help.meaning));
      return std::nullopt;
    }
    return resolve_path(base_dir_, *value);
  }

  // A string that must be one of `choices`.
  std::optional<std::string> choice(std::string_view table_name, std::string_view key,
                                    const std::vector<std::string_view>& choices, std::string_view fix) {
    const std::string allowed =
        choices.size() == 2 ? join(choices, " or ", "\"", "\"") : "one of " + join(choices, ", ", "\"", "\"");
    const toml::node* node = find(table_name, key);
    if (!node) return std::nullopt;
    if (!node->is_string()) {
      mark_invalid(table_name, key);
      fail(line_of(*node), dotted(table_name, key), fmt::format("expected {}, got {}", allowed, describe(*node)), fix);
      return std::nullopt;
    }
    std::string value(node->as_string()->get());
    if (std::find(choices.begin(), choices.end(), value) == choices.end()) {
      mark_invalid(table_name, key);
      fail(key_line(table_name, key), dotted(table_name, key), fmt::format("expected {}, got \"{}\"", allowed, value),
           fix);
      return std::nullopt;
    }
    return value;
  }

  // The readers of the keys a table line cannot describe (custom_key).

  void read_node_name(AgentConfig& config) {
    NodeConfig& node = config.node;
    node.name = host_name();
    if (auto name = string("node", "name", {"a short name in double quotes", "how meshctl shows this node"})) {
      const bool printable = std::all_of(name->begin(), name->end(), [](char c) { return c > ' ' && c < 127; });
      if (name->empty() || name->size() > kMaxNodeName || !printable) {
        mark_invalid("node", "name");
        fail(key_line("node", "name"), "node.name",
             fmt::format("\"{}\" is not a usable name: it needs 1 to {} printable characters and no spaces", *name,
                         kMaxNodeName),
             "set name = \"kitchen-pi\" or similar, or remove the line to use the host name");
      } else {
        node.name = *name;
      }
    }
  }

  void read_node_address(AgentConfig& config) {
    NodeConfig& node = config.node;
    if (auto text = string("node", "address",
                           {"an IPv4 address in double quotes, e.g. \"10.0.0.1\"", "this node's main address"})) {
      const auto address = core::Ipv4Address::parse(*text);
      if (!address) {
        mark_invalid("node", "address");
        fail(key_line("node", "address"), "node.address", fmt::format("\"{}\" is not an IPv4 address", *text),
             "set address = \"10.0.0.1\" (dotted quad, no leading zeros, no prefix length)");
      } else {
        node.id = *address;
      }
    }
  }

  void read_node_location(AgentConfig& config) {
    NodeConfig& node = config.node;
    if (const toml::node* location = find("node", "location")) {
      const Help help{"an array of three numbers, e.g. [1.5, 0.0, 2.0]", "x, y, z position in metres"};
      const toml::array* array = location->as_array();
      if (!array) {
        type_error("node", "location", *location, "an array of three numbers", help);
      } else if (array->size() != 3) {
        mark_invalid("node", "location");
        fail(line_of(*location), "node.location", fmt::format("expected 3 numbers, got {}", array->size()),
             fmt::format("set location to {} ({})", help.allowed, help.meaning));
      } else {
        for (size_t i = 0; i < 3; ++i) {
          const toml::node& element = *array->get(i);
          double value = 0;
          if (element.is_floating_point()) {
            value = element.as_floating_point()->get();
          } else if (element.is_integer()) {
            value = static_cast<double>(element.as_integer()->get());
          } else {
            mark_invalid("node", "location");
            fail(line_of(element), "node.location",
                 fmt::format("element {} must be a number, got {}", i + 1, describe(element)),
                 fmt::format("set location to {} ({})", help.allowed, help.meaning));
            break;
          }
          if (!std::isfinite(value)) {
            mark_invalid("node", "location");
            fail(line_of(element), "node.location", fmt::format("element {} is not a finite number", i + 1),
                 fmt::format("set location to {} ({})", help.allowed, help.meaning));
            break;
          }
          node.location[i] = value;
        }
      }
    }
  }

  void read_link_interfaces(AgentConfig& config) {
    LinkConfig& link = config.link;
    if (const toml::node* node = find("link", "interfaces")) {
      const Help help{"an array of interface names, e.g. [\"wlan0\"]", "the network interfaces the mesh runs on"};
      const toml::array* array = node->as_array();
      if (!array) {
        type_error("link", "interfaces", *node, "an array of strings", help);
      } else {
        for (const toml::node& element : *array) {
          if (!element.is_string()) {
            mark_invalid("link", "interfaces");
            fail(line_of(element), "link.interfaces",
                 fmt::format("expected interface names, got {}", describe(element)),
                 fmt::format("set interfaces to {} ({})", help.allowed, help.meaning));
            break;
          }
          const std::string name(element.as_string()->get());
          const bool plain =
              std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 127 && c != '/'; });
          if (name.empty() || name.size() > kMaxInterfaceName || !plain) {
            mark_invalid("link", "interfaces");
            fail(line_of(element), "link.interfaces",
                 fmt::format("\"{}\" is not an interface name (1 to {} characters, no spaces or '/')", name,
                             kMaxInterfaceName),
                 "use the names `ip link` shows, e.g. interfaces = [\"wlan0\"]");
            break;
          }
          if (std::find(link.interfaces.begin(), link.interfaces.end(), name) != link.interfaces.end()) {
            mark_invalid("link", "interfaces");
            fail(line_of(element), "link.interfaces", fmt::format("\"{}\" is listed twice", name),
                 "list each interface once");
            break;
          }
          link.interfaces.push_back(name);
        }
      }
    }
  }

  void read_hna_networks(AgentConfig& config) {
    const toml::node* node = find("routing", "hna_networks");
    if (!node) return;
    const Help help{"an array of IPv4 networks, e.g. [\"192.168.10.0/24\"]",
                    "the device subnets this node is a gateway for, announced with HNA"};
    const toml::array* array = node->as_array();
    if (!array) {
      type_error("routing", "hna_networks", *node, "an array of strings", help);
      return;
    }
    for (const toml::node& element : *array) {
      const auto bad = [&](std::string problem) {
        mark_invalid("routing", "hna_networks");
        fail(line_of(element), "routing.hna_networks", problem,
             fmt::format("set hna_networks to {} ({})", help.allowed, help.meaning));
      };
      if (!element.is_string()) {
        bad(fmt::format("expected a network like \"192.168.10.0/24\", got {}", describe(element)));
        return;
      }
      const std::string text(element.as_string()->get());
      const size_t slash = text.find('/');
      const auto address = core::Ipv4Address::parse(std::string_view(text).substr(0, slash));
      int prefix = -1;
      if (slash != std::string::npos) {
        const std::string_view digits = std::string_view(text).substr(slash + 1);
        const bool numeric = !digits.empty() && digits.size() <= 2 &&
                             std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (numeric) prefix = std::stoi(std::string(digits));
      }
      if (!address || prefix < 0 || prefix > 32) {
        bad(fmt::format("\"{}\" is not an IPv4 network in ADDRESS/PREFIX form (prefix 0 to 32)", text));
        return;
      }
      const uint32_t mask = prefix == 0 ? 0 : ~uint32_t{0} << (32 - prefix);
      if ((address->value() & ~mask) != 0) {
        bad(fmt::format("\"{}\" has host bits set beyond the /{} prefix", text, prefix));
        return;
      }
      const routing::olsr::HnaEntry entry{*address, core::Ipv4Address(mask)};
      auto& networks = config.node.routing.hna_networks;
      if (std::find(networks.begin(), networks.end(), entry) != networks.end()) {
        bad(fmt::format("\"{}\" is listed twice", text));
        return;
      }
      networks.push_back(entry);
    }
  }

  // k must be odd: a group of 2f + 1 members tolerates f crashes.
  void read_kgroup_k(AgentConfig& config) {
    KgroupConfig& kgroup = config.node.kgroup;
    if (auto v = integer("kgroup", "k", 1, 15, "members per group, k = 2f + 1 (odd); f crashes are tolerated")) {
      if (*v % 2 == 0) {
        mark_invalid("kgroup", "k");
        fail(key_line("kgroup", "k"), "kgroup.k",
             fmt::format("{} is even, but a group of k = 2f + 1 members tolerates f crashes, so an even k buys "
                         "nothing over k - 1",
                         *v),
             fmt::format("set k to {} or {}", *v - 1, *v + 1));
      } else {
        kgroup.selection.k = static_cast<size_t>(*v);
      }
    }
  }

  void read_log_level(AgentConfig& config) {
    const auto levels = to_vector(kLogLevels);
    const std::string fix =
        fmt::format("set level to one of {}, e.g. level = \"info\"", join(levels, ", ", "\"", "\""));
    if (auto level = choice("log", "level", levels, fix)) config.log_level = *level;
  }

  void read_log_layers(AgentConfig& config) {
    const auto levels = to_vector(kLogLevels);
    const toml::node* layers = find("log", "layers");
    if (!layers || !layers->is_table()) return;  // a wrong type was reported by check_structure()
    for (auto&& [key, value] : *layers->as_table()) {
      const std::string layer(key.str());
      if (std::find(kLogLayers.begin(), kLogLayers.end(), layer) == kLogLayers.end()) continue;
      const std::string dotted_key = dotted("log.layers", layer);
      const std::string layer_fix =
          fmt::format("set {} to one of {}, e.g. {} = \"debug\"", layer, join(levels, ", ", "\"", "\""), layer);
      if (!value.is_string()) {
        fail(line_of(value), dotted_key, fmt::format("expected a level name, got {}", describe(value)), layer_fix);
        continue;
      }
      const std::string level(value.as_string()->get());
      if (std::find(levels.begin(), levels.end(), level) == levels.end()) {
        fail(line_of(value), dotted_key,
             fmt::format("expected one of {}, got \"{}\"", join(levels, ", ", "\"", "\""), level), layer_fix);
        continue;
      }
      config.layer_log_levels[layer] = level;
    }
  }

  // Every key of `section` in table order; each value read is stored at once.
  void read_section(const SectionSpec& section, AgentConfig& config) {
    using Kind = KeySpec::Kind;
    const std::string_view table_name = section.name;
    for (const KeySpec& key : section.keys) {
      switch (key.kind) {
        case Kind::integer:
          if (auto v = integer(table_name, key.name, key.low, key.high, key.meaning)) {
            std::get<KeySpec::IntegerSetter>(key.set)(config, *v);
          }
          break;
        case Kind::millis:
          if (auto v = integer(table_name, key.name, key.low, key.high, key.meaning)) {
            std::get<KeySpec::DurationSetter>(key.set)(config, std::chrono::milliseconds(*v));
          }
          break;
        case Kind::seconds:
          if (auto v = integer(table_name, key.name, key.low, key.high, key.meaning)) {
            std::get<KeySpec::DurationSetter>(key.set)(config, std::chrono::seconds(*v));
          }
          break;
        case Kind::number:
          if (auto v = number(table_name, key.name, key.low_number, key.high_number, key.meaning)) {
            std::get<KeySpec::NumberSetter>(key.set)(config, *v);
          }
          break;
        case Kind::boolean:
          if (auto v = boolean(table_name, key.name, key.meaning)) {
            std::get<KeySpec::BooleanSetter>(key.set)(config, *v);
          }
          break;
        case Kind::path:
          if (auto v = path(table_name, key.name, key.meaning)) {
            std::get<KeySpec::StringSetter>(key.set)(config, *v);
          }
          break;
        case Kind::choice:
          if (auto v = choice(table_name, key.name, key.choices, key.meaning)) {
            std::get<KeySpec::StringSetter>(key.set)(config, *v);
          }
          break;
        case Kind::custom:
          (this->*std::get<KeySpec::Reader>(key.set))(config);
          break;
      }
    }
  }

  void check_kgroup(const NodeConfig& node) {
    const auto& replica = node.kgroup.replica;
    if (valid("kgroup", "heartbeat_interval_ms") && valid("kgroup", "lease_ms") &&
        replica.lease <= replica.heartbeat_interval) {
      const auto [line, key] = blame("kgroup", "heartbeat_interval_ms", "lease_ms");
      fail(line, key,
           fmt::format("kgroup.lease_ms ({}) must exceed kgroup.heartbeat_interval_ms ({}), or every follower's "
                       "lease lapses between two heartbeats and the group keeps re-electing",
                       to_ms(replica.lease), to_ms(replica.heartbeat_interval)),
           "set lease_ms to about six heartbeat intervals (600 for 100)");
    }
    if (valid("kgroup", "lease_margin_ms") && valid("kgroup", "lease_ms") && replica.lease_margin >= replica.lease) {
      const auto [line, key] = blame("kgroup", "lease_ms", "lease_margin_ms");
      fail(line, key,
           fmt::format("kgroup.lease_margin_ms ({}) must be below kgroup.lease_ms ({}), or a leader never trusts "
                       "its lease",
                       to_ms(replica.lease_margin), to_ms(replica.lease)),
           "set lease_margin_ms to a small fraction of lease_ms (50 for 600)");
    }
    if (valid("kgroup", "write_attempt_timeout_ms") && valid("requests", "dedupe_hold_ms") &&
        node.messaging.dedupe_hold <= node.kgroup.write_attempt_timeout) {
      const bool timeout_written = present("kgroup", "write_attempt_timeout_ms");
      fail(timeout_written ? key_line("kgroup", "write_attempt_timeout_ms") : key_line("requests", "dedupe_hold_ms"),
           timeout_written ? "kgroup.write_attempt_timeout_ms" : "requests.dedupe_hold_ms",
           fmt::format("kgroup.write_attempt_timeout_ms ({}) must be below requests.dedupe_hold_ms ({}), or a late "
                       "retransmitted write request is handled twice",
                       to_ms(node.kgroup.write_attempt_timeout), to_ms(node.messaging.dedupe_hold)),
           "set write_attempt_timeout_ms to a few seconds (3000, the default)");
    }
  }

  void check_hop_arq(const routing::HopArq::Options& arq) {
    if (valid("transport", "hop_arq_rto_floor_ms") && valid("transport", "hop_arq_rto_cap_ms") &&
        arq.rto_cap < arq.rto_floor) {
      const auto [line, key] = blame("transport", "hop_arq_rto_floor_ms", "hop_arq_rto_cap_ms");
      fail(line, key,
           fmt::format("transport.hop_arq_rto_cap_ms ({}) is below transport.hop_arq_rto_floor_ms ({})",
                       to_ms(arq.rto_cap), to_ms(arq.rto_floor)),
           "set hop_arq_rto_cap_ms at least as large as hop_arq_rto_floor_ms");
    }
    const auto span = (arq.max_retransmissions + 1) * std::max(arq.rto_cap, arq.rto_floor);
    if (valid("transport", "hop_arq_retransmissions") && valid("transport", "hop_arq_rto_cap_ms") &&
        valid("transport", "hop_arq_dedupe_hold_ms") && arq.dedupe_hold <= span) {
      const bool hold_written = present("transport", "hop_arq_dedupe_hold_ms");
      fail(hold_written ? key_line("transport", "hop_arq_dedupe_hold_ms") : key_line("transport", "hop_arq_rto_cap_ms"),
           hold_written ? "transport.hop_arq_dedupe_hold_ms" : "transport.hop_arq_rto_cap_ms",
           fmt::format("transport.hop_arq_dedupe_hold_ms ({}) must exceed (hop_arq_retransmissions + 1) * "
                       "hop_arq_rto_cap_ms ({}), or a late hop retransmission is handed on twice",
                       to_ms(arq.dedupe_hold), to_ms(span)),
           "set hop_arq_dedupe_hold_ms to ten times that (40000 for the defaults)");
    }
  }

  // Unset, OLSR's port follows from the link mode (check_cross_fields).
  void read_link_olsr_port(AgentConfig& config) {
    if (auto port =
            integer("link", "olsr_port", 1, 65535, "the UDP port of OLSR packets; 698 talks to other OLSR daemons")) {
      config.link.olsr_port = static_cast<uint16_t>(*port);
    } else if (valid("link", "olsr_port")) {
      olsr_port_defaulted_ = true;
    }
  }

  // The line and key of the side of a relation to blame: the one the user
  // wrote (`later` preferred), since a default cannot be "fixed" in place.
  std::pair<uint32_t, std::string> blame(std::string_view table_name, std::string_view earlier,
                                         std::string_view later) const {
    if (present(table_name, later) || !present(table_name, earlier)) {
      return {key_line(table_name, later), dotted(table_name, later)};
    }
    return {key_line(table_name, earlier), dotted(table_name, earlier)};
  }

  // A hold time must exceed the interval of the message that refreshes it,
  // or the state it holds vanishes between two messages.
  void check_hold(std::string_view interval_key, core::Duration interval, std::string_view hold_key,
                  core::Duration hold, std::string_view what) {
    if (!valid("routing", interval_key) || !valid("routing", hold_key) || hold > interval) return;
    const auto [line, key] = blame("routing", interval_key, hold_key);
    fail(line, key,
         fmt::format("routing.{} ({}) must exceed routing.{} ({}), or {} expire between two messages", hold_key,
                     to_ms(hold), interval_key, to_ms(interval), what),
         fmt::format("set {} to three times {} (the RFC 3626 ratio), so one lost message does no harm", hold_key,
                     interval_key));
  }

  void check_cross_fields(AgentConfig& config) {
    const NodeConfig& node = config.node;
    const auto& olsr = node.routing;
    check_hold("hello_interval_ms", olsr.hello_interval, "neighb_hold_ms", olsr.neighb_hold, "neighbours");
    check_hold("tc_interval_ms", olsr.tc_interval, "top_hold_ms", olsr.top_hold, "topology entries");
    check_hold("mid_interval_ms", olsr.mid_interval, "mid_hold_ms", olsr.mid_hold, "interface aliases");
    check_hold("hna_interval_ms", olsr.hna_interval, "hna_hold_ms", olsr.hna_hold, "gateway networks");
    if (olsr.max_jitter && valid("routing", "max_jitter_ms") && valid("routing", "hello_interval_ms") &&
        *olsr.max_jitter >= olsr.hello_interval) {
      const auto [line, key] = blame("routing", "hello_interval_ms", "max_jitter_ms");
      fail(line, key,
           fmt::format("routing.max_jitter_ms ({}) must be below routing.hello_interval_ms ({})",
                       to_ms(*olsr.max_jitter), to_ms(olsr.hello_interval)),
           "set max_jitter_ms to a quarter of hello_interval_ms (the RFC 3626 default), or remove it");
    }
    const auto& retry = node.messaging.retry;
    if (valid("requests", "first_timeout_ms") && valid("requests", "max_interval_ms") &&
        retry.max_interval < retry.first_timeout) {
      const auto [line, key] = blame("requests", "first_timeout_ms", "max_interval_ms");
      fail(line, key,
           fmt::format("requests.max_interval_ms ({}) is below requests.first_timeout_ms ({})",
                       to_ms(retry.max_interval), to_ms(retry.first_timeout)),
           "set max_interval_ms at least as large as first_timeout_ms; it caps the growing retransmission wait");
    }
    check_hop_arq(node.transport.hop_arq);
    check_kgroup(node);
    const auto& watcher = node.devices.watcher;
    if (valid("devices", "subscription_renew_ms") && valid("devices", "subscription_lease_ms") &&
        watcher.lease <= watcher.renew_interval) {
      const auto [line, key] = blame("devices", "subscription_renew_ms", "subscription_lease_ms");
      fail(line, key,
           fmt::format("devices.subscription_lease_ms ({}) must exceed devices.subscription_renew_ms ({}), or "
                       "subscriptions lapse between renewals",
                       to_ms(watcher.lease), to_ms(watcher.renew_interval)),
           "set subscription_lease_ms to about three times subscription_renew_ms");
    }
    const auto& routines = node.routines.leaders;
    if (valid("routines", "lock_renew_ms") && valid("routines", "lock_reclaim_ms") &&
        node.devices.leaders.lock_reclaim_after < 3 * routines.renew_interval) {
      const auto [line, key] = blame("routines", "lock_renew_ms", "lock_reclaim_ms");
      fail(line, key,
           fmt::format("routines.lock_reclaim_ms ({}) must be at least three times routines.lock_renew_ms ({}), or "
                       "a live routine loses its locks to a few lost renewals",
                       to_ms(node.devices.leaders.lock_reclaim_after), to_ms(routines.renew_interval)),
           "set lock_reclaim_ms to about ten times lock_renew_ms (the defaults are 30000 and 3000)");
    }
    if (valid("routines", "ola_backoff_min_ms") && valid("routines", "ola_backoff_max_ms") &&
        routines.backoff_max < routines.backoff_min) {
      const auto [line, key] = blame("routines", "ola_backoff_min_ms", "ola_backoff_max_ms");
      fail(line, key,
           fmt::format("routines.ola_backoff_max_ms ({}) is below routines.ola_backoff_min_ms ({})",
                       to_ms(routines.backoff_max), to_ms(routines.backoff_min)),
           "set ola_backoff_max_ms at least as large as ola_backoff_min_ms");
    }
    const auto& medley = node.membership;
    if (valid("membership", "probe_period_ms") && valid("membership", "probe_timeout_ms") &&
        medley.probe_timeout >= medley.probe_period) {
      const auto [line, key] = blame("membership", "probe_period_ms", "probe_timeout_ms");
      fail(line, key,
           fmt::format("membership.probe_timeout_ms ({}) must be below membership.probe_period_ms ({}), or helpers "
                       "are never asked before the period ends",
                       to_ms(medley.probe_timeout), to_ms(medley.probe_period)),
           "set probe_timeout_ms to about half of probe_period_ms (one round trip across the mesh)");
    }
    if (valid("requests", "dedupe_hold_ms") && node.messaging.dedupe_hold <= medley.sync_request_deadline) {
      fail(key_line("requests", "dedupe_hold_ms"), "requests.dedupe_hold_ms",
           fmt::format("requests.dedupe_hold_ms ({}) must exceed Medley's {} ms list-sync deadline, or a late "
                       "retransmitted sync request is answered twice",
                       to_ms(node.messaging.dedupe_hold), to_ms(medley.sync_request_deadline)),
           "set dedupe_hold_ms to 60000 (the default) or more");
    }
    if (valid("requests", "deadline_ms") && valid("requests", "dedupe_hold_ms") &&
        node.messaging.dedupe_hold <= retry.deadline) {
      const auto [line, key] = blame("requests", "deadline_ms", "dedupe_hold_ms");
      fail(line, key,
           fmt::format("requests.dedupe_hold_ms ({}) must exceed requests.deadline_ms ({}), or a late retransmission "
                       "runs its handler twice",
                       to_ms(node.messaging.dedupe_hold), to_ms(retry.deadline)),
           "set dedupe_hold_ms well above deadline_ms, e.g. 60000 for a 10000 deadline");
    }

    const auto& camera = node.mutex;
    if (valid("mutex", "hold_lease_ms") && valid("mutex", "retry_deadline_s") &&
        camera.hold_lease * 3 > camera.retry.deadline * 2) {
      const auto [line, key] = blame("mutex", "retry_deadline_s", "hold_lease_ms");
      fail(line, key,
           fmt::format("mutex.hold_lease_ms ({}) must stay at most two thirds of mutex.retry_deadline_s ({} ms): "
                       "the rest of the mesh may take a silent holder's lock retry_deadline_s after it fell silent, "
                       "and the holder must have let go well before",
                       to_ms(camera.hold_lease), to_ms(camera.retry.deadline)),
           "set hold_lease_ms to half of retry_deadline_s (5000 for the default 10 s), or 0 to turn the lease off");
    }

    LinkConfig& link = config.link;
    if (!valid("link", "mode")) return;
    if (config.kernel_routes.install && link.mode == LinkConfig::Mode::loopback) {
      fail(key_line("routing", "install_kernel_routes"), "routing.install_kernel_routes",
           "kernel routes cannot be installed in loopback mode: every agent of a loopback mesh shares this host's "
           "routing table, and 127.0.0.0/8 is the host's own, so such routes would only break its loopback traffic",
           "set install_kernel_routes = false, or run the mesh on real interfaces (mode = \"interface\"; for a "
           "local test, `scripts/testbed up --netns --kernel-routes`)");
    }
    if (olsr_port_defaulted_ && link.mode == LinkConfig::Mode::loopback) {
      if (link.agent_port == 65535) {
        fail(key_line("link", "agent_port"), "link.agent_port",
             "loopback mode puts OLSR on agent_port + 1, which does not exist for 65535",
             "choose a lower agent_port, or set olsr_port explicitly");
      } else {
        link.olsr_port = static_cast<uint16_t>(link.agent_port + 1);
      }
    }
    if (valid("link", "agent_port") && valid("link", "olsr_port") && link.olsr_port == link.agent_port) {
      const auto [line, key] = blame("link", "agent_port", "olsr_port");
      fail(line, key, fmt::format("link.olsr_port and link.agent_port are both {}", link.agent_port),
           "give OLSR and agent messages different ports (olsr_port = 698 is OLSR's own)");
    }
    if (link.mode == LinkConfig::Mode::interface) {
      if (link.interfaces.empty() && valid("link", "interfaces")) {
        fail(key_line("link", present("link", "interfaces") ? "interfaces" : "mode"), "link.interfaces",
             "interface mode needs at least one network interface",
             "set interfaces = [\"wlan0\"] (the names `ip link` shows), or mode = \"loopback\" for a local test mesh");
      }
    } else {
      if (link.topology_file.empty() && valid("link", "topology_file")) {
        fail(key_line("link", "mode"), "link.topology_file", "loopback mode needs a topology file",
             "set topology_file = \"loopback-topology.txt\", a file with one \"ADDRESS ADDRESS\" edge per line");
      }
      if (node.id.is_unspecified() && valid("node", "address")) {
        fail(key_line("node", "address"), "node.address",
             present("node", "address") ? std::string("loopback mode needs a node address other than 0.0.0.0")
                                        : std::string("loopback mode needs a node address"),
             "set address = \"127.0.0.1\" (each agent of the loopback mesh its own 127.0.0.x, as listed in the "
             "topology file)");
      }
    }
  }

  static int64_t to_ms(core::Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

  void read_catalog(AgentConfig& config) {
    if (config.catalog_file.empty()) return;
    auto catalog = load_catalog(config.catalog_file);
    if (!catalog) {
      fail(key_line("devices", "catalog"), "devices.catalog", fmt::format("the catalog is not valid:\n{}", catalog.error()),
           "correct the catalog file as each line above says");
      return;
    }
    config.node.devices.catalog = std::move(catalog->devices);
    config.node.devices.routines = std::move(catalog->routines);
    config.node.devices.preconditions = std::move(catalog->preconditions);
    config.node.devices.catalog_digest = std::move(catalog->digest);
  }

  void read_mesh_key(AgentConfig& config) {
    if (auto key = read_key_file(config.mesh_key_file, "mesh_key_file")) config.node.mesh_key = std::move(*key);
    if (config.accepted_mesh_key_file.empty()) return;
    auto accepted = read_key_file(config.accepted_mesh_key_file, "accepted_mesh_key_file");
    if (!accepted) return;
    if (accepted->bytes() == config.node.mesh_key.bytes()) {
      const auto [line, key] = blame("security", "mesh_key_file", "accepted_mesh_key_file");
      fail(line, key,
           fmt::format("security.accepted_mesh_key_file \"{}\" holds the same key as security.mesh_key_file \"{}\"",
                       config.accepted_mesh_key_file, config.mesh_key_file),
           "during a key rotation it names the other key (see deploy/README.md, \"Rotating the mesh key\"); "
           "otherwise remove it");
      return;
    }
    config.node.accepted_mesh_key = std::move(*accepted);
  }

  // One key file named by security.<config_key>; nullopt after a fail().
  std::optional<core::MeshKey> read_key_file(const std::string& file, const std::string& config_key) {
    const uint32_t line = key_line("security", config_key);
    const std::string dotted = "security." + config_key;
    const std::string create = fmt::format(
        "create it once with `openssl rand -hex 32 > {0} && chmod 600 {0}` and copy the same file to every node of "
        "the mesh (mode 0600), or point {1} at the existing key",
        file, dotted);
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      fail(line, dotted, fmt::format("cannot read mesh key file \"{}\": {}", file, std::strerror(errno)), create);
      return std::nullopt;
    }
    std::string text(kMaxKeyFileBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (in.bad()) {
      fail(line, dotted, fmt::format("cannot read mesh key file \"{}\": read error", file), create);
      return std::nullopt;
    }
    if (text.size() > kMaxKeyFileBytes) {
      fail(line, dotted,
           fmt::format("mesh key file \"{}\" is malformed: over {} bytes, but a key is 64 hex digits", file,
                       kMaxKeyFileBytes),
           create);
      return std::nullopt;
    }
    auto key = core::MeshKey::from_hex(text);
    if (!key) {
      fail(line, dotted, fmt::format("mesh key file \"{}\" is malformed: {}", file, key.error()), create);
      return std::nullopt;
    }

    struct stat info {};
    if (::stat(file.c_str(), &info) == 0 && (info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
      core::log("agent").warn("mesh key file is accessible by group or others path={} mode={:o} fix=\"chmod 600 {}\"",
                              file, info.st_mode & 07777, file);
    }
    return std::move(key.value());
  }

  // In loopback mode the topology file is read now, so a mistake in it is
  // reported at start-up next to the config line that names it.
  void check_topology(const AgentConfig& config) {
    if (config.link.mode != LinkConfig::Mode::loopback) return;
    if (!std::ifstream(config.link.topology_file)) {
      fail(key_line("link", "topology_file"), "link.topology_file",
           fmt::format("cannot read topology file \"{}\": {}", config.link.topology_file, std::strerror(errno)),
           "create it (one \"ADDRESS ADDRESS\" edge per line, see deploy/examples/loopback-topology.txt) or point "
           "topology_file at it; relative paths start at the config file's directory");
      return;
    }
    const auto topology = load_topology_file(config.link.topology_file);
    if (!topology) {
      fail(key_line("link", "topology_file"), "link.topology_file", topology.error(),
           "correct the topology file: one edge \"ADDRESS ADDRESS\" per line (IPv4 dotted quads), '#' starts a "
           "comment");
      return;
    }
    const auto nodes = topology->nodes();
    if (!std::binary_search(nodes.begin(), nodes.end(), config.node.id)) {
      core::log("agent").warn(
          "node address is on no edge of the topology file, so it has no neighbours address={} topology_file={}",
          config.node.id.to_string(), config.link.topology_file);
    }
  }

  std::string source_;
  std::string base_dir_;
  toml::table root_;
  std::vector<std::string> errors_;
  std::set<std::string> invalid_;
  bool olsr_port_defaulted_ = false;
};

// Every table and key the config file accepts, in the order they are read
// and listed in messages. Adding a key is one line here (and its
// documentation in deploy/examples/agent.toml).
const std::vector<SectionSpec>& Parser::sections() {
  constexpr int64_t kMaxIntervalMs = 600000;  // [routing], [membership], [kgroup] periods
  constexpr int64_t kMaxHoldMs = 3600000;     // [routing] hold times
  using C = AgentConfig;
  using D = core::Duration;
  static const std::vector<SectionSpec> specs = {
      {"node",
       {
           custom_key("name", &Parser::read_node_name),
           custom_key("address", &Parser::read_node_address),
           custom_key("location", &Parser::read_node_location),
       }},
      {"link",
       {
           choice_key("mode", {"interface", "loopback"},
                      "set mode = \"interface\" to use real network interfaces, or \"loopback\" for a local "
                      "test mesh",
                      [](C& c, const std::string& v) {
                        c.link.mode = v == "loopback" ? LinkConfig::Mode::loopback : LinkConfig::Mode::interface;
                      }),
           custom_key("interfaces", &Parser::read_link_interfaces),
           path_key("topology_file", "the loopback mesh's edge list, one \"ADDRESS ADDRESS\" per line",
                    [](C& c, const std::string& v) { c.link.topology_file = v; }),
           integer_key("agent_port", 1, 65535, "the UDP port every agent of the mesh uses",
                       [](C& c, int64_t v) { c.link.agent_port = static_cast<uint16_t>(v); }),
           custom_key("olsr_port", &Parser::read_link_olsr_port),
       }},
      {"security",
       {
           path_key("mesh_key_file", "the file holding the mesh key",
                    [](C& c, const std::string& v) { c.mesh_key_file = v; }),
           path_key("accepted_mesh_key_file",
                    "a second mesh key file, accepted on receive and never used to seal, while the mesh rotates keys",
                    [](C& c, const std::string& v) { c.accepted_mesh_key_file = v; }),
           integer_key("replay_window", 64, 65536,
                       "how many recent packet counters per sender are remembered against replays",
                       [](C& c, int64_t v) { c.node.replay_window = static_cast<unsigned>(v); }),
       }},
      {"routing",
       {
           integer_key("willingness", 0, 7,
                       "how willing this node is to relay for others: 0 never, 3 default, 7 always",
                       [](C& c, int64_t v) { c.node.routing.willingness = static_cast<uint8_t>(v); }),
           millis_key("hello_interval_ms", 100, kMaxIntervalMs, "milliseconds between HELLO messages",
                      [](C& c, D v) { c.node.routing.hello_interval = v; }),
           millis_key("tc_interval_ms", 100, kMaxIntervalMs, "milliseconds between TC messages",
                      [](C& c, D v) { c.node.routing.tc_interval = v; }),
           millis_key("mid_interval_ms", 100, kMaxIntervalMs, "milliseconds between MID messages",
                      [](C& c, D v) { c.node.routing.mid_interval = v; }),
           millis_key("hna_interval_ms", 100, kMaxIntervalMs, "milliseconds between HNA messages",
                      [](C& c, D v) { c.node.routing.hna_interval = v; }),
           millis_key("neighb_hold_ms", 1, kMaxHoldMs,
                      "milliseconds a neighbour's HELLO stays valid; more than hello_interval_ms",
                      [](C& c, D v) { c.node.routing.neighb_hold = v; }),
           millis_key("top_hold_ms", 1, kMaxHoldMs, "milliseconds a TC stays valid; more than tc_interval_ms",
                      [](C& c, D v) { c.node.routing.top_hold = v; }),
           millis_key("dup_hold_ms", 1, kMaxHoldMs, "milliseconds a flooded message is remembered as seen",
                      [](C& c, D v) { c.node.routing.dup_hold = v; }),
           millis_key("mid_hold_ms", 1, kMaxHoldMs, "milliseconds a MID stays valid; more than mid_interval_ms",
                      [](C& c, D v) { c.node.routing.mid_hold = v; }),
           millis_key("hna_hold_ms", 1, kMaxHoldMs, "milliseconds an HNA stays valid; more than hna_interval_ms",
                      [](C& c, D v) { c.node.routing.hna_hold = v; }),
           millis_key("max_jitter_ms", 0, kMaxIntervalMs,
                      "largest random advance of an emission; below hello_interval_ms",
                      [](C& c, D v) { c.node.routing.max_jitter = v; }),
           millis_key("route_recalc_interval_ms", 0, 10000,
                      "least milliseconds between two route calculations; the first change after a quiet "
                      "interval is calculated at once, later ones together at the interval's end",
                      [](C& c, D v) { c.node.routing.route_recalc_interval = v; }),
           custom_key("hna_networks", &Parser::read_hna_networks),
           boolean_key("install_kernel_routes",
                       "whether OLSR's routes are written into the kernel's routing table, for plain IP",
                       [](C& c, bool v) { c.kernel_routes.install = v; }),
           boolean_key("routing_only",
                       "whether this node runs OLSR only, as a plain router that relays IP but no agent messages "
                       "(for mixed-mesh tests and relays that should stay plain)",
                       [](C& c, bool v) { c.node.routing_only = v; }),
           boolean_key("mixed_mesh",
                       "whether this agent announces itself through OLSR and sends end to end across nodes that "
                       "run OLSR but no agent (needs install_kernel_routes on every node of the path)",
                       [](C& c, bool v) { c.node.mixed_mesh = v; }),
           integer_key("kernel_route_protocol", 5, 255,
                       "the routing protocol number marking the agent's kernel routes; 0 to 4 belong to the "
                       "kernel and the administrator, 158 is the default",
                       [](C& c, int64_t v) { c.kernel_routes.protocol = static_cast<uint8_t>(v); }),
       }},
      {"transport",
       {
           integer_key("default_ttl", 1, 255, "hops a message may travel",
                       [](C& c, int64_t v) { c.node.transport.default_ttl = static_cast<uint32_t>(v); }),
           millis_key("flood_hold_ms", 1, 3600000,
                      "milliseconds a flooded message is remembered, so late copies are ignored",
                      [](C& c, D v) { c.node.transport.flood_hold = v; }),
           boolean_key("hop_arq",
                       "whether each unicast hop of an agent message asks its next hop for a link-level ack and "
                       "is retransmitted until acked (off: 802.11 unicast already retransmits; on for lossy links "
                       "without that)",
                       [](C& c, bool v) { c.node.transport.hop_arq.enabled = v; }),
           integer_key(
               "hop_arq_retransmissions", 0, 16, "retransmissions of one hop datagram before it is given up",
               [](C& c, int64_t v) { c.node.transport.hop_arq.max_retransmissions = static_cast<uint32_t>(v); }),
           millis_key("hop_arq_initial_rto_ms", 1, 60000,
                      "milliseconds before a hop retransmission while the neighbour's round trip is unmeasured",
                      [](C& c, D v) { c.node.transport.hop_arq.initial_rto = v; }),
           millis_key("hop_arq_rto_floor_ms", 1, 60000, "least milliseconds before a hop retransmission",
                      [](C& c, D v) { c.node.transport.hop_arq.rto_floor = v; }),
           millis_key("hop_arq_rto_cap_ms", 1, 60000, "most milliseconds before a hop retransmission",
                      [](C& c, D v) { c.node.transport.hop_arq.rto_cap = v; }),
           millis_key("hop_arq_dedupe_hold_ms", 1, 3600000,
                      "milliseconds a received hop datagram is remembered, so a retransmission of it is not "
                      "handed on twice; more than (hop_arq_retransmissions + 1) * hop_arq_rto_cap_ms",
                      [](C& c, D v) { c.node.transport.hop_arq.dedupe_hold = v; }),
       }},
      {"requests",
       {
           millis_key("first_timeout_ms", 1, 60000, "milliseconds before the first retransmission",
                      [](C& c, D v) { c.node.messaging.retry.first_timeout = v; }),
           number_key("backoff", 1.0, 10.0, "each retransmission wait is the previous one times this",
                      [](C& c, double v) { c.node.messaging.retry.backoff = v; }),
           millis_key("max_interval_ms", 1, 600000, "longest wait between retransmissions",
                      [](C& c, D v) { c.node.messaging.retry.max_interval = v; }),
           number_key("jitter", 0.0, 0.5, "fraction each wait is randomly stretched or shrunk by",
                      [](C& c, double v) { c.node.messaging.retry.jitter = v; }),
           millis_key("deadline_ms", 1, 3600000, "milliseconds after which a request times out",
                      [](C& c, D v) { c.node.messaging.retry.deadline = v; }),
           millis_key("dedupe_hold_ms", 1, 86400000,
                      "milliseconds an answered request is remembered; more than deadline_ms",
                      [](C& c, D v) { c.node.messaging.dedupe_hold = v; }),
       }},
      {"membership",
       {
           millis_key("probe_period_ms", 10, kMaxIntervalMs,
                      "milliseconds between two probes of this node (Medley's protocol period)",
                      [](C& c, D v) { c.node.membership.probe_period = v; }),
           millis_key("probe_timeout_ms", 1, kMaxIntervalMs,
                      "milliseconds a direct probe waits for its ack before asking helpers; below probe_period_ms",
                      [](C& c, D v) { c.node.membership.probe_timeout = v; }),
           integer_key("indirect_checks", 0, 16, "helpers (K) asked to probe a target that missed its direct ack",
                       [](C& c, int64_t v) { c.node.membership.indirect_checks = static_cast<size_t>(v); }),
           number_key("alpha", 0.0, 10.0, "probe targets are drawn with probability ~ hops^-alpha; 0 is plain SWIM",
                      [](C& c, double v) { c.node.membership.alpha = v; }),
           number_key("suspicion_mult", 0.5, 100.0, "shortest suspicion timeout, in log-scaled probe periods",
                      [](C& c, double v) { c.node.membership.suspicion_mult = v; }),
           number_key("suspicion_max_mult", 1.0, 100.0, "longest suspicion timeout, as a multiple of the shortest",
                      [](C& c, double v) { c.node.membership.suspicion_max_mult = v; }),
           integer_key("retransmit_mult", 1, 100,
                       "each update is piggy-backed retransmit_mult * ceil(log10(N + 1)) times",
                       [](C& c, int64_t v) { c.node.membership.retransmit_mult = static_cast<uint32_t>(v); }),
           millis_key("join_retry_ms", 10, kMaxIntervalMs, "milliseconds before a join tries the next contact",
                      [](C& c, D v) { c.node.membership.join_retry = v; }),
           millis_key("push_pull_interval_ms", 100, 86400000,
                      "milliseconds between full-list exchanges with a random member",
                      [](C& c, D v) { c.node.membership.push_pull_interval = v; }),
           millis_key("reconnect_interval_ms", 100, 86400000,
                      "milliseconds between probes of one failed member, so split groups merge",
                      [](C& c, D v) { c.node.membership.reconnect_interval = v; }),
           seconds_key("failed_retention_s", 1, 604800,
                       "seconds failed and left members stay listed (meshctl members --all)",
                       [](C& c, D v) { c.node.membership.failed_retention = v; }),
           integer_key("silent_probes_to_suspect", 1, 10,
                       "probes in a row that nobody answers (no ack, no helper's nack) before the member is "
                       "suspected; 1 is classic SWIM",
                       [](C& c, int64_t v) { c.node.membership.silent_probes_to_suspect = static_cast<uint32_t>(v); }),
           integer_key("silence_radius_hops", 0, 255,
                       "hops beyond which an unanswered probe neither suspects the member nor raises local "
                       "health; 0 counts every probe",
                       [](C& c, int64_t v) { c.node.membership.silence_radius_hops = static_cast<uint32_t>(v); }),
           integer_key("far_nacks_to_suspect", 1, 16,
                       "helpers' nacks needed to suspect a member beyond silence_radius_hops",
                       [](C& c, int64_t v) { c.node.membership.far_nacks_to_suspect = static_cast<uint32_t>(v); }),
           integer_key("push_pull_scale_threshold", 0, 100000,
                       "above this many members the full-list exchange interval grows with log2 N "
                       "(memberlist's pushPullScale); 0 keeps it fixed",
                       [](C& c, int64_t v) { c.node.membership.push_pull_scale_threshold = static_cast<size_t>(v); }),
           integer_key("push_pull_fast_rounds", 0, 100,
                       "full-list exchanges at the unscaled interval after a member joins",
                       [](C& c, int64_t v) { c.node.membership.push_pull_fast_rounds = static_cast<uint32_t>(v); }),
       }},
      {"kgroup",
       {
           custom_key("k", &Parser::read_kgroup_k),
           choice_key("selection", {"hash", "lsh"},
                      "set selection = \"hash\" (consistent hashing across the mesh) or \"lsh\" (locality: "
                      "f + 1 members near the target, CoMesh 3.6)",
                      [](C& c, const std::string& v) {
                        c.node.kgroup.selection.mode =
                            v == "lsh" ? kgroup::SelectionMode::lsh : kgroup::SelectionMode::hash;
                      }),
           integer_key("lsh_m", 1, 16, "LSH: hash functions per table (m)",
                       [](C& c, int64_t v) { c.node.kgroup.selection.lsh.m = static_cast<uint32_t>(v); }),
           integer_key("lsh_l", 1, 16, "LSH: hash tables (l)",
                       [](C& c, int64_t v) { c.node.kgroup.selection.lsh.l = static_cast<uint32_t>(v); }),
           number_key("lsh_r", 0.01, 1000.0, "LSH: bucket width (r), in units of 10 m",
                      [](C& c, double v) { c.node.kgroup.selection.lsh.r = v; }),
           integer_key(
               "devices_per_cluster", 1, 10000, "devices per cluster when devices are grouped by location (k-means)",
               [](C& c, int64_t v) { c.node.kgroup.selection.clusters.devices_per_cluster = static_cast<size_t>(v); }),
           seconds_key("epoch_length_s", 1, 31536000,
                       "seconds between two migrations of a group (each group at its own offset)",
                       [](C& c, D v) { c.node.kgroup.epoch_length = v; }),
           millis_key("heartbeat_interval_ms", 1, kMaxIntervalMs,
                      "milliseconds between a leader's appends, each renewing its followers' lease",
                      [](C& c, D v) { c.node.kgroup.replica.heartbeat_interval = v; }),
           millis_key("lease_ms", 1, kMaxIntervalMs,
                      "milliseconds a follower trusts its leader after an append; more than heartbeat_interval_ms",
                      [](C& c, D v) { c.node.kgroup.replica.lease = v; }),
           millis_key("lease_margin_ms", 0, kMaxIntervalMs,
                      "milliseconds a leader stops trusting its lease early, for clock drift; below lease_ms",
                      [](C& c, D v) { c.node.kgroup.replica.lease_margin = v; }),
           boolean_key("coalesce_heartbeats",
                       "send the heartbeats of every group this node leads on one tick, those for one node in "
                       "one request (multi-Raft coalescing); false: each group heartbeats on its own",
                       [](C& c, bool v) { c.node.kgroup.replica.coalesce_heartbeats = v; }),
           millis_key("append_timeout_ms", 1, kMaxIntervalMs,
                      "milliseconds one append and its retransmissions may take",
                      [](C& c, D v) { c.node.kgroup.replica.append_timeout = v; }),
           millis_key("answer_timeout_ms", 1, kMaxIntervalMs,
                      "Bully: milliseconds to wait for higher-priority members to answer",
                      [](C& c, D v) { c.node.kgroup.replica.answer_timeout = v; }),
           millis_key("victory_timeout_ms", 1, kMaxIntervalMs,
                      "Bully: milliseconds to wait for a standing higher-priority member to win",
                      [](C& c, D v) { c.node.kgroup.replica.victory_timeout = v; }),
           millis_key("prepare_deadline_ms", 1, kMaxIntervalMs,
                      "milliseconds a leadership claim (or one page of state) may take",
                      [](C& c, D v) { c.node.kgroup.replica.prepare_deadline = v; }),
           millis_key("election_backoff_ms", 1, kMaxIntervalMs,
                      "after a failed claim, wait between this and twice this before the next",
                      [](C& c, D v) { c.node.kgroup.replica.election_backoff = v; }),
           millis_key("migration_retry_ms", 1, kMaxIntervalMs,
                      "milliseconds between retries of unanswered migration steps",
                      [](C& c, D v) { c.node.kgroup.replica.migration_retry = v; }),
           seconds_key("migration_postpone_max_s", 0, 86400,
                       "seconds past its epoch's end a group may put off its migration while its state asks "
                       "(a routine group while an invocation holds a Camera grant); 0: never put off",
                       [](C& c, D v) { c.node.kgroup.replica.migration_postpone_max = v; }),
           integer_key("snapshot_after_entries", 16, 1000000,
                       "applied log entries a group member holds before it snapshots its state and removes "
                       "them (log compaction); it bounds a group's storage within an epoch, and must exceed "
                       "the updates a group commits while one snapshot transfers to a member that is behind",
                       [](C& c, int64_t v) { c.node.kgroup.replica.snapshot_after_entries = static_cast<size_t>(v); }),
           millis_key("write_timeout_ms", 1, 3600000,
                      "milliseconds a client write may take before it is reported unacknowledged",
                      [](C& c, D v) { c.node.kgroup.write_timeout = v; }),
           millis_key("write_retry_ms", 1, kMaxIntervalMs,
                      "milliseconds before a client write asks again while a group elects or is created",
                      [](C& c, D v) { c.node.kgroup.write_retry = v; }),
           millis_key("write_attempt_timeout_ms", 1, kMaxIntervalMs,
                      "milliseconds one forwarded write waits for its answer before the next member is tried",
                      [](C& c, D v) { c.node.kgroup.write_attempt_timeout = v; }),
           millis_key("genesis_settle_ms", 0, kMaxIntervalMs,
                      "milliseconds after start, and after a member last joined, before this node creates a "
                      "target's first group",
                      [](C& c, D v) { c.node.kgroup.genesis_settle = v; }),
           seconds_key("genesis_failed_memory_s", 0, 86400,
                       "seconds a failed member still counts in the majority a node must see live to create a group",
                       [](C& c, D v) { c.node.kgroup.genesis_failed_memory = v; }),
       }},
      {"mutex",
       {
           integer_key("expected_nodes", 0, 100000,
                       "smart nodes the mesh is expected to have, the floor of Camera's N.upper estimate; "
                       "set it on every deployment, it keeps locks taken while the mesh boots safe",
                       [](C& c, int64_t v) { c.node.mutex.network_size.floor = static_cast<size_t>(v); }),
           seconds_key("boot_grace_s", 0, 3600,
                       "seconds after start during which a lock request on a small member list waits for "
                       "membership to grow; 0 turns the wait off",
                       [](C& c, D v) { c.node.mutex.boot_grace = v; }),
           millis_key("boot_settle_ms", 0, 600000,
                      "without expected_nodes: within boot_grace_s, a lock request also waits until the member "
                      "list has not grown for this many milliseconds; 0 turns the wait off",
                      [](C& c, D v) { c.node.mutex.boot_settle = v; }),
           millis_key("retry_first_timeout_ms", 1, 600000,
                      "milliseconds before a lock REQUEST, JOIN or tree message is sent again",
                      [](C& c, D v) { c.node.mutex.retry.first_timeout = v; }),
           number_key("retry_backoff", 1.0, 16.0, "multiplier of that wait per retransmission",
                      [](C& c, double v) { c.node.mutex.retry.backoff = v; }),
           millis_key("retry_max_interval_ms", 1, 3600000, "longest wait between two retransmissions",
                      [](C& c, D v) { c.node.mutex.retry.max_interval = v; }),
           seconds_key("retry_deadline_s", 1, 86400,
                       "seconds one lock message is retried; a peer still listed live is then asked again",
                       [](C& c, D v) { c.node.mutex.retry.deadline = v; }),
           millis_key("hold_lease_ms", 0, 3600000,
                      "a held lock stops counting as held once this many milliseconds pass without a majority of "
                      "the known nodes answering the holder (a holder cut off from the mesh lets go before the "
                      "rest may take the lock); at most two thirds of retry_deadline_s, 0 turns it off",
                      [](C& c, D v) { c.node.mutex.hold_lease = v; }),
           integer_key("tolerated_failures", 0, 16,
                       "f: failed slow-path tree nodes repaired by adoption (subtrees kept f + 1 levels deep)",
                       [](C& c, int64_t v) { c.node.mutex.tolerated_failures = static_cast<uint32_t>(v); }),
           seconds_key("size_window_s", 1, 604800,
                       "seconds a node id heard of counts towards Camera's N.upper estimate",
                       [](C& c, D v) { c.node.mutex.network_size.window = v; }),
           number_key("size_margin", 0.0, 10.0, "N.upper = ceil(ids heard of * (1 + size_margin))",
                      [](C& c, double v) { c.node.mutex.network_size.margin = v; }),
           boolean_key("slow_path",
                       "take Camera's slow path (spanning tree) when the member list is at most N.upper / 2",
                       [](C& c, bool v) { c.node.mutex.slow_path_enabled = v; }),
           integer_key("max_ok_bytes", 200, 1200,
                       "bytes an OK may take before its recently-OKed set is relayed instead of carried",
                       [](C& c, int64_t v) { c.node.mutex.max_ok_bytes = static_cast<size_t>(v); }),
       }},
      {"devices",
       {
           path_key("catalog", "the device catalog file, the same on every node (agent/catalog_file.h)",
                    [](C& c, const std::string& v) { c.catalog_file = v; }),
           millis_key("poll_interval_ms", 50, kMaxIntervalMs,
                      "milliseconds between two reads of a device by its device leader",
                      [](C& c, D v) { c.node.devices.leaders.poll_interval = v; }),
           integer_key("down_after_failures", 1, 100,
                       "failed reads in a row (each after the driver's own timeout) before a device is down",
                       [](C& c, int64_t v) { c.node.devices.leaders.down_after_failures = static_cast<uint32_t>(v); }),
           millis_key("command_timeout_ms", 100, kMaxIntervalMs,
                      "milliseconds meshctl device set waits for a command's outcome unless told otherwise",
                      [](C& c, D v) { c.node.devices.service.command_timeout = v; }),
           millis_key("actuation_stall_ms", 0, kMaxIntervalMs,
                      "milliseconds a command may go without its device showing the values it set, or any change "
                      "toward them, before it fails as not effective; 0 trusts the driver's report",
                      [](C& c, D v) { c.node.devices.leaders.actuation_stall = v; }),
           millis_key("actuation_check_ms", 10, kMaxIntervalMs,
                      "milliseconds between two reads of a device whose command has not shown its effect yet",
                      [](C& c, D v) { c.node.devices.leaders.actuation_check_interval = v; }),
           millis_key("catalog_sync_interval_ms", 100, kMaxIntervalMs,
                      "milliseconds between two catalog version exchanges with a random member",
                      [](C& c, D v) { c.node.devices.sync.interval = v; }),
           millis_key("subscription_renew_ms", 100, kMaxIntervalMs,
                      "milliseconds between two renewals of a node's device subscriptions",
                      [](C& c, D v) { c.node.devices.watcher.renew_interval = v; }),
           millis_key("subscription_lease_ms", 100, kMaxIntervalMs,
                      "milliseconds a device leader keeps a subscription that is not renewed; above "
                      "subscription_renew_ms",
                      [](C& c, D v) {
                        c.node.devices.watcher.lease = v;
                        c.node.devices.leaders.subscription_lease = v;
                      }),
       }},
      {"routines",
       {
           choice_key(
               "visibility", {"wv", "gsv", "psv", "sgsv", "ev"},
               "set visibility to \"ev\" (routines ordered by serial keys, each holding a device only from "
               "its first to its last command there: the default), \"psv\" (routines sharing a device never "
               "overlap), \"gsv\" (one routine at a time in the whole mesh), \"sgsv\" (gsv that also "
               "aborts a running routine when any device fails or restarts) or \"wv\" (no isolation), the "
               "same on every node",
               [](C& c, const std::string& v) { c.node.routines.leaders.visibility = *routine::parse_visibility(v); }),
           choice_key("ev_scheduler", {"tl", "fcfs", "jit"},
                      "set ev_scheduler to how an EV routine is ordered among those sharing its devices: \"tl\" "
                      "(timeline: into the first gap it fits on every device, the default), \"fcfs\" (after "
                      "every routine placed on its devices) or \"jit\" (only once its devices are unused)",
                      [](C& c, const std::string& v) {
                        c.node.routines.leaders.ev_scheduler = *routine::parse_ev_scheduler(v);
                      }),
           boolean_key("ev_pre_lease",
                       "whether an EV routine may go before one already placed on a device that has not used it "
                       "yet (SafeHome's pre-lease; off for experiments)",
                       [](C& c, bool v) { c.node.routines.leaders.ev_pre_lease = v; }),
           boolean_key("ev_post_lease",
                       "whether an EV routine gives a device up after its last command there rather than at its "
                       "end (SafeHome's post-lease; off for experiments)",
                       [](C& c, bool v) { c.node.routines.leaders.ev_post_lease = v; }),
           choice_key("precondition_value", {"closest_to_current", "lowest", "highest", "midpoint"},
                      "set precondition_value to how a precondition command picks a value inside a range: "
                      "\"closest_to_current\" (least change: the default), \"lowest\", \"highest\" or "
                      "\"midpoint\"",
                      [](C& c, const std::string& v) {
                        c.node.routines.leaders.deduction.interval = *routine::parse_interval_choice(v);
                      }),
           choice_key(
               "lock_strategy", {"sla", "ola", "aggressive"},
               "set lock_strategy to \"sla\" (one device lock at a time in increasing device id: "
               "deadlock-free, the default), \"ola\" (all at once, retried after a backoff) or "
               "\"aggressive\" (APEX's aggressive strategy: all at once, queued, each command run once "
               "its devices are held; an older invocation may abort it)",
               [](C& c, const std::string& v) { c.node.routines.leaders.strategy = *routine::parse_lock_strategy(v); }),
           millis_key("poll_interval_ms", 20, kMaxIntervalMs,
                      "milliseconds between two asks of a device group while a routine waits for a lock or an "
                      "outcome",
                      [](C& c, D v) { c.node.routines.leaders.poll_interval = v; }),
           millis_key("lock_renew_ms", 100, kMaxIntervalMs,
                      "milliseconds between two renewals of the device locks a routine leader holds",
                      [](C& c, D v) { c.node.routines.leaders.renew_interval = v; }),
           millis_key("lock_reclaim_ms", 1000, kMaxIntervalMs,
                      "milliseconds a device leader waits for a lock's renewal before taking the lock back; well "
                      "above lock_renew_ms",
                      [](C& c, D v) { c.node.devices.leaders.lock_reclaim_after = v; }),
           millis_key("ola_backoff_min_ms", 1, kMaxIntervalMs,
                      "shortest wait in milliseconds before an OLA routine tries its locks again",
                      [](C& c, D v) { c.node.routines.leaders.backoff_min = v; }),
           millis_key("ola_backoff_max_ms", 1, kMaxIntervalMs,
                      "longest wait in milliseconds before an OLA routine's first retry (it doubles with every "
                      "retry, up to 5 s)",
                      [](C& c, D v) { c.node.routines.leaders.backoff_max = v; }),
           millis_key("run_timeout_ms", 100, kMaxIntervalMs,
                      "milliseconds meshctl routine run --wait waits for the invocation's end unless told otherwise",
                      [](C& c, D v) { c.node.routines.service.run_timeout = v; }),
       }},
      {"admin",
       {
           path_key("socket", "the Unix socket meshctl connects to",
                    [](C& c, const std::string& v) { c.admin_socket = v; }),
           millis_key("ping_timeout_ms", 1, 600000, "how long meshctl ping waits for an answer",
                      [](C& c, D v) { c.node.ping_timeout = v; }),
       }},
      {"storage",
       {
           path_key("data_dir", "the directory holding this node's persistent state",
                    [](C& c, const std::string& v) { c.data_dir = v; }),
       }},
      {"log",
       {
           custom_key("level", &Parser::read_log_level),
           custom_key("layers", &Parser::read_log_layers),
       }},
  };
  return specs;
}

const std::vector<TableSpec>& table_specs() {
  static const std::vector<TableSpec> specs = [] {
    std::vector<TableSpec> out;
    for (const SectionSpec& section : Parser::sections()) {
      TableSpec& spec = out.emplace_back(TableSpec{section.name, {}});
      for (const KeySpec& key : section.keys) spec.keys.push_back(key.name);
    }
    return out;
  }();
  return specs;
}

}  // namespace

AgentConfig parse_config(std::string_view toml_text, const std::string& source_name, const std::string& base_dir) {
  return Parser(source_name, base_dir).parse(toml_text);
}

AgentConfig load_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ConfigError(
        fmt::format("{}: cannot read config file: {}. Fix: pass the path of an existing agent.toml "
                    "(deploy/examples/agent.toml documents every key).",
                    path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read config file: read error.", path));
  std::error_code error;
  auto absolute = std::filesystem::absolute(path, error);
  if (error) absolute = path;
  return parse_config(text.str(), path, absolute.parent_path().string());
}

std::vector<std::string> known_config_keys() {
  std::vector<std::string> keys;
  for (const auto& spec : table_specs()) {
    for (std::string_view key : spec.keys) {
      if (spec.name == "log" && key == "layers") {
        keys.push_back("log.layers.*");
      } else {
        keys.push_back(fmt::format("{}.{}", spec.name, key));
      }
    }
  }
  return keys;
}

std::vector<std::string> known_log_layers() { return {kLogLayers.begin(), kLogLayers.end()}; }

}  // namespace mesh::agent
