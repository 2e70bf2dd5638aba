#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/node_id.h"
#include "mutex/request_id.h"

namespace mesh::mutex {

struct TreeEdge {
  core::NodeId child;
  core::NodeId parent;
  friend bool operator==(const TreeEdge&, const TreeEdge&) = default;
};

// The edges of `edges` (a tree hanging from `root`) whose child is at most
// `max_depth` levels below `root`.
std::vector<TreeEdge> limit_depth(core::NodeId root, const std::vector<TreeEdge>& edges, uint32_t max_depth);

// One node's part in one slow-path spanning tree (camera.md Algorithm 3):
// the tree that carries root's request `id` to every node and brings the
// OKs back. The tree is built asynchronously (first JOIN wins the parent,
// later ones are refused) rather than in BFS phases: the proofs (Lemma 8,
// Theorem 9) need a spanning tree, not a breadth-first one. A node OKs its
// parent once its JOINs are all answered, every node it waits for has OKed
// it, and its own fast-path condition holds.
struct SlowTree {
  RequestId id;
  uint32_t attempt = 0;
  bool is_root = false;
  // Parent first, then its ancestors, at most f + 1 of them.
  std::vector<core::NodeId> ancestors;
  std::set<core::NodeId> joined_from;    // sent us a JOIN this attempt (already in the tree)
  std::set<core::NodeId> joins_pending;  // our JOINs not answered yet
  std::set<core::NodeId> children;       // accepted our JOIN
  // Each child's subtree as its TREE echo reported it, `depth` levels deep.
  struct Report {
    std::vector<TreeEdge> edges;
    uint32_t depth = 0;
  };
  std::map<core::NodeId, Report> reported;
  // Whose subtree OK we need: our children, and the children of failed
  // children we adopted.
  std::set<core::NodeId> awaiting;
  std::set<core::NodeId> ok_from;
  // How many nodes each awaited node's subtree OK said it carries.
  std::map<core::NodeId, uint32_t> covered_by;
  bool own_ok = false;      // our own fast-path condition for id holds
  bool majority_retry_scheduled = false;  // root only: a rebuild is due because the tree covers a minority
  bool tree_sent = false;   // our TREE echo went to the current parent
  bool ok_sent = false;     // our subtree OK went to the current parent
  uint64_t high_water = 0;  // largest token high-water in the OKs we aggregate

  std::optional<core::NodeId> parent() const;
  // Every JOIN answered and every child reported its subtree.
  bool construction_done() const;
  // The whole subtree below (and including) this node has said OK.
  bool subtree_ok() const;
  // Distinct nodes whose OK the subtree OKs received so far carry, this node
  // included (a node joins one parent per attempt, so no node counts twice).
  uint32_t covered() const;
  // This node's subtree, `depth` levels deep: its children plus what they
  // reported.
  std::vector<TreeEdge> subtree_edges(core::NodeId self, uint32_t depth) const;

  // `failed` was a child (or an adopted node) whose OK we still need:
  // replace it by its own children, recursively past the ones `is_failed`
  // says are gone too. Returns the nodes newly awaited, or nullopt when the
  // failed node's subtree is not known deep enough, so only a rebuild of
  // the tree keeps it spanning. A node we do not wait for is ignored.
  std::optional<std::vector<core::NodeId>> adopt(core::NodeId failed,
                                                 const std::function<bool(core::NodeId)>& is_failed);
  // `failed` was an ancestor: drop it. Returns true if the parent changed.
  bool drop_ancestor(core::NodeId failed);
};

}  // namespace mesh::mutex
