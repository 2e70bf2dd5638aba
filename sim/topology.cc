#include "sim/topology.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "core/rng.h"

namespace mesh::sim {
namespace {

// Resampling gives a fair random graph most of the time; the repair step is
// only the fallback that guarantees termination.
constexpr int kResampleAttempts = 20;

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

void normalise(Topology& t) {
  for (auto& [a, b] : t.edges) {
    if (a > b) std::swap(a, b);
  }
  std::sort(t.edges.begin(), t.edges.end());
  t.edges.erase(std::unique(t.edges.begin(), t.edges.end()), t.edges.end());
}

double distance(const std::array<double, 3>& a, const std::array<double, 3>& b) {
  const double dx = a[0] - b[0];
  const double dy = a[1] - b[1];
  const double dz = a[2] - b[2];
  return std::sqrt(dx * dx + dy * dy + dz * dz);
}

void link_within_range(Topology& t, double range) {
  const int n = static_cast<int>(t.size());
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      if (distance(t.positions[i], t.positions[j]) <= range) t.edges.emplace_back(i, j);
    }
  }
}

// Component label of every node.
std::vector<int> components(const Topology& t) {
  const int n = static_cast<int>(t.size());
  std::vector<int> label(n, -1);
  int next = 0;
  for (int start = 0; start < n; ++start) {
    if (label[start] >= 0) continue;
    const auto dist = t.hop_distances(start);
    for (int i = 0; i < n; ++i) {
      if (dist[i] >= 0) label[i] = next;
    }
    ++next;
  }
  return label;
}

// Links the closest pair of nodes between the component of node 0 and the
// rest until everything is one component.
void repair(Topology& t) {
  while (true) {
    const auto label = components(t);
    const int n = static_cast<int>(t.size());
    int best_a = -1;
    int best_b = -1;
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < n; ++i) {
      if (label[i] != 0) continue;
      for (int j = 0; j < n; ++j) {
        if (label[j] == 0) continue;
        const double d = distance(t.positions[i], t.positions[j]);
        if (d < best) {
          best = d;
          best_a = i;
          best_b = j;
        }
      }
    }
    if (best_a < 0) break;
    t.edges.emplace_back(best_a, best_b);
    normalise(t);
  }
}

}  // namespace

std::vector<int> Topology::neighbours(int node) const {
  std::vector<int> out;
  for (const auto& [a, b] : edges) {
    if (a == node) out.push_back(b);
    if (b == node) out.push_back(a);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool Topology::connected_without(const std::set<size_t>& down) const {
  size_t start = 0;
  while (start < size() && down.count(start) != 0) ++start;
  if (start == size()) return true;
  std::vector<bool> seen(size(), false);
  std::vector<size_t> stack = {start};
  seen[start] = true;
  size_t reached = 1;
  while (!stack.empty()) {
    const size_t node = stack.back();
    stack.pop_back();
    for (const int next : neighbours(static_cast<int>(node))) {
      const auto u = static_cast<size_t>(next);
      if (seen[u] || down.count(u) != 0) continue;
      seen[u] = true;
      ++reached;
      stack.push_back(u);
    }
  }
  return reached == size() - down.size();
}

std::vector<int> Topology::hop_distances(int from) const {
  const int n = static_cast<int>(size());
  std::vector<std::vector<int>> adjacency(n);
  for (const auto& [a, b] : edges) {
    adjacency[a].push_back(b);
    adjacency[b].push_back(a);
  }
  std::vector<int> dist(n, -1);
  if (from < 0 || from >= n) return dist;
  std::deque<int> queue{from};
  dist[from] = 0;
  while (!queue.empty()) {
    const int node = queue.front();
    queue.pop_front();
    for (int next : adjacency[node]) {
      if (dist[next] >= 0) continue;
      dist[next] = dist[node] + 1;
      queue.push_back(next);
    }
  }
  return dist;
}

bool Topology::is_connected() const {
  if (size() == 0) return true;
  const auto dist = hop_distances(0);
  return std::all_of(dist.begin(), dist.end(), [](int d) { return d >= 0; });
}

std::string Topology::to_json() const {
  std::string out = fmt::format("{{\"kind\": \"{}\", \"nodes\": {}, \"positions\": [", kind, size());
  for (size_t i = 0; i < positions.size(); ++i) {
    const auto& p = positions[i];
    out += fmt::format("{}[{}, {}, {}]", i ? ", " : "", p[0], p[1], p[2]);
  }
  out += "], \"edges\": [";
  for (size_t i = 0; i < edges.size(); ++i) out += fmt::format("{}[{}, {}]", i ? ", " : "", edges[i].first, edges[i].second);
  out += "]}";
  return out;
}

Topology line(int n, const TopologyOptions& options) {
  require(n >= 0, "line: n must be >= 0");
  Topology t{"line", {}, {}};
  for (int i = 0; i < n; ++i) {
    t.positions.push_back({i * options.spacing, 0.0, 0.0});
    if (i > 0) t.edges.emplace_back(i - 1, i);
  }
  return t;
}

Topology grid(int width, int height, const TopologyOptions& options) {
  require(width >= 0 && height >= 0, "grid: width and height must be >= 0");
  Topology t{"grid", {}, {}};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const int i = y * width + x;
      t.positions.push_back({x * options.spacing, y * options.spacing, 0.0});
      if (x > 0) t.edges.emplace_back(i - 1, i);
      if (y > 0) t.edges.emplace_back(i - width, i);
    }
  }
  normalise(t);
  return t;
}

