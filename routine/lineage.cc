#include "routine/lineage.h"

#include <algorithm>

namespace mesh::routine {

std::string_view to_string(AccessStatus status) {
  switch (status) {
    case AccessStatus::scheduled:
      return "scheduled";
    case AccessStatus::acquired:
      return "acquired";
    case AccessStatus::released:
      return "released";
    case AccessStatus::committed:
      return "committed";
    case AccessStatus::aborted:
      return "aborted";
  }
  return "unknown";
}

bool Lineage::insert(const LockAccess& access) {
  if (access.end <= access.start) return false;
  for (const auto& other : accesses_) {
    if (other.live() && other.start < access.end && access.start < other.end) return false;
  }
  auto at = std::upper_bound(accesses_.begin(), accesses_.end(), access.start,
                             [](core::TimePoint start, const LockAccess& other) { return start < other.start; });
  accesses_.insert(at, access);
  return true;
}

const LockAccess* Lineage::last_ending_by(core::TimePoint at, InvocationId self) const {
  const LockAccess* found = nullptr;
  for (const auto& access : accesses_) {
    if (access.live() && access.invocation != self && access.end <= at) found = &access;
  }
  return found;
}

const LockAccess* Lineage::first_starting_from(core::TimePoint at, InvocationId self) const {
  for (const auto& access : accesses_) {
    if (access.live() && access.invocation != self && access.start >= at) return &access;
  }
  return nullptr;
}

bool LineageTable::insert(const std::string& device, const LockAccess& access) {
  return lineages_[device].insert(access);
}

const Lineage* LineageTable::find(const std::string& device) const {
  auto it = lineages_.find(device);
  return it == lineages_.end() ? nullptr : &it->second;
}

std::map<InvocationId, LineageTable::Span> LineageTable::spans() const {
  std::map<InvocationId, Span> spans;
  for (const auto& [device, lineage] : lineages_) {
    for (const auto& access : lineage.accesses_) {
      if (!access.live()) continue;
      auto [it, added] = spans.try_emplace(access.invocation, Span{access.start, access.end});
      if (!added) {
        it->second.start = std::min(it->second.start, access.start);
        it->second.finish = std::max(it->second.finish, access.end);
      }
    }
  }
  return spans;
}

void LineageTable::advance(core::TimePoint now) {
  for (auto& [device, lineage] : lineages_) {
    for (auto& access : lineage.accesses_) {
      if (access.status == AccessStatus::committed || access.status == AccessStatus::aborted) continue;
      if (access.end <= now) {
        access.status = AccessStatus::released;
      } else if (access.start <= now) {
        access.status = AccessStatus::acquired;
      } else {
        access.status = AccessStatus::scheduled;
      }
    }
  }
}

void LineageTable::commit(InvocationId invocation) { set_status(invocation, AccessStatus::committed); }

void LineageTable::abort(InvocationId invocation) { set_status(invocation, AccessStatus::aborted); }

void LineageTable::set_status(InvocationId invocation, AccessStatus status) {
  for (auto& [device, lineage] : lineages_) {
    for (auto& access : lineage.accesses_) {
      if (access.invocation == invocation) access.status = status;
    }
  }
}

PrecedenceGraph LineageTable::precedence() const {
  PrecedenceGraph graph;
  for (const auto& [device, lineage] : lineages_) {
    const LockAccess* previous = nullptr;
    for (const auto& access : lineage.accesses_) {
      if (!access.live()) continue;
      graph.add_node(access.invocation);
      if (previous != nullptr && previous->invocation != access.invocation) {
        graph.add_edge(previous->invocation, access.invocation);
      }
      previous = &access;
    }
  }
  return graph;
}

}  // namespace mesh::routine
