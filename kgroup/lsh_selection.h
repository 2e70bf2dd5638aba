#pragma once

#include <cstdint>
#include <vector>

#include "kgroup/geometry.h"
#include "kgroup/group_target.h"
#include "kgroup/hash_selection.h"

namespace mesh::kgroup {

// CoMesh 3.6 (after Datar et al. 2004): h(v) = floor((a.v + b) / r) with a
// drawn from a 2-stable (Gaussian) distribution and b uniform in [0, r);
// m of them concatenated into one bucket key, l such keys per point. The
// defaults are CoMesh's Table 3. r is measured in `unit_m` metres (the
// paper's positions are grid units; our grids are 10 m apart).
struct LshParams {
  uint32_t m = 2;
  uint32_t l = 2;
  double r = 4.0;
  double unit_m = 10.0;
  uint64_t seed = 0;  // from the mesh config; every node must use the same
};

// The l x m hash functions of one epoch. The Gaussian entries come from our
// own generator (core::Rng) through the Irwin-Hall sum of twelve uniforms, in
// integers, never from <random>'s normal_distribution, whose output differs
// between standard libraries: every node must draw identical functions.
// The sum is not exactly Gaussian (its tails stop at 6 sigma), which is
// immaterial for bucketing points a few hundred metres apart.
class LshFamily {
 public:
  LshFamily(const LshParams& params, uint64_t epoch);

  // One bucket key per table (size l).
  std::vector<uint64_t> keys(const Point& p) const;
  // True if p and q share a bucket in at least one table.
  bool collide(const std::vector<uint64_t>& keys_p, const std::vector<uint64_t>& keys_q) const;

 private:
  struct Function {
    std::array<int64_t, 3> a{};  // Gaussian entries scaled by 2^20
    int64_t b = 0;               // in [0, width_)
  };
  uint32_t m_;
  uint32_t l_;
  int64_t width_;                    // r in mm scaled by 2^20
  std::vector<Function> functions_;  // l * m, table-major
};

// LSH selection of one k-group (f = (k-1)/2):
//  1. f + 1 members near `centre`: the smart nodes sharing a bucket with it,
//     nearest first; when short, candidates of `neighbours` (points close to
//     the centre, e.g. the other devices of its cluster), nearest to the
//     centre first; when still short, by hash score;
//  2. f more members by hash score across the whole mesh.
// The result is in priority order: the near members by hash score, then the
// others by hash score. The preferred leader and a quorum (f + 1) are thus
// near the centre, which keeps elections and quorum rounds local; the f
// far members still let the group survive a power domain's failure.
struct LshSelection {
  std::vector<ScoredMember> members;  // priority order: near first
  std::vector<core::NodeId> near;     // the members chosen in step 1 (members' first f + 1)
  size_t candidates = 0;              // nodes in the centre's own buckets (Table 2)
};

LshSelection lsh_select(const std::vector<SmartNode>& nodes, const GroupTarget& target, uint64_t epoch, size_t k,
                        const Location& centre, const std::vector<Location>& neighbours, const LshParams& params);

}  // namespace mesh::kgroup
