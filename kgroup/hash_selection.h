#pragma once

#include <cstdint>
#include <vector>

#include "core/node_id.h"
#include "kgroup/geometry.h"
#include "kgroup/group_target.h"

namespace mesh::kgroup {

// A smart node as selection sees it: its id and where it is.
struct SmartNode {
  core::NodeId id;
  Location location{};
};

// A selected member: its score orders the group (lowest first = preferred
// leader, then the Bully priority order).
struct ScoredMember {
  core::NodeId id;
  uint64_t score = 0;
  friend bool operator==(const ScoredMember&, const ScoredMember&) = default;
};

// Hash(epoch, S, D) of CoMesh 3.1/3.4: the first 8 bytes (big endian) of
// SHA-256("mesh-kgroup-v1" | epoch (8 bytes BE) | node (4 bytes BE) | target
// as printed). Any node computes any node's score from the id alone.
uint64_t member_score(uint64_t epoch, core::NodeId node, const GroupTarget& target);

// Strict priority order: lower score first, ties by lower id.
bool higher_priority(const ScoredMember& a, const ScoredMember& b);

// Every node scored and sorted by priority.
std::vector<ScoredMember> rank_nodes(const std::vector<SmartNode>& nodes, const GroupTarget& target, uint64_t epoch);

// The k-group by consistent hashing: the k best scores among `nodes` (all of
// them if fewer than k), in priority order. Duplicated ids count once.
std::vector<ScoredMember> hash_select(const std::vector<SmartNode>& nodes, const GroupTarget& target, uint64_t epoch,
                                      size_t k);

// f for a group of k = 2f + 1 members, and its quorum: a majority, f + 1
// for odd k. A group formed while fewer than k nodes were live may have an
// even count; f + 1 of 2 (or of 4) would let two disjoint halves each
// elect a leader and commit, so the quorum is a strict majority.
inline constexpr size_t faults_tolerated(size_t k) { return k == 0 ? 0 : (k - 1) / 2; }
inline constexpr size_t quorum_size(size_t k) { return k / 2 + 1; }

}  // namespace mesh::kgroup
