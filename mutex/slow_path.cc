#include "mutex/slow_path.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

namespace mesh::mutex {

std::vector<TreeEdge> limit_depth(core::NodeId root, const std::vector<TreeEdge>& edges, uint32_t max_depth) {
  std::unordered_map<core::NodeId, std::vector<core::NodeId>> children;
  for (const auto& e : edges) children[e.parent].push_back(e.child);
  std::vector<TreeEdge> kept;
  std::deque<std::pair<core::NodeId, uint32_t>> queue{{root, 0}};
  std::set<core::NodeId> seen{root};
  while (!queue.empty()) {
    auto [node, depth] = queue.front();
    queue.pop_front();
    if (depth >= max_depth) continue;
    auto it = children.find(node);
    if (it == children.end()) continue;
    for (core::NodeId c : it->second) {
      // Hostile or stale reports may contain cycles; each node is kept once.
      if (!seen.insert(c).second) continue;
      kept.push_back({c, node});
      queue.emplace_back(c, depth + 1);
    }
  }
  return kept;
}

std::optional<core::NodeId> SlowTree::parent() const {
  if (ancestors.empty()) return std::nullopt;
  return ancestors.front();
}

bool SlowTree::construction_done() const {
  if (!joins_pending.empty()) return false;
  return std::all_of(children.begin(), children.end(), [&](core::NodeId c) { return reported.count(c) != 0; });
}

bool SlowTree::subtree_ok() const {
  if (!joins_pending.empty() || !own_ok) return false;
  return std::all_of(awaiting.begin(), awaiting.end(), [&](core::NodeId n) { return ok_from.count(n) != 0; });
}

uint32_t SlowTree::covered() const {
  uint32_t count = 1;
  for (core::NodeId n : awaiting) {
    auto it = covered_by.find(n);
    if (it != covered_by.end() && ok_from.count(n) != 0) count += it->second;
  }
  return count;
}

std::vector<TreeEdge> SlowTree::subtree_edges(core::NodeId self, uint32_t depth) const {
  std::vector<TreeEdge> all;
  for (core::NodeId c : children) {
    all.push_back({c, self});
    auto it = reported.find(c);
    if (it != reported.end()) all.insert(all.end(), it->second.edges.begin(), it->second.edges.end());
  }
  return limit_depth(self, all, depth);
}

std::optional<std::vector<core::NodeId>> SlowTree::adopt(core::NodeId failed,
                                                         const std::function<bool(core::NodeId)>& is_failed) {
  if (joins_pending.count(failed)) return std::nullopt;  // it may have children we never heard of
  if (!awaiting.count(failed) || ok_from.count(failed)) return std::vector<core::NodeId>{};
  auto report = reported.find(failed);
  if (report == reported.end()) return std::nullopt;
  // Levels below `failed`: its report holds `depth` of them.
  const uint32_t depth = report->second.depth;
  std::unordered_map<core::NodeId, std::vector<core::NodeId>> below;
  for (const auto& e : report->second.edges) below[e.parent].push_back(e.child);
  std::vector<std::pair<core::NodeId, uint32_t>> adopted;  // node, level below `failed`
  std::deque<std::pair<core::NodeId, uint32_t>> queue{{failed, 0}};
  std::set<core::NodeId> seen{failed};
  while (!queue.empty()) {
    auto [node, level] = queue.front();
    queue.pop_front();
    for (core::NodeId c : below[node]) {
      if (!seen.insert(c).second) continue;
      if (!is_failed(c)) {
        adopted.emplace_back(c, level + 1);
        continue;
      }
      // A failed node at the deepest reported level hides its children.
      if (level + 1 >= depth) return std::nullopt;
      queue.emplace_back(c, level + 1);
    }
  }
  awaiting.erase(failed);
  children.erase(failed);
  const std::vector<TreeEdge> failed_edges = report->second.edges;
  reported.erase(failed);
  std::vector<core::NodeId> nodes;
  for (auto [a, level] : adopted) {
    awaiting.insert(a);
    children.insert(a);
    // What we know of the adopted node's own subtree, so a later failure of
    // it can be adopted as well.
    reported[a] = Report{limit_depth(a, failed_edges, depth - level), depth - level};
    nodes.push_back(a);
  }
  return nodes;
}

bool SlowTree::drop_ancestor(core::NodeId failed) {
  auto it = std::find(ancestors.begin(), ancestors.end(), failed);
  if (it == ancestors.end()) return false;
  const bool was_parent = it == ancestors.begin();
  ancestors.erase(it);
  if (was_parent) {
    tree_sent = false;
    ok_sent = false;
  }
  return was_parent;
}

}  // namespace mesh::mutex
