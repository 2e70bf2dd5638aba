#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "routine/precedence_graph.h"
#include "routine/routine_schedule.h"

namespace mesh::routine {

// Where a lock access stands (safehome.md §4.3, Fig. 5): planned
// (scheduled), in use (acquired), used and given up (released), and the
// final states of its routine. Aborted accesses no longer hold or order
// anything.
enum class AccessStatus { scheduled, acquired, released, committed, aborted };
std::string_view to_string(AccessStatus status);

// One routine's use of one device's lock during [start, end).
struct LockAccess {
  InvocationId invocation = 0;
  core::TimePoint start{};
  core::TimePoint end{};
  AccessStatus status = AccessStatus::scheduled;

  bool live() const { return status != AccessStatus::aborted; }
  friend bool operator==(const LockAccess&, const LockAccess&) = default;
};

// A device's lineage (§4.3): the time-ordered plan of who holds its lock
// when. Live accesses never overlap (Invariant 1, future mutual exclusion);
// Invariants 2 and 3 (at most one acquired, released before acquired before
// scheduled) follow from that once statuses come from one clock
// (LineageTable::advance).
class Lineage {
 public:
  const std::vector<LockAccess>& accesses() const { return accesses_; }

  // Adds `access` in start order. Refused (false, nothing changes) when it
  // is empty (end <= start) or overlaps a live access.
  bool insert(const LockAccess& access);
  // The live access of an invocation other than `self` that ends last at or
  // before `at`, and the one that starts first at or after `at`: the
  // neighbours a new access at `at` would be serialized after and before.
  const LockAccess* last_ending_by(core::TimePoint at, InvocationId self) const;
  const LockAccess* first_starting_from(core::TimePoint at, InvocationId self) const;

 private:
  friend class LineageTable;
  std::vector<LockAccess> accesses_;
};

// The lineage table (§4.3): one lineage per device, and what follows from
// all of them together, the precedence among routines.
class LineageTable {
 public:
  // When an invocation holds its locks: from its first access to the end of
  // its last (early lock acquisition, §4.1: a routine takes all its locks
  // at its start and keeps them until it finishes).
  struct Span {
    core::TimePoint start{};
    core::TimePoint finish{};
  };

  bool insert(const std::string& device, const LockAccess& access);
  const Lineage* find(const std::string& device) const;
  const std::map<std::string, Lineage>& lineages() const { return lineages_; }

  // The span of every invocation with a live access.
  std::map<InvocationId, Span> spans() const;

  // Statuses at `now` of accesses that are not final: released once ended,
  // acquired while running, scheduled before.
  void advance(core::TimePoint now);
  void commit(InvocationId invocation);
  void abort(InvocationId invocation);

  // Invariant 4 made explicit: an edge a -> b for every device on which a's
  // access comes right before b's (the rest of each lineage's order follows
  // by transitivity). Acyclic in any table the schedulers built.
  PrecedenceGraph precedence() const;

 private:
  void set_status(InvocationId invocation, AccessStatus status);

  std::map<std::string, Lineage> lineages_;
};

}  // namespace mesh::routine
