#include "kgroup/lsh_selection.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/rng.h"

namespace mesh::kgroup {
namespace {

constexpr int kFixedShift = 20;  // Gaussian entries carry 20 fractional bits
constexpr int kUniformBits = 20;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

// N(0, 1) scaled by 2^20: twelve 20-bit uniforms sum to mean 6 * 2^20 and
// variance 2^40 (each has variance 2^40 / 12).
int64_t gaussian_fixed(core::Rng& rng) {
  int64_t sum = 0;
  for (int i = 0; i < 12; ++i) sum += static_cast<int64_t>(rng.next_u64() >> (64 - kUniformBits));
  return sum - (int64_t{6} << kUniformBits);
}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace

LshFamily::LshFamily(const LshParams& params, uint64_t epoch)
    : m_(std::max<uint32_t>(params.m, 1)), l_(std::max<uint32_t>(params.l, 1)) {
  const double width_mm = std::max(params.r * params.unit_m * 1000.0, 1.0);
  width_ = std::llround(std::min(width_mm, 1e12) * static_cast<double>(int64_t{1} << kFixedShift));
  core::Rng rng(mix(mix(params.seed, 0x4c5348ULL), epoch));
  functions_.resize(static_cast<size_t>(m_) * l_);
  for (Function& f : functions_) {
    for (int64_t& a : f.a) a = gaussian_fixed(rng);
    f.b = static_cast<int64_t>(rng.below(static_cast<uint64_t>(width_)));
  }
}

std::vector<uint64_t> LshFamily::keys(const Point& p) const {
  std::vector<uint64_t> out;
  out.reserve(l_);
  for (uint32_t t = 0; t < l_; ++t) {
    uint64_t key = mix(0x7461626c65ULL, t);
    for (uint32_t j = 0; j < m_; ++j) {
      const Function& f = functions_[static_cast<size_t>(t) * m_ + j];
      // |a| < 2^23 and |mm| <= 5e8 < 2^29: each product < 2^52, the sum < 2^54.
      int64_t dot = f.b;
      for (size_t i = 0; i < 3; ++i) dot += f.a[i] * p.mm[i];
      key = mix(key, static_cast<uint64_t>(floor_div(dot, width_)));
    }
    out.push_back(key);
  }
  return out;
}

bool LshFamily::collide(const std::vector<uint64_t>& keys_p, const std::vector<uint64_t>& keys_q) const {
  const size_t n = std::min(keys_p.size(), keys_q.size());
  for (size_t t = 0; t < n; ++t) {
    if (keys_p[t] == keys_q[t]) return true;
  }
  return false;
}

LshSelection lsh_select(const std::vector<SmartNode>& nodes, const GroupTarget& target, uint64_t epoch, size_t k,
                        const Location& centre, const std::vector<Location>& neighbours, const LshParams& params) {
  LshSelection result;
  const std::vector<ScoredMember> ranked = rank_nodes(nodes, target, epoch);
  if (ranked.size() <= k) {
    result.members = ranked;
    return result;
  }
  const size_t f = faults_tolerated(k);
  const size_t near_count = k - f;

  struct Entry {
    ScoredMember member;
    Point point;
    std::vector<uint64_t> keys;
  };
  const LshFamily family(params, epoch);
  std::vector<Entry> entries;
  entries.reserve(ranked.size());
  for (const ScoredMember& member : ranked) {
    // ranked is deduplicated; take the first location listed for each id.
    const auto it = std::find_if(nodes.begin(), nodes.end(), [&](const SmartNode& n) { return n.id == member.id; });
    const Point point = to_point(it->location);
    entries.push_back({member, point, family.keys(point)});
  }

  const Point centre_point = to_point(centre);
  std::set<core::NodeId> chosen;
  // Adds the bucket-mates of `from`, nearest to the centre first.
  auto take_candidates = [&](const Point& from, bool count) {
    const std::vector<uint64_t> from_keys = family.keys(from);
    std::vector<const Entry*> candidates;
    for (const Entry& e : entries) {
      if (family.collide(from_keys, e.keys)) candidates.push_back(&e);
    }
    if (count) result.candidates = candidates.size();
    std::sort(candidates.begin(), candidates.end(), [&](const Entry* a, const Entry* b) {
      const int64_t da = distance2(a->point, centre_point);
      const int64_t db = distance2(b->point, centre_point);
      return da != db ? da < db : higher_priority(a->member, b->member);
    });
    for (const Entry* e : candidates) {
      if (result.near.size() >= near_count) break;
      if (chosen.insert(e->member.id).second) result.near.push_back(e->member.id);
    }
  };

  take_candidates(centre_point, true);
  if (result.near.size() < near_count) {
    std::vector<Point> around;
    around.reserve(neighbours.size());
    for (const Location& loc : neighbours) around.push_back(to_point(loc));
    std::stable_sort(around.begin(), around.end(), [&](const Point& a, const Point& b) {
      return distance2(a, centre_point) < distance2(b, centre_point);
    });
    for (const Point& p : around) {
      if (result.near.size() >= near_count) break;
      take_candidates(p, false);
    }
  }
  for (const Entry& e : entries) {
    if (result.near.size() >= near_count) break;
    if (chosen.insert(e.member.id).second) result.near.push_back(e.member.id);
  }
  for (const Entry& e : entries) {
    if (chosen.size() >= k) break;
    chosen.insert(e.member.id);
  }
  // Priority: the near members first, by score, then the others by score,
  // so the leader and a whole quorum (f + 1) are near the centre and
  // intra-group rounds stay local (CoMesh 3.6's point of LSH).
  const std::set<core::NodeId> near_ids(result.near.begin(), result.near.end());
  for (const Entry& e : entries) {
    if (near_ids.count(e.member.id) != 0) result.members.push_back(e.member);
  }
  for (const Entry& e : entries) {
    if (chosen.count(e.member.id) != 0 && near_ids.count(e.member.id) == 0) result.members.push_back(e.member);
  }
  result.near.clear();
  for (size_t i = 0; i < near_ids.size(); ++i) result.near.push_back(result.members[i].id);
  return result;
}

}  // namespace mesh::kgroup
