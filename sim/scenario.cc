#include "sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace mesh::sim {
namespace {

// Ranges a scenario may ask for; beyond them a run would be meaningless or
// would not fit in memory and minutes.
constexpr int kMaxNodes = 10000;
constexpr double kMaxDelayMs = 60'000.0;
constexpr double kMaxDurationS = 86'400.0;
constexpr double kMaxPingIntervalMs = 3'600'000.0;
constexpr int64_t kMaxClusters = 1000;

class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const toml::source_region& where, std::string_view key, std::string_view problem,
                         std::string_view fix) const {
    throw ScenarioError(fmt::format("{}:{}:{}: {}: {}; {}", file_, where.begin.line, where.begin.column, key, problem,
                                    fix));
  }

  void check_keys(const toml::table& table, std::string_view section,
                  std::initializer_list<std::string_view> allowed) const {
    for (auto&& [key, node] : table) {
      if (std::find(allowed.begin(), allowed.end(), key.str()) != allowed.end()) continue;
      std::string names;
      for (auto name : allowed) names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
      fail(key.source(), qualified(section, key.str()), "unknown key",
           fmt::format("remove it or use one of: {}", names));
    }
  }

  const toml::table* section(const toml::table& root, std::string_view name, bool required) const {
    const toml::node* node = root.get(name);
    if (!node) {
      if (required) {
        fail(root.source(), fmt::format("[{}]", name), "missing section",
             fmt::format("add a [{}] table (see meshsim --help)", name));
      }
      return nullptr;
    }
    if (!node->is_table()) {
      fail(node->source(), name, "must be a table", fmt::format("write it as a [{}] section", name));
    }
    return node->as_table();
  }

  double number(const toml::table& table, std::string_view section, std::string_view key, double fallback, double lo,
                double hi, std::string_view example) const {
    const toml::node* node = table.get(key);
    if (!node) return fallback;
    const std::string name = qualified(section, key);
    double value = 0.0;
    if (auto i = node->as_integer()) {
      value = static_cast<double>(i->get());
    } else if (auto f = node->as_floating_point()) {
      value = f->get();
    } else {
      fail(node->source(), name, "must be a number", fmt::format("write e.g. {} = {}", key, example));
    }
    if (!std::isfinite(value) || value < lo || value > hi) {
      fail(node->source(), name, fmt::format("{} is out of range", value),
           fmt::format("use a value in [{}, {}], e.g. {} = {}", lo, hi, key, example));
    }
    return value;
  }

  int64_t integer(const toml::table& table, std::string_view section, std::string_view key, int64_t fallback,
                  int64_t lo, int64_t hi, bool required = false) const {
    const toml::node* node = table.get(key);
    const std::string name = qualified(section, key);
    if (!node) {
      if (required) {
        fail(table.source(), name, "missing key", fmt::format("add {} = <integer in [{}, {}]>", key, lo, hi));
      }
      return fallback;
    }
    return integer_value(*node, name, key, lo, hi);
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

  std::string choice(const toml::table& table, std::string_view section, std::string_view key,
                     const std::vector<std::string>& allowed, const std::string* fallback) const {
    const toml::node* node = table.get(key);
    const std::string name = qualified(section, key);
    std::string options;
    for (const auto& a : allowed) options += fmt::format("{}\"{}\"", options.empty() ? "" : ", ", a);
    if (!node) {
      if (fallback) return *fallback;
      fail(table.source(), name, "missing key", fmt::format("add {} = one of {}", key, options));
    }
    auto s = node->as_string();
    if (!s) fail(node->source(), name, "must be a string", fmt::format("write {} = one of {}", key, options));
    if (std::find(allowed.begin(), allowed.end(), s->get()) == allowed.end()) {
      fail(node->source(), name, fmt::format("\"{}\" is not allowed", s->get()), fmt::format("use one of {}", options));
    }
    return s->get();
  }

  static std::string qualified(std::string_view section, std::string_view key) {
    return section.empty() ? std::string(key) : fmt::format("{}.{}", section, key);
  }

 private:
  std::string file_;
};

