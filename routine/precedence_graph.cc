#include "routine/precedence_graph.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace mesh::routine {

void PrecedenceGraph::add_node(uint64_t node) {
  successors_.try_emplace(node);
  predecessors_.try_emplace(node);
}

void PrecedenceGraph::add_edge(uint64_t from, uint64_t to) {
  add_node(from);
  add_node(to);
  if (from == to) return;
  successors_[from].insert(to);
  predecessors_[to].insert(from);
}

std::set<uint64_t> PrecedenceGraph::reach(uint64_t node, const std::map<uint64_t, std::set<uint64_t>>& edges) const {
  std::set<uint64_t> seen{node};
  std::vector<uint64_t> stack{node};
  while (!stack.empty()) {
    uint64_t at = stack.back();
    stack.pop_back();
    auto it = edges.find(at);
    if (it == edges.end()) continue;
    for (uint64_t next : it->second) {
      if (seen.insert(next).second) stack.push_back(next);
    }
  }
  return seen;
}

std::set<uint64_t> PrecedenceGraph::descendants(uint64_t node) const { return reach(node, successors_); }

std::set<uint64_t> PrecedenceGraph::ancestors(uint64_t node) const { return reach(node, predecessors_); }

std::optional<std::vector<uint64_t>> PrecedenceGraph::find_cycle() const {
  // Iterative three-colour depth-first search; the grey path is the cycle
  // once an edge leads back into it.
  enum class Colour { white, grey, black };
  std::map<uint64_t, Colour> colour;
  for (const auto& [node, unused] : successors_) colour[node] = Colour::white;
  for (const auto& [root, unused] : successors_) {
    if (colour[root] != Colour::white) continue;
    std::vector<uint64_t> path{root};
    std::vector<std::set<uint64_t>::const_iterator> next{successors_.at(root).begin()};
    colour[root] = Colour::grey;
    while (!path.empty()) {
      uint64_t at = path.back();
      auto& it = next.back();
      if (it == successors_.at(at).end()) {
        colour[at] = Colour::black;
        path.pop_back();
        next.pop_back();
        continue;
      }
      uint64_t to = *it++;
      if (colour[to] == Colour::grey) {
        auto first = std::find(path.begin(), path.end(), to);
        return std::vector<uint64_t>(first, path.end());
      }
      if (colour[to] == Colour::white) {
        colour[to] = Colour::grey;
        path.push_back(to);
        next.push_back(successors_.at(to).begin());
      }
    }
  }
  return std::nullopt;
}

std::optional<std::vector<uint64_t>> PrecedenceGraph::topological_order() const {
  std::map<uint64_t, size_t> waiting_for;
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> ready;
  for (const auto& [node, before] : predecessors_) {
    waiting_for[node] = before.size();
    if (before.empty()) ready.push(node);
  }
  std::vector<uint64_t> order;
  while (!ready.empty()) {
    uint64_t node = ready.top();
    ready.pop();
    order.push_back(node);
    for (uint64_t next : successors_.at(node)) {
      if (--waiting_for[next] == 0) ready.push(next);
    }
  }
  if (order.size() != successors_.size()) return std::nullopt;
  return order;
}

}  // namespace mesh::routine
