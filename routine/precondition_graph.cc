#include "routine/precondition_graph.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace mesh::routine {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

void add_unique(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

void add_edge(PreconditionGraph& graph, size_t precondition, size_t dependent, const std::string& rule) {
  for (auto& edge : graph.edges) {
    if (edge.precondition == precondition && edge.dependent == dependent) {
      add_unique(edge.rules, rule);
      return;
    }
  }
  graph.edges.push_back({precondition, dependent, {rule}});
}

// If an edge precondition -> dependent would close a cycle (dependent
// already precedes precondition, or they are one vertex), the cycle as text,
// the new edge first.
std::optional<std::string> cycle_through(const PreconditionGraph& graph, size_t precondition, size_t dependent,
                                         const std::string& rule) {
  auto name = [&](size_t vertex) { return graph.vertices[vertex].condition.variable.text(); };
  std::string cycle = fmt::format("{} before {} (rule {})", name(precondition), name(dependent), rule);
  if (precondition == dependent) return cycle;
  // Breadth-first from `dependent` along precondition -> dependent edges,
  // remembering the edge that reached each vertex.
  std::vector<std::optional<size_t>> reached_by(graph.vertices.size());
  std::deque<size_t> queue{dependent};
  std::vector<bool> seen(graph.vertices.size(), false);
  seen[dependent] = true;
  while (!queue.empty() && !seen[precondition]) {
    const size_t from = queue.front();
    queue.pop_front();
    for (size_t e = 0; e < graph.edges.size(); ++e) {
      const PegEdge& edge = graph.edges[e];
      if (edge.precondition != from || seen[edge.dependent]) continue;
      seen[edge.dependent] = true;
      reached_by[edge.dependent] = e;
      queue.push_back(edge.dependent);
    }
  }
  if (!seen[precondition]) return std::nullopt;
  std::vector<size_t> path;
  for (size_t at = precondition; at != dependent; at = graph.edges[*reached_by[at]].precondition) {
    path.push_back(*reached_by[at]);
  }
  std::reverse(path.begin(), path.end());
  for (size_t e : path) {
    const PegEdge& edge = graph.edges[e];
    cycle += fmt::format(", {} before {} (rule {})", name(edge.precondition), name(edge.dependent), joined(edge.rules));
  }
  return cycle;
}

std::string shaped_by(const PegVertex& vertex) {
  std::vector<std::string> who;
  if (vertex.subject) who.emplace_back("the subject command");
  if (!vertex.required_by.empty()) {
    who.push_back(fmt::format("rule{} {}", vertex.required_by.size() == 1 ? "" : "s", joined(vertex.required_by)));
  }
  return joined(who);
}

}  // namespace

std::vector<size_t> PreconditionGraph::preconditions_of(size_t vertex) const {
  std::vector<size_t> out;
  for (const auto& edge : edges) {
    if (edge.dependent == vertex) out.push_back(edge.precondition);
  }
  return out;
}

std::vector<std::vector<size_t>> PreconditionGraph::levels() const {
  // Kahn's algorithm in rounds: a vertex becomes ready in the round after
  // its last precondition's, which is one after its highest precondition's
  // level. A vertex on a cycle (never from build_graph) is in no level.
  const size_t n = vertices.size();
  std::vector<size_t> waiting(n, 0);
  for (const auto& edge : edges) {
    if (edge.precondition < n && edge.dependent < n) ++waiting[edge.dependent];
  }
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> ready;
  for (size_t v = 0; v < n; ++v) {
    if (waiting[v] == 0) ready.push_back(v);
  }
  while (!ready.empty()) {
    out.push_back(ready);
    std::vector<size_t> next;
    for (size_t v : ready) {
      for (const auto& edge : edges) {
        if (edge.precondition != v || edge.dependent >= n) continue;
        if (--waiting[edge.dependent] == 0) next.push_back(edge.dependent);
      }
    }
    std::sort(next.begin(), next.end());
    ready = std::move(next);
  }
  return out;
}

std::string PreconditionGraph::describe() const {
  if (vertices.empty()) return "empty precondition graph\n";
  std::string out = fmt::format("PEG of {}: {} {}, {} {}, depth {}\n", vertices.front().condition.text(),
                                vertices.size(), vertices.size() == 1 ? "vertex" : "vertices", edges.size(),
                                edges.size() == 1 ? "edge" : "edges", depth());
  for (size_t v = 0; v < vertices.size(); ++v) {
    std::string before;
    for (const auto& edge : edges) {
      if (edge.precondition != v) continue;
      before += fmt::format("{}[{}] ({})", before.empty() ? "" : ", ", edge.dependent, joined(edge.rules));
    }
    out += fmt::format("[{}] {}{}\n", v, vertices[v].condition.text(),
                       vertices[v].subject ? "  (subject)"
                       : before.empty()    ? ""
                                           : "  before " + before);
  }
  return out;
}

core::Expected<PreconditionGraph, std::string> build_graph(const AttributeCondition& subject,
                                                           const std::vector<PreconditionRule>& rules) {
  if (!subject.settable) {
    return core::Unexpected(
        fmt::format("{} is a reading: no command sets it, so it cannot be a subject command", subject.variable.text()));
  }
  if (is_empty(subject.domain)) {
    return core::Unexpected(fmt::format("the subject condition on {} holds for no value", subject.variable.text()));
  }
  std::map<Variable, std::vector<const PreconditionRule*>> rules_by_when;
  for (const auto& rule : rules) rules_by_when[rule.when.variable].push_back(&rule);

  PreconditionGraph graph;
  graph.vertices.push_back({subject, {}, true});
  std::map<Variable, size_t> vertex_of = {{subject.variable, 0}};
  std::deque<size_t> queue = {0};
  while (!queue.empty()) {
    const size_t dependent = queue.front();
    queue.pop_front();
    const auto relevant = rules_by_when.find(graph.vertices[dependent].condition.variable);
    if (relevant == rules_by_when.end()) continue;
    for (const PreconditionRule* rule : relevant->second) {
      if (is_empty(intersect(graph.vertices[dependent].condition.domain, rule->when.domain))) continue;
      for (const auto& requirement : rule->preconditions) {
        const auto found = vertex_of.find(requirement.variable);
        if (found == vertex_of.end()) {
          const size_t added = graph.vertices.size();
          graph.vertices.push_back({requirement, {rule->id}, false});
          vertex_of.emplace(requirement.variable, added);
          graph.edges.push_back({added, dependent, {rule->id}});
          queue.push_back(added);
          continue;
        }
        const size_t existing = found->second;
        if (auto cycle = cycle_through(graph, existing, dependent, rule->id)) {
          return core::Unexpected("precondition rules form a cycle: " + *cycle);
        }
        PegVertex& vertex = graph.vertices[existing];
        ValueDomain merged = intersect(vertex.condition.domain, requirement.domain);
        if (is_empty(merged)) {
          return core::Unexpected(fmt::format(
              "precondition rules conflict on {}: rule {} requires {}, but {} is already required by {}; no "
              "value satisfies both",
              requirement.variable.text(), rule->id, requirement.text(), vertex.condition.text(), shaped_by(vertex)));
        }
        vertex.condition.domain = std::move(merged);
        add_unique(vertex.required_by, rule->id);
        add_edge(graph, existing, dependent, rule->id);
      }
    }
  }
  return graph;
}

}  // namespace mesh::routine
