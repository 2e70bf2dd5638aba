#include "membership/member_digest.h"

#include <algorithm>

namespace mesh::membership {
namespace {

// splitmix64's finaliser: a fixed, platform-independent mix, so every node
// computes the same digest for the same table.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint32_t MemberDigest::hash_of(const MemberEntry& entry) {
  uint64_t h =
      mix(mix(mix(entry.member.id.value()) ^ entry.member.incarnation) ^ static_cast<uint64_t>(entry.member.state));
  // A suspect's accusers count too: a whole-list push-pull used to carry
  // suspicion confirmations (each one shortens the suspicion timeout, and
  // without them a crash is declared up to suspicion_max_mult times later),
  // so two lists that agree on the suspicion but not on who confirmed it
  // must still exchange it.
  if (entry.member.state == MemberState::suspect) {
    for (core::NodeId accuser : entry.accusers) h ^= mix(mix(accuser.value()) ^ entry.member.id.value());
  }
  return static_cast<uint32_t>(h >> 32);
}

size_t MemberDigest::bucket_count(size_t members, size_t members_per_bucket, size_t max_buckets) {
  const size_t per_bucket = std::max<size_t>(1, members_per_bucket);
  return std::clamp<size_t>((members + per_bucket - 1) / per_bucket, 1, std::max<size_t>(1, max_buckets));
}

size_t MemberDigest::bucket_of(core::NodeId id, size_t buckets) {
  return static_cast<size_t>(mix(id.value()) % buckets);
}

bool MemberDigest::differs_for(core::NodeId id, const MemberDigest& other) const {
  if (other.hashes_.size() != hashes_.size()) return true;
  const size_t bucket = bucket_of(id, hashes_.size());
  return hashes_[bucket] != other.hashes_[bucket];
}

}  // namespace mesh::membership
