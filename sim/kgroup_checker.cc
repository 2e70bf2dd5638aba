#include "sim/kgroup_checker.h"

namespace mesh::sim {

std::string group_key(const proto::KgroupRef& ref) {
  return ref.target() + "#" + std::to_string(ref.epoch()) + "." + std::to_string(ref.generation());
}

void KgroupChecker::applied(const std::string& target, size_t position, uint64_t value) {
  auto [it, inserted] = history_[target].emplace(position, value);
  if (!inserted && it->second != value) {
    fail(target + " position " + std::to_string(position) + " holds " + std::to_string(it->second) + " and " +
         std::to_string(value));
  }
}

void KgroupChecker::elected(const std::string& group, uint64_t term, core::NodeId leader) {
  auto [it, inserted] = leaders_[group].emplace(term, leader);
  if (!inserted && it->second != leader) {
    fail("group " + group + " term " + std::to_string(term) + " won by " + it->second.to_string() + " and " +
         leader.to_string());
  }
}

void KgroupChecker::submitted(const std::string& target, uint64_t value) {
  const auto it = max_acked_.find(target);
  floor_at_submit_[value] = it == max_acked_.end() ? std::nullopt : std::optional<size_t>(it->second.position);
}

void KgroupChecker::acked(const std::string& target, size_t position, uint64_t value) {
  acked_.push_back({target, position, value});
  const auto floor = floor_at_submit_.find(value);
  if (floor != floor_at_submit_.end() && floor->second && position <= *floor->second) {
    fail("value " + std::to_string(value) + " acknowledged at position " + std::to_string(position) +
         " though position " + std::to_string(*floor->second) + " was acknowledged before it was submitted");
  }
  auto [latest, first] = max_acked_.try_emplace(target, Latest{position, value});
  if (!first && position > latest->second.position) latest->second = {position, value};
}

void KgroupChecker::read(const std::string& target, const std::string& who, const std::vector<uint64_t>& values) {
  const auto it = max_acked_.find(target);
  if (it == max_acked_.end()) return;
  const Latest& latest = it->second;
  if (values.size() <= latest.position || values[latest.position] != latest.value) {
    fail(who + " would serve a stale read: " + std::to_string(values.size()) + " values, position " +
         std::to_string(latest.position) + " was acknowledged");
  }
}

void KgroupChecker::fail(const std::string& what) {
  if (failures_.size() < 10) failures_.push_back(what);
}

}  // namespace mesh::sim
