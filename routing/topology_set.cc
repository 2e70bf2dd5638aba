#include "routing/topology_set.h"

#include <algorithm>
#include <functional>

namespace mesh::routing::olsr {

std::pair<size_t, size_t> TopologySet::range_of(core::NodeId originator) const {
  auto [lo, hi] = std::equal_range(edges_.begin(), edges_.end(), RoutingInput::TopologyEdge{originator, {}},
                                   [](const auto& a, const auto& b) { return a.last < b.last; });
  return {static_cast<size_t>(lo - edges_.begin()), static_cast<size_t>(hi - edges_.begin())};
}

std::optional<uint16_t> TopologySet::ansn_of(core::NodeId originator) const {
  const auto [begin, end] = range_of(originator);
  if (begin == end) return std::nullopt;
  return ansns_[begin];
}

bool TopologySet::apply_tc(core::NodeId originator, uint16_t ansn, std::span<const core::NodeId> advertised,
                           core::TimePoint until) {
  const auto [begin, end] = range_of(originator);
  const bool replaced = begin != end && ansns_[begin] != ansn;
  const auto first = edges_.begin() + static_cast<ptrdiff_t>(begin);
  const auto last = edges_.begin() + static_cast<ptrdiff_t>(replaced ? begin : end);
  added_.clear();
  bool renewed = false;
  for (core::NodeId dest : advertised) {
    auto held = std::lower_bound(first, last, dest, [](const auto& e, core::NodeId d) { return e.dest < d; });
    if (held != last && held->dest == dest) {
      times_[static_cast<size_t>(held - edges_.begin())] = until;
      renewed = true;
    } else {
      added_.push_back(dest);
    }
  }
  // Renewing or replacing the tuples of the earliest entry's originator may
  // have made it stale.
  if (!expiry_.empty() && expiry_.front().last == originator) front_checked_ = false;
  if (renewed || !added_.empty()) {
    expiry_.push_back(Expiry{until, originator});
    std::push_heap(expiry_.begin(), expiry_.end(), std::greater<>{});
  }
  if (!replaced && added_.empty()) return false;
  std::sort(added_.begin(), added_.end());
  added_.erase(std::unique(added_.begin(), added_.end()), added_.end());
  // The originator's new range: the tuples kept, merged with the added ones.
  entries_.clear();
  size_t kept = begin;
  const size_t kept_end = replaced ? begin : end;
  for (core::NodeId dest : added_) {
    while (kept < kept_end && edges_[kept].dest < dest) {
      entries_.push_back(Entry{edges_[kept].dest, times_[kept]});
      ++kept;
    }
    entries_.push_back(Entry{dest, until});
  }
  for (; kept < kept_end; ++kept) entries_.push_back(Entry{edges_[kept].dest, times_[kept]});
  record_changes(begin, end, originator, entries_);
  splice(begin, end, originator, ansn, entries_);
  return true;
}

void TopologySet::record_changes(size_t begin, size_t end, core::NodeId originator, const std::vector<Entry>& entries) {
  // Both sides sorted by destination: one merge. A new ANSN renews most of
  // the tuples it replaces, which change no edge.
  size_t held = begin;
  auto next = entries.begin();
  while (held < end || next != entries.end()) {
    if (next == entries.end() || (held < end && edges_[held].dest < next->dest)) {
      changes_.push_back(EdgeChange{edges_[held++], false});
    } else if (held == end || next->dest < edges_[held].dest) {
      changes_.push_back(EdgeChange{RoutingInput::TopologyEdge{originator, next->dest}, true});
      ++next;
    } else {
      ++held;
      ++next;
    }
  }
}

void TopologySet::splice(size_t begin, size_t end, core::NodeId originator, uint16_t ansn,
                         const std::vector<Entry>& entries) {
  const size_t held = end - begin;
  const auto at = [](auto& v, size_t i) { return v.begin() + static_cast<ptrdiff_t>(i); };
  if (entries.size() > held) {
    const size_t grow = entries.size() - held;
    edges_.insert(at(edges_, end), grow, RoutingInput::TopologyEdge{});
    times_.insert(at(times_, end), grow, core::TimePoint{});
    ansns_.insert(at(ansns_, end), grow, uint16_t{0});
  } else if (entries.size() < held) {
    const size_t keep_end = begin + entries.size();
    edges_.erase(at(edges_, keep_end), at(edges_, end));
    times_.erase(at(times_, keep_end), at(times_, end));
    ansns_.erase(at(ansns_, keep_end), at(ansns_, end));
  }
  for (size_t k = 0; k < entries.size(); ++k) {
    edges_[begin + k] = RoutingInput::TopologyEdge{originator, entries[k].dest};
    times_[begin + k] = entries[k].time;
    ansns_[begin + k] = ansn;
  }
}

bool TopologySet::holds(core::NodeId last, core::TimePoint time) const {
  const auto [begin, end] = range_of(last);
  return std::find(times_.begin() + static_cast<ptrdiff_t>(begin), times_.begin() + static_cast<ptrdiff_t>(end),
                   time) != times_.begin() + static_cast<ptrdiff_t>(end);
}

bool TopologySet::expire(core::TimePoint now) {
  // Every tuple at or before `now` has an entry at or before `now`, so only
  // the originators of those entries can lose tuples.
  bool any = false;
  while (!expiry_.empty() && expiry_.front().time <= now) {
    const core::NodeId last = expiry_.front().last;
    std::pop_heap(expiry_.begin(), expiry_.end(), std::greater<>{});
    expiry_.pop_back();
    front_checked_ = false;
    const auto [begin, end] = range_of(last);
    for (size_t i = begin; i < end && !any; ++i) any = times_[i] <= now;
  }
  if (!any) return false;
  // One pass over the set however many went: tuples of one TC expire together.
  size_t kept = 0;
  for (size_t i = 0; i < edges_.size(); ++i) {
    if (times_[i] <= now) {
      changes_.push_back(EdgeChange{edges_[i], false});
      continue;
    }
    edges_[kept] = edges_[i];
    times_[kept] = times_[i];
    ansns_[kept] = ansns_[i];
    ++kept;
  }
  edges_.resize(kept);
  times_.resize(kept);
  ansns_.resize(kept);
  return true;
}

std::optional<core::TimePoint> TopologySet::earliest_expiry() {
  while (!front_checked_ && !expiry_.empty() && !holds(expiry_.front().last, expiry_.front().time)) {
    std::pop_heap(expiry_.begin(), expiry_.end(), std::greater<>{});
    expiry_.pop_back();
  }
  front_checked_ = true;
  if (expiry_.empty()) return std::nullopt;
  return expiry_.front().time;
}

std::vector<TopologySet::Tuple> TopologySet::tuples() const {
  std::vector<Tuple> out;
  out.reserve(edges_.size());
  for (size_t i = 0; i < edges_.size(); ++i) out.push_back(Tuple{edges_[i].last, edges_[i].dest, ansns_[i], times_[i]});
  return out;
}

}  // namespace mesh::routing::olsr