const std::vector<std::string>& action_names() {
  static const std::vector<std::string> names{"crash", "restart", "link_down", "link_up", "partition", "heal"};
  return names;
}

void read_topology(const Reader& r, const toml::table& t, Scenario& s) {
  r.check_keys(t, "topology", {"kind", "nodes", "width", "height", "depth", "clusters", "seed"});
  auto& topo = s.topology;
  topo.kind = r.choice(t, "topology", "kind", topology_kinds(), nullptr);
  const bool is_grid = topo.kind == "grid";
  const bool is_grid3d = topo.kind == "grid3d";
  if (!is_grid && !is_grid3d) {
    for (auto key : {"width", "height", "depth"}) {
      if (const toml::node* n = t.get(key)) {
        r.fail(n->source(), Reader::qualified("topology", key), fmt::format("not used by kind \"{}\"", topo.kind),
               "remove it, or use kind = \"grid\" / \"grid3d\"");
      }
    }
  }
  if (is_grid) {
    if (const toml::node* n = t.get("depth")) {
      r.fail(n->source(), "topology.depth", "not used by kind \"grid\"", "remove it, or use kind = \"grid3d\"");
    }
  }
  if (topo.kind != "clustered") {
    if (const toml::node* n = t.get("clusters")) {
      r.fail(n->source(), "topology.clusters", fmt::format("not used by kind \"{}\"", topo.kind),
             "remove it, or use kind = \"clustered\"");
    }
  }
  topo.seed = static_cast<uint64_t>(r.integer(t, "topology", "seed", 1, 0, INT64_MAX));
  if (is_grid3d) {
    topo.width = static_cast<int>(r.integer(t, "topology", "width", 0, 1, kMaxNodes, true));
    topo.height = static_cast<int>(r.integer(t, "topology", "height", 0, 1, kMaxNodes, true));
    topo.depth = static_cast<int>(r.integer(t, "topology", "depth", 0, 1, kMaxNodes, true));
    const int64_t product = int64_t{topo.width} * topo.height * topo.depth;
    if (product > kMaxNodes) {
      r.fail(t.source(), "topology.width*height*depth", fmt::format("{} nodes is too many", product),
             fmt::format("keep the product at most {}", kMaxNodes));
    }
    if (const toml::node* n = t.get("nodes"); n && r.integer(t, "topology", "nodes", 0, 1, kMaxNodes) != product) {
      r.fail(n->source(), "topology.nodes", fmt::format("does not equal width*height*depth = {}", product),
             "remove nodes or make it match");
    }
    topo.nodes = static_cast<int>(product);
    return;
  }
  if (is_grid && (t.get("width") || t.get("height"))) {
    topo.width = static_cast<int>(r.integer(t, "topology", "width", 0, 1, kMaxNodes, true));
    topo.height = static_cast<int>(r.integer(t, "topology", "height", 0, 1, kMaxNodes, true));
    const int64_t product = int64_t{topo.width} * topo.height;
    if (product > kMaxNodes) {
      r.fail(t.source(), "topology.width*height", fmt::format("{} nodes is too many", product),
             fmt::format("keep the product at most {}", kMaxNodes));
    }
    if (const toml::node* n = t.get("nodes"); n && r.integer(t, "topology", "nodes", 0, 1, kMaxNodes) != product) {
      r.fail(n->source(), "topology.nodes", fmt::format("does not equal width*height = {}", product),
             "remove nodes or make it match");
    }
    topo.nodes = static_cast<int>(product);
    return;
  }
  topo.nodes = static_cast<int>(r.integer(t, "topology", "nodes", 0, 1, kMaxNodes, true));
  if (topo.kind == "clustered") {
    topo.clusters = static_cast<int>(r.integer(t, "topology", "clusters", 3, 1, std::min<int64_t>(kMaxClusters, topo.nodes)));
  }
}

