#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace mesh::routine {

// A "serialized-before" relation (safehome.md §4.3, Invariant 4) as a
// directed graph: an edge a -> b says a must come before b in any serial
// order. Nodes are opaque numbers (invocation ids for the scheduler, indexes
// of routines and failure events for the serial-order check).
//
// Why acyclic is what matters: a serial order consistent with every edge
// exists exactly when the graph has no cycle (any topological order is one),
// and the edges are the only orderings the execution fixed.
class PrecedenceGraph {
 public:
  void add_node(uint64_t node);
  // Adds both nodes. A self edge is ignored: an item is never before itself.
  void add_edge(uint64_t from, uint64_t to);

  // `node` and every node a path leads to from it.
  std::set<uint64_t> descendants(uint64_t node) const;
  // `node` and every node with a path to it.
  std::set<uint64_t> ancestors(uint64_t node) const;

  // One cycle n0 -> n1 -> ... -> nk -> n0 as [n0, ..., nk] (the first a
  // depth-first search in node order meets); none if the graph is acyclic.
  std::optional<std::vector<uint64_t>> find_cycle() const;
  // A topological order, taking the smallest ready node first (so it is a
  // pure function of the graph); none if the graph has a cycle.
  std::optional<std::vector<uint64_t>> topological_order() const;

 private:
  std::set<uint64_t> reach(uint64_t node, const std::map<uint64_t, std::set<uint64_t>>& edges) const;

  std::map<uint64_t, std::set<uint64_t>> successors_;
  std::map<uint64_t, std::set<uint64_t>> predecessors_;
};

}  // namespace mesh::routine
