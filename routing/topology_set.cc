#include "routing/topology_set.h"

#include <algorithm>

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
  if (replaced) {
    for (size_t i = begin; i < end; ++i) expiry_.remove({originator, edges_[i].dest}, times_[i]);
  }
  const auto first = edges_.begin() + static_cast<ptrdiff_t>(begin);
  const auto last = edges_.begin() + static_cast<ptrdiff_t>(replaced ? begin : end);
  added_.clear();
  for (core::NodeId dest : advertised) {
    auto held = std::lower_bound(first, last, dest, [](const auto& e, core::NodeId d) { return e.dest < d; });
    if (held != last && held->dest == dest) {
      const size_t i = static_cast<size_t>(held - edges_.begin());
      expiry_.move({originator, dest}, times_[i], until);
      times_[i] = until;
    } else {
      added_.push_back(dest);
    }
  }
  if (!replaced && added_.empty()) return false;
  std::sort(added_.begin(), added_.end());
  added_.erase(std::unique(added_.begin(), added_.end()), added_.end());
  for (core::NodeId dest : added_) expiry_.add({originator, dest}, until);
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
  splice(begin, end, originator, ansn, entries_);
  return true;
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

bool TopologySet::expire(core::TimePoint now) {
  expired_.clear();
  while (auto key = expiry_.pop_expired(now)) expired_.push_back(*key);
  if (expired_.empty()) return false;
  // One pass over the set however many went: tuples of one TC expire together.
  std::sort(expired_.begin(), expired_.end());
  size_t kept = 0;
  auto gone = expired_.begin();
  for (size_t i = 0; i < edges_.size(); ++i) {
    const std::pair key{edges_[i].last, edges_[i].dest};
    while (gone != expired_.end() && *gone < key) ++gone;
    if (gone != expired_.end() && *gone == key) continue;
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

std::vector<TopologySet::Tuple> TopologySet::tuples() const {
  std::vector<Tuple> out;
  out.reserve(edges_.size());
  for (size_t i = 0; i < edges_.size(); ++i) out.push_back(Tuple{edges_[i].last, edges_[i].dest, ansns_[i], times_[i]});
  return out;
}

}  // namespace mesh::routing::olsr