int node_index(const Reader& r, const toml::table& t, std::string_view section, std::string_view key, int nodes) {
  return static_cast<int>(r.integer(t, section, key, 0, 0, nodes - 1, true));
}

ScenarioEvent read_event(const Reader& r, const toml::table& t, size_t index, const Scenario& s,
                         const Topology& topology) {
  const std::string section = fmt::format("event[{}]", index);
  ScenarioEvent e;
  e.line = static_cast<int>(t.source().begin.line);
  const std::string action = r.choice(t, section, "action", action_names(), nullptr);
  e.action = static_cast<EventAction>(
      std::find(action_names().begin(), action_names().end(), action) - action_names().begin());
  const toml::node* at = t.get("at_s");
  if (!at) r.fail(t.source(), section + ".at_s", "missing key", "add at_s = <seconds from the start>");
  e.at = core::from_seconds(r.number(t, section, "at_s", 0.0, 0.0, s.run.duration_s, "10"));
  const int nodes = static_cast<int>(topology.size());
  switch (e.action) {
    case EventAction::crash:
    case EventAction::restart:
      r.check_keys(t, section, {"at_s", "action", "node"});
      e.node = node_index(r, t, section, "node", nodes);
      break;
    case EventAction::link_down:
    case EventAction::link_up: {
      r.check_keys(t, section, {"at_s", "action", "a", "b"});
      e.a = node_index(r, t, section, "a", nodes);
      e.b = node_index(r, t, section, "b", nodes);
      const std::pair<int, int> edge{std::min(e.a, e.b), std::max(e.a, e.b)};
      if (!std::binary_search(topology.edges.begin(), topology.edges.end(), edge)) {
        r.fail(t.get("b")->source(), section + ".a/b", fmt::format("nodes {} and {} have no link", e.a, e.b),
               "name two neighbours (meshsim topology KIND --nodes N lists the edges)");
      }
      break;
    }
    case EventAction::partition: {
      r.check_keys(t, section, {"at_s", "action", "groups"});
      const toml::node* groups = t.get("groups");
      if (!groups) r.fail(t.source(), section + ".groups", "missing key", "add groups = [[0, 1], [2, 3]]");
      const toml::array* outer = groups->as_array();
      if (!outer || outer->empty()) {
        r.fail(groups->source(), section + ".groups", "must be a non-empty array of arrays of node indices",
               "write e.g. groups = [[0, 1], [2, 3]]");
      }
      std::set<int> seen;
      for (const toml::node& g : *outer) {
        const toml::array* inner = g.as_array();
        if (!inner) {
          r.fail(g.source(), section + ".groups", "each group must be an array of node indices",
                 "write e.g. groups = [[0, 1], [2, 3]]");
        }
        std::vector<int> group;
        for (const toml::node& n : *inner) {
          const int i = static_cast<int>(r.integer_value(n, section + ".groups", "node", 0, nodes - 1));
          if (!seen.insert(i).second) {
            r.fail(n.source(), section + ".groups", fmt::format("node {} is in two groups", i),
                   "list each node at most once");
          }
          group.push_back(i);
        }
        e.groups.push_back(std::move(group));
      }
      break;
    }
    case EventAction::heal:
      r.check_keys(t, section, {"at_s", "action"});
      break;
  }
  return e;
}

