#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "core/node_id.h"
#include "core/time.h"
#include "routing/route_calculation.h"

namespace mesh::routing::olsr {

// OLSR's topology set (RFC 3626 §4.4): (T_dest, T_last, T_seq, T_time)
// tuples, every T_last's tuples carrying one ANSN (§9.5 drops a TC's older
// tuples of its originator as it adds its own).
//
// Stored flat, sorted by (T_last, T_dest), because every route calculation
// reads the whole set: kept per originator in a tree, each with its own
// vector, that read chased two pointers per originator of the mesh and was
// the largest cost of a 1000-node run. A TC that adds or drops links splices
// its originator's range in one move; the usual TC, which only renews its
// links, writes their times in place.
class TopologySet {
 public:
  struct Tuple {
    core::NodeId last;  // T_last: the originator of the TC
    core::NodeId dest;  // T_dest
    uint16_t ansn = 0;
    core::TimePoint time;
    friend bool operator==(const Tuple&, const Tuple&) = default;
  };

  // The ANSN of the tuples held from `originator`, if any.
  std::optional<uint16_t> ansn_of(core::NodeId originator) const;
  // §9.5 steps 3 and 4 for a TC the caller found not stale (step 2): the
  // originator's tuples of another ANSN go, each advertised destination not
  // held gets a tuple, the others are renewed, all until `until`. Whether a
  // tuple was added or removed (what the route calculation reads).
  bool apply_tc(core::NodeId originator, uint16_t ansn, std::span<const core::NodeId> advertised,
                core::TimePoint until);
  // Drops every tuple whose time is at or before `now`; whether any went.
  bool expire(core::TimePoint now);
  // The earliest time of any tuple, if any (not const: it drops the
  // schedule's stale entries on the way).
  std::optional<core::TimePoint> earliest_expiry();

  // A tuple added or removed.
  struct EdgeChange {
    RoutingInput::TopologyEdge edge;
    bool added = false;
  };
  // Every tuple added or removed since the last clear_changes(), in order:
  // the route calculation tests them against its last table
  // (RouteCalculator::edge_change_may_alter()). The owner clears them after
  // each calculation.
  const std::vector<EdgeChange>& changes() const { return changes_; }
  void clear_changes() { changes_.clear(); }

  // (T_last, T_dest) of every tuple, sorted: the route calculation's input.
  const std::vector<RoutingInput::TopologyEdge>& edges() const { return edges_; }
  // Every tuple, sorted by (T_last, T_dest).
  std::vector<Tuple> tuples() const;
  size_t size() const { return edges_.size(); }

 private:
  struct Entry {
    core::NodeId dest;
    core::TimePoint time;
  };
  // The index range of `originator`'s tuples.
  std::pair<size_t, size_t> range_of(core::NodeId originator) const;
  // Records the tuples of `originator` in [begin, end) that `entries`
  // (sorted by destination) drops, and those it adds.
  void record_changes(size_t begin, size_t end, core::NodeId originator, const std::vector<Entry>& entries);
  // Replaces the tuples in [begin, end) with `originator`'s `entries`.
  void splice(size_t begin, size_t end, core::NodeId originator, uint16_t ansn, const std::vector<Entry>& entries);
  // Whether a tuple of `last` has exactly `time`: an expiry entry that no
  // longer names one is stale.
  bool holds(core::NodeId last, core::TimePoint time) const;

  // Three parallel arrays, one element per tuple, in (T_last, T_dest) order.
  std::vector<RoutingInput::TopologyEdge> edges_;
  std::vector<core::TimePoint> times_;
  std::vector<uint16_t> ansns_;
  // When tuples expire, as a min-heap of (time, T_last): one entry per TC
  // that set a time, not one per tuple, and never moved nor removed. Every
  // tuple's time has an entry of its originator; entries whose tuples were
  // renewed or replaced since are stale, skipped when they come up. A tree
  // of (time, T_last, T_dest) moved two nodes (and an allocation each) per
  // advertised link per TC, and every TC of the mesh reaches every node.
  struct Expiry {
    core::TimePoint time;
    core::NodeId last;
    friend auto operator<=>(const Expiry&, const Expiry&) = default;
  };
  std::vector<Expiry> expiry_;
  // Whether expiry_'s front names a tuple, as earliest_expiry() last found:
  // it is asked after every packet, and most change nothing at the front.
  bool front_checked_ = true;
  std::vector<EdgeChange> changes_;
  // Scratch, kept to spare allocations per TC.
  std::vector<core::NodeId> added_;
  std::vector<Entry> entries_;
};

}  // namespace mesh::routing::olsr
