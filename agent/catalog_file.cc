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

#include "core/sha256.h"

namespace mesh::agent {
namespace {

constexpr std::array<std::string_view, 6> kDeviceKeys = {"id", "kind", "location", "room", "floor", "driver"};
constexpr std::string_view kKeys = "id, kind, location, room, floor, driver";

uint32_t line_of(const toml::node& node) {
  const auto line = node.source().begin.line;
  return line == 0 ? 1 : line;
}

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
  explicit CatalogParser(std::string source) : source_(std::move(source)) {}

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
      if (key.str() != "device") {
        fail(line_of(node), key.str(), "unknown table", "a catalog holds [[device]] tables only");
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
             fmt::format("add {} = \"...\" to this [[device]]", key));
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

  std::string source_;
  std::vector<std::string> errors_;
  std::map<std::string, uint32_t> first_line_;
};

}  // namespace

core::Expected<CatalogFile, std::string> parse_catalog(std::string_view text, const std::string& source) {
  return CatalogParser(source).parse(text);
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
