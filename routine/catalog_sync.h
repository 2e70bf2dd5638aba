#pragma once

#include <cstdint>
#include <set>

#include "core/env.h"
#include "core/metrics.h"
#include "core/storage.h"
#include "membership/member_view.h"
#include "routine/catalog.h"
#include "routine/routine_messages.h"

namespace mesh::routine {

struct CatalogSyncOptions {
  // Anti-entropy: every interval, compare versions with one random live member.
  core::Duration interval = std::chrono::seconds(2);
  // Rumour: a node that learns a newer version tells this many random live
  // members at once, so a change reaches every node in about log(N) hops of
  // gossip instead of log(N) intervals.
  size_t fanout = 3;
  // One page of changes per datagram.
  size_t max_page_bytes = 900;
};

// Spreads the catalog's run-time changes to every node, epidemic style, and
// keeps them on disk.
//
// The catalog group's members learn each committed entry from their replica
// (learn()); everyone else from gossip: a node sends its version (a digest)
// to a random live member every interval and to `fanout` members whenever
// its version grows; the receiver answers a lower version with the missing
// entries, one page at a time (the asker repeats its digest for the next
// page), and a higher one with its own digest, so the exchange runs both
// ways. Only nodes that hold a change send digests on their own, so a mesh
// without run-time changes pays nothing. Entries are only ever appended at version() + 1, so every node holds
// a prefix of the one committed list. The list is persisted on every change:
// a restarted node starts from its copy and catches up by gossip, and after
// a whole-mesh restart the copies (and the catalog group's own state) are
// all still there.
class CatalogSync {
 public:
  CatalogSync(core::Env& env, RoutineMessages& messages, core::Storage& storage, membership::MemberView& view,
              core::Metrics& metrics, Catalog& catalog, CatalogSyncOptions options);
  CatalogSync(const CatalogSync&) = delete;
  CatalogSync& operator=(const CatalogSync&) = delete;

  // Loads the persisted list into the catalog and starts gossiping.
  void start();
  // An entry committed by the catalog group, applied by this node's replica.
  void learn(const proto::CatalogEntry& entry);

  static constexpr std::string_view kStorageKey = "catalog/runtime";

 private:
  void on_digest(const core::Message& message, const proto::CatalogDigest& digest);
  void on_changes(const core::Message& message, const proto::CatalogChanges& changes);
  void send_digest(core::NodeId to);
  void gossip(size_t count);
  void persist();
  // Warn once per peer whose catalog file differs from ours.
  void check_file(core::NodeId peer, const std::string& digest);

  core::Env& env_;
  RoutineMessages& messages_;
  core::Storage& storage_;
  membership::MemberView& view_;
  Catalog& catalog_;
  CatalogSyncOptions options_;
  core::ScopedTimer timer_;
  std::set<core::NodeId> warned_file_;
  core::Counter& entries_learned_;
  core::Counter& pages_sent_;
  core::Counter& file_mismatches_;
};

}  // namespace mesh::routine
