#pragma once

#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/node_id.h"
#include "core/storage.h"

namespace mesh::core {

// A set of node ids kept in storage across restarts. Layers use it to
// remember whom they have seen: a restarted node's member list is empty
// until membership has joined it again, and a decision that needs "how large
// is the mesh" (a majority, a quorum of votes) must not be taken on that
// empty list.
//
// Stored as a snapshot in `key` ("a,b,c", sorted) and a journal: one key per
// id remembered since the snapshot, `key` + ".added/" + the id, holding the
// id. A node that joins a mesh of N members remembers them one by one, and
// rewriting the whole set for each cost O(N) bytes (and a checksum over them)
// per member; a journal key costs one small put. The journal is folded into
// the snapshot (the snapshot put first, then the journal removed as one
// change) once it holds a quarter of the set, so the rewrites cost O(1) per
// id. Storage makes changes durable in the order they were made, so a crash
// at any point leaves the set as it was before the interrupted call or after
// it: an id is in the snapshot, in the journal, or in both until the journal
// removal lands; a forgotten id leaves the journal by its own removal, or
// leaves the snapshot by a rewrite after which the journal holds only ids
// still in the set.
//
// A put that fails is logged and counted in `write_failures`; the set in
// memory stays correct and the caller goes on (every layer that persists
// reports a failing storage), and the next rewrite of the snapshot stores
// it. Malformed or damaged entries are skipped, logged and counted in
// `unreadable`.
class PersistedNodeSet {
 public:
  // Reads the set back; folds a journal left by an earlier life into the
  // snapshot, so that this life's journal starts empty.
  PersistedNodeSet(Storage& storage, std::string key, size_t max_nodes, std::string log_component,
                   Counter& write_failures, Counter& unreadable);

  // The ids remembered from earlier lives (and this one), sorted, each once.
  const std::vector<NodeId>& nodes() const { return nodes_; }
  // Adds `id`; persists when it is new and the set has room.
  void remember(NodeId id);
  // Drops `id` and persists, if it was there.
  void forget(NodeId id);

  const std::string& key() const { return key_; }
  // Where the journal's keys start: `key` + ".added/".
  const std::string& journal_prefix() const { return journal_prefix_; }

 private:
  // Reads `key_`'s snapshot and then the journal into `ids`; whether the
  // stored state needs a rewrite (a damaged snapshot, a journal, bad entries).
  bool read_stored(std::vector<NodeId>& ids, Counter& unreadable);
  // Writes the whole set as the snapshot, then drops the journal.
  void compact();
  void report_write_failure();

  Storage& storage_;
  std::string key_;
  std::string journal_prefix_;
  size_t max_nodes_;
  std::string log_component_;
  Counter& write_failures_;
  std::vector<NodeId> nodes_;
  // The ids this life has journaled since the last compaction, sorted: they
  // are in the journal and may be missing from the snapshot.
  std::vector<NodeId> journaled_;
  // The snapshot no longer matches nodes_ minus journaled_ (it was damaged,
  // or a journal put failed): the next change rewrites it.
  bool snapshot_stale_ = false;
};

}  // namespace mesh::core