Topology grid_for(int n, const TopologyOptions& options) {
  require(n >= 0, "grid: n must be >= 0");
  Topology t{"grid", {}, {}};
  if (n == 0) return t;
  const int width = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));
  for (int i = 0; i < n; ++i) {
    const int x = i % width;
    const int y = i / width;
    t.positions.push_back({x * options.spacing, y * options.spacing, 0.0});
    if (x > 0) t.edges.emplace_back(i - 1, i);
    if (y > 0) t.edges.emplace_back(i - width, i);
  }
  normalise(t);
  return t;
}

Topology grid3d(int x_size, int y_size, int z_size, const TopologyOptions& options) {
  require(x_size >= 0 && y_size >= 0 && z_size >= 0, "grid3d: sizes must be >= 0");
  Topology t{"grid3d", {}, {}};
  for (int z = 0; z < z_size; ++z) {
    for (int y = 0; y < y_size; ++y) {
      for (int x = 0; x < x_size; ++x) {
        const int i = (z * y_size + y) * x_size + x;
        t.positions.push_back({x * options.spacing, y * options.spacing, z * options.spacing});
        if (x > 0) t.edges.emplace_back(i - 1, i);
        if (y > 0) t.edges.emplace_back(i - x_size, i);
        if (z > 0) t.edges.emplace_back(i - x_size * y_size, i);
      }
    }
  }
  normalise(t);
  return t;
}

Topology random_geometric(int n, uint64_t seed, const TopologyOptions& options) {
  require(n >= 0, "random: n must be >= 0");
  // Expected degree = (n - 1) * pi r^2 / side^2.
  const double r = options.radio_range;
  const double side =
      n > 1 ? r * std::sqrt(std::numbers::pi * static_cast<double>(n - 1) / options.mean_degree) : 0.0;
  core::Rng rng(seed);
  Topology t;
  for (int attempt = 0; attempt < kResampleAttempts; ++attempt) {
    t = Topology{"random", {}, {}};
    for (int i = 0; i < n; ++i) t.positions.push_back({rng.unit() * side, rng.unit() * side, 0.0});
    link_within_range(t, r);
    normalise(t);
    if (t.is_connected()) return t;
  }
  repair(t);
  return t;
}

Topology clustered(int n, int clusters, uint64_t seed, const TopologyOptions& options) {
  require(n >= 0, "clustered: n must be >= 0");
  require(clusters >= 1, "clustered: clusters must be >= 1");
  core::Rng rng(seed);
  // Centres far enough apart that clusters are distinct, close enough that
  // the bridges are a few hops, not a long cable.
  const double side = options.cluster_radius * 4.0 * std::sqrt(static_cast<double>(clusters));
  std::vector<std::array<double, 2>> centres;
  for (int c = 0; c < clusters; ++c) centres.push_back({rng.unit() * side, rng.unit() * side});
  Topology t{"clustered", {}, {}};
  // Cluster radius shrinks so that the within-cluster radio range keeps
  // each cluster connected in the common case.
  const double reach = std::min(options.radio_range * 0.75, options.cluster_radius);
  for (int i = 0; i < n; ++i) {
    const auto& centre = centres[static_cast<size_t>(i % clusters)];
    const double angle = rng.unit() * 2.0 * std::numbers::pi;
    const double radius = reach * std::sqrt(rng.unit());
    t.positions.push_back({centre[0] + radius * std::cos(angle), centre[1] + radius * std::sin(angle), 0.0});
  }
  link_within_range(t, options.radio_range * 0.75);
  normalise(t);
  repair(t);
  return t;
}

Topology lshape(int n, const TopologyOptions& options) {
  require(n >= 0, "lshape: n must be >= 0");
  Topology t{"lshape", {}, {}};
  const int east = (n + 1) / 2;
  for (int i = 0; i < n; ++i) {
    if (i < east) {
      t.positions.push_back({i * options.spacing, 0.0, 0.0});
    } else {
      t.positions.push_back({(east - 1) * options.spacing, (i - east + 1) * options.spacing, 0.0});
    }
    if (i > 0) t.edges.emplace_back(i - 1, i);
  }
  return t;
}

const std::vector<std::string>& topology_kinds() {
  static const std::vector<std::string> kinds{"line", "grid", "grid3d", "random", "clustered", "lshape"};
  return kinds;
}

}  // namespace mesh::sim
