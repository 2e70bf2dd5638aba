#include "kgroup/hash_selection.h"

#include <algorithm>
#include <string>

#include "core/sha256.h"

namespace mesh::kgroup {

uint64_t member_score(uint64_t epoch, core::NodeId node, const GroupTarget& target) {
  std::string input = "mesh-kgroup-v1";
  for (int shift = 56; shift >= 0; shift -= 8) input.push_back(static_cast<char>((epoch >> shift) & 0xff));
  for (int shift = 24; shift >= 0; shift -= 8) input.push_back(static_cast<char>((node.value() >> shift) & 0xff));
  input += target.to_string();
  const core::Sha256Digest digest = core::sha256(std::string_view(input));
  uint64_t score = 0;
  for (size_t i = 0; i < 8; ++i) score = (score << 8) | digest[i];
  return score;
}

bool higher_priority(const ScoredMember& a, const ScoredMember& b) {
  return a.score != b.score ? a.score < b.score : a.id < b.id;
}

std::vector<ScoredMember> rank_nodes(const std::vector<SmartNode>& nodes, const GroupTarget& target, uint64_t epoch) {
  std::vector<ScoredMember> ranked;
  ranked.reserve(nodes.size());
  for (const SmartNode& node : nodes) ranked.push_back({node.id, member_score(epoch, node.id, target)});
  std::sort(ranked.begin(), ranked.end(), higher_priority);
  ranked.erase(std::unique(ranked.begin(), ranked.end(),
                           [](const ScoredMember& a, const ScoredMember& b) { return a.id == b.id; }),
               ranked.end());
  return ranked;
}

std::vector<ScoredMember> hash_select(const std::vector<SmartNode>& nodes, const GroupTarget& target, uint64_t epoch,
                                      size_t k) {
  std::vector<ScoredMember> ranked = rank_nodes(nodes, target, epoch);
  if (ranked.size() > k) ranked.resize(k);
  return ranked;
}

}  // namespace mesh::kgroup
