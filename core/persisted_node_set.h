#pragma once

#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/node_id.h"
#include "core/storage.h"

namespace mesh::core {

// A set of node ids kept in one storage key ("a,b,c"), rewritten whenever it
// changes. Layers use it to remember whom they have seen across a restart:
// a restarted node's member list is empty until membership has joined it
// again, and a decision that needs "how large is the mesh" (a majority, a
// quorum of votes) must not be taken on that empty list.
//
// A put that fails is logged and counted in `write_failures`; the set in
// memory stays correct and the caller goes on (every layer that persists
// reports a failing storage). Malformed ids in the stored value are skipped,
// logged and counted in `unreadable`.
class PersistedNodeSet {
 public:
  PersistedNodeSet(Storage& storage, std::string key, size_t max_nodes, std::string log_component,
                   Counter& write_failures, Counter& unreadable);

  // The ids remembered from earlier lives (and this one), sorted, each once.
  const std::vector<NodeId>& nodes() const { return nodes_; }
  // Adds `id`; persists when it is new and the set has room.
  void remember(NodeId id);
  // Drops `id` and persists, if it was there.
  void forget(NodeId id);

  const std::string& key() const { return key_; }

 private:
  // Where the id at `index` of nodes_ starts in text_.
  size_t text_offset(size_t index) const;
  void write();

  Storage& storage_;
  std::string key_;
  size_t max_nodes_;
  std::string log_component_;
  Counter& write_failures_;
  std::vector<NodeId> nodes_;
  // The stored value, nodes_ as "a,b,c", edited in place as ids come and go:
  // a node that joins a mesh of N members remembers them one by one, and
  // formatting every id for each of them cost O(N) tree steps and
  // conversions per member; the put still copies O(N) bytes.
  std::string text_;
};

}  // namespace mesh::core
