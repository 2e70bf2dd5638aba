#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/node_id.h"
#include "membership/member_table.h"

namespace mesh::membership {

// A compact summary of a member table for digest-based push-pull: members
// are spread over `buckets` by a hash of their id, and each bucket holds the
// XOR of a hash of (id, incarnation, state, and a suspect's accusers) over
// its members. Two tables
// that agree on a bucket's hash agree on its members (up to a 2^-32
// collision, which a later push-pull with another partner repairs), so a
// push-pull sends full records only for the members of buckets that differ.
// Only members with info count: only they travel in a sync.
class MemberDigest {
 public:
  // Buckets for a table of `members`: about `members_per_bucket` each, at
  // least one, at most `max_buckets`.
  static size_t bucket_count(size_t members, size_t members_per_bucket, size_t max_buckets);
  static size_t bucket_of(core::NodeId id, size_t buckets);
  // What `entry` (one with info) adds to its bucket's hash.
  static uint32_t hash_of(const MemberEntry& entry);

  // buckets >= 1.
  MemberDigest(const MemberTable& table, size_t buckets) : hashes_(table.bucket_hashes(buckets)) {}
  explicit MemberDigest(std::vector<uint32_t> hashes) : hashes_(std::move(hashes)) {}

  const std::vector<uint32_t>& hashes() const { return hashes_; }
  // Whether `id`'s bucket holds a different hash in `other`; always true
  // for a digest of another bucket count.
  bool differs_for(core::NodeId id, const MemberDigest& other) const;
  bool operator==(const MemberDigest& other) const = default;

 private:
  std::vector<uint32_t> hashes_;
};

}  // namespace mesh::membership
