#include "routing/mpr_selection.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "routing/olsr_packet.h"

namespace mesh::routing::olsr {

std::set<core::NodeId> select_mprs(core::NodeId self, const std::vector<MprCandidate>& neighbours) {
  std::set<core::NodeId> one_hop;
  for (const auto& n : neighbours) one_hop.insert(n.id);

  // For each eligible candidate, the strict two-hop neighbours it reaches.
  std::map<core::NodeId, std::set<core::NodeId>> reaches;
  std::map<core::NodeId, uint8_t> willingness;
  std::map<core::NodeId, size_t> degree;
  for (const auto& n : neighbours) {
    if (n.willingness == kWillNever) continue;
    willingness[n.id] = n.willingness;
    auto& reached = reaches[n.id];
    for (auto two_hop : n.neighbours) {
      if (two_hop == self || one_hop.count(two_hop)) continue;
      reached.insert(two_hop);
    }
    degree[n.id] = reached.size();
  }

  std::map<core::NodeId, int> providers;  // two-hop neighbour -> number of candidates reaching it
  for (const auto& [id, reached] : reaches) {
    for (auto two_hop : reached) ++providers[two_hop];
  }
  std::set<core::NodeId> uncovered;
  for (const auto& [two_hop, count] : providers) uncovered.insert(two_hop);

  std::set<core::NodeId> mprs;
  auto choose = [&](core::NodeId id) {
    if (!mprs.insert(id).second) return;
    for (auto two_hop : reaches[id]) uncovered.erase(two_hop);
  };

  for (const auto& [id, will] : willingness) {
    if (will == kWillAlways) choose(id);
  }
  for (const auto& [id, reached] : reaches) {
    for (auto two_hop : reached) {
      if (providers[two_hop] == 1) choose(id);
    }
  }
  while (!uncovered.empty()) {
    std::optional<core::NodeId> best;
    std::tuple<uint8_t, size_t, size_t> best_rank{};
    for (const auto& [id, reached] : reaches) {
      if (mprs.count(id)) continue;
      const size_t reachability = static_cast<size_t>(
          std::count_if(reached.begin(), reached.end(), [&](core::NodeId t) { return uncovered.count(t) > 0; }));
      if (reachability == 0) continue;
      const auto rank = std::make_tuple(willingness[id], reachability, degree[id]);
      // Strictly greater keeps the lowest address on ties (the map is ordered).
      if (!best || rank > best_rank) {
        best = id;
        best_rank = rank;
      }
    }
    if (!best) break;  // unreachable: every uncovered node has a provider
    choose(*best);
  }

  // Optional optimisation of §8.3.1 step 5.
  std::vector<core::NodeId> by_willingness(mprs.begin(), mprs.end());
  std::stable_sort(by_willingness.begin(), by_willingness.end(),
                   [&](core::NodeId a, core::NodeId b) { return willingness[a] < willingness[b]; });
  for (auto candidate : by_willingness) {
    if (willingness[candidate] == kWillAlways) continue;
    bool still_covered = true;
    for (auto two_hop : reaches[candidate]) {
      bool other = false;
      for (auto mpr : mprs) {
        if (mpr != candidate && reaches[mpr].count(two_hop)) {
          other = true;
          break;
        }
      }
      if (!other) {
        still_covered = false;
        break;
      }
    }
    if (still_covered) mprs.erase(candidate);
  }
  return mprs;
}

}  // namespace mesh::routing::olsr
