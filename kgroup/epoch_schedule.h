#pragma once

#include <cstdint>

#include "core/time.h"
#include "kgroup/group_target.h"

namespace mesh::kgroup {

// When each group's epochs begin and end (CoMesh 3.4): epochs have one
// mesh-wide length, and each target is shifted by its own offset in
// [0, length) (from SHA-256 of the target) so that groups migrate at
// different times. Epoch e of target D covers
//   [origin - offset(D) + e * length, origin - offset(D) + (e + 1) * length).
// Every node must read `now` on a common time base for epochs to agree; a
// group's migration, though, is started by its leader alone, so nodes whose
// clocks disagree slightly still agree on each group's successor.
class EpochSchedule {
 public:
  EpochSchedule(core::Duration length, core::TimePoint origin, bool per_group_offset = true);

  core::Duration length() const { return length_; }
  core::Duration offset(const GroupTarget& target) const;
  uint64_t epoch_at(const GroupTarget& target, core::TimePoint now) const;
  // When epoch `epoch` of `target` ends (and epoch + 1 begins).
  core::TimePoint epoch_end(const GroupTarget& target, uint64_t epoch) const;

 private:
  core::Duration length_;
  core::TimePoint origin_;
  bool per_group_offset_;
};

}  // namespace mesh::kgroup