Scenario read(const toml::table& root, const std::string& source) {
  Reader r(source);
  Scenario s;
  s.source = source;
  r.check_keys(root, "", {"topology", "link", "run", "workload", "event"});

  read_topology(r, *r.section(root, "topology", true), s);

  if (const toml::table* t = r.section(root, "link", false)) {
    r.check_keys(*t, "link", {"delay_ms", "jitter_ms", "loss"});
    s.link.delay_ms = r.number(*t, "link", "delay_ms", s.link.delay_ms, 0.0, kMaxDelayMs, "5");
    s.link.jitter_ms = r.number(*t, "link", "jitter_ms", s.link.jitter_ms, 0.0, kMaxDelayMs, "2");
    s.link.loss = r.number(*t, "link", "loss", s.link.loss, 0.0, 1.0, "0.1");
  }
  if (const toml::table* t = r.section(root, "run", false)) {
    r.check_keys(*t, "run", {"duration_s", "seed"});
    s.run.duration_s = r.number(*t, "run", "duration_s", s.run.duration_s, 0.001, kMaxDurationS, "30");
    s.run.seed = static_cast<uint64_t>(r.integer(*t, "run", "seed", 1, 0, INT64_MAX));
  }
  if (const toml::table* t = r.section(root, "workload", false)) {
    r.check_keys(*t, "workload", {"ping_interval_ms", "ping_targets"});
    if (t->get("ping_targets")) {
      static const std::vector<std::string> kTargets = {"neighbours", "any"};
      const std::string targets = r.choice(*t, "workload", "ping_targets", kTargets, nullptr);
      s.workload.ping_targets =
          targets == "any" ? Scenario::WorkloadSection::Targets::any : Scenario::WorkloadSection::Targets::neighbours;
    }
    s.workload.ping_interval_ms =
        r.number(*t, "workload", "ping_interval_ms", 0.0, 0.0, kMaxPingIntervalMs, "200");
    if (s.workload.ping_interval_ms > 0.0 && s.workload.ping_interval_ms < 1.0) {
      r.fail(t->get("ping_interval_ms")->source(), "workload.ping_interval_ms", "below 1 ms",
             "use 0 for no pings or at least 1");
    }
  }

  const Topology topology = s.build_topology();
  if (const toml::node* events = root.get("event")) {
    const toml::array* array = events->as_array();
    if (!array || !array->is_array_of_tables()) {
      r.fail(events->source(), "event", "must be an array of tables", "write each event as an [[event]] section");
    }
    size_t index = 0;
    for (const toml::node& node : *array) s.events.push_back(read_event(r, *node.as_table(), index++, s, topology));
  }
  std::stable_sort(s.events.begin(), s.events.end(),
                   [](const ScenarioEvent& a, const ScenarioEvent& b) { return a.at < b.at; });
  return s;
}

}  // namespace

std::string_view to_string(EventAction action) { return action_names()[static_cast<size_t>(action)]; }

Topology Scenario::build_topology() const {
  const auto& t = topology;
  if (t.kind == "line") return line(t.nodes);
  if (t.kind == "grid") return t.width > 0 ? grid(t.width, t.height) : grid_for(t.nodes);
  if (t.kind == "grid3d") return grid3d(t.width, t.height, t.depth);
  if (t.kind == "random") return random_geometric(t.nodes, t.seed);
  if (t.kind == "clustered") return clustered(t.nodes, t.clusters, t.seed);
  if (t.kind == "lshape") return lshape(t.nodes);
  throw ScenarioError(fmt::format("{}: topology.kind: unknown kind \"{}\"", source, t.kind));
}

LinkParams Scenario::link_params() const {
  LinkParams p;
  p.delay = core::from_millis(link.delay_ms);
  p.jitter = core::from_millis(link.jitter_ms);
  p.loss = link.loss;
  p.up = true;
  return p;
}

Scenario parse_scenario(std::string_view text, std::string_view source_name) {
  const std::string source(source_name);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw ScenarioError(fmt::format("{}:{}:{}: {}; fix the TOML syntax", source, e.source().begin.line,
                                    e.source().begin.column, e.description()));
  }
  return read(root, source);
}

Scenario load_scenario(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(fmt::format("{}: cannot open the scenario file; check the path", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_scenario(text.str(), path);
}

}  // namespace mesh::sim
