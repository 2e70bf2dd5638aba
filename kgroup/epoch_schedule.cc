#include "kgroup/epoch_schedule.h"

#include <algorithm>

#include "core/sha256.h"

namespace mesh::kgroup {

EpochSchedule::EpochSchedule(core::Duration length, core::TimePoint origin, bool per_group_offset)
    : length_(std::max(length, core::Duration(1))), origin_(origin), per_group_offset_(per_group_offset) {}

core::Duration EpochSchedule::offset(const GroupTarget& target) const {
  if (!per_group_offset_) return core::Duration::zero();
  const core::Sha256Digest digest = core::sha256(std::string_view("mesh-kgroup-epoch-v1" + target.to_string()));
  uint64_t h = 0;
  for (size_t i = 0; i < 8; ++i) h = (h << 8) | digest[i];
  return core::Duration(static_cast<int64_t>(h % static_cast<uint64_t>(length_.count())));
}

uint64_t EpochSchedule::epoch_at(const GroupTarget& target, core::TimePoint now) const {
  const core::Duration since = now - origin_ + offset(target);
  if (since.count() <= 0) return 0;
  return static_cast<uint64_t>(since.count() / length_.count());
}

core::TimePoint EpochSchedule::epoch_end(const GroupTarget& target, uint64_t epoch) const {
  return origin_ - offset(target) + length_ * static_cast<int64_t>(epoch + 1);
}

}  // namespace mesh::kgroup
