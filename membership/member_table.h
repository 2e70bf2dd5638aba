#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/node_id.h"
#include "core/time.h"
#include "membership/member_record.h"

namespace mesh::membership {

// Precedence of two claims about one member (SWIM with memberlist's
// extensions): a higher incarnation always wins; at equal incarnation
// alive < suspect < failed < left. Only the member itself raises its
// incarnation (to refute a suspicion or to publish new metadata), so a
// stale alive never undoes a newer suspicion or failure.
bool supersedes(MemberState state, uint64_t incarnation, MemberState over_state, uint64_t over_incarnation);

struct MemberEntry {
  Member member;
  bool has_info = false;
  // Suspect only: distinct nodes that accused this incarnation (Lifeguard's
  // independent confirmations shorten the suspicion timeout).
  std::set<core::NodeId> accusers;
  core::TimePoint suspect_since{};
  core::TimePoint state_since{};
};

// What applying a record did.
struct ApplyResult {
  bool changed = false;        // the record was news: disseminate it further
  bool new_accuser = false;    // an extra independent confirmation of a suspicion
  // A suspect/failed/left record older than the live state held: someone
  // could not reach the member at an earlier incarnation. Worth checking.
  bool stale_accusation = false;
  // An alive record that would revive a failed/left member but was not
  // allowed to (it came second hand in a full-list sync). Worth checking.
  bool revival_refused = false;
  std::optional<MemberEventKind> event;
  // What the table held about another member before: Medley needs it, and
  // looking every piggy-backed record up a second time for it was 2 % of
  // the 1000-node steady state (bench/README.md, "Simulator scaling").
  bool was_known = false;
  bool was_suspect = false;
};

// One node's list: every member it knows, in any state, by id. Knows nothing
// of time beyond the `now` it is handed, nor of the network.
class MemberTable {
 public:
  explicit MemberTable(Member self);

  core::NodeId self() const { return self_; }
  const Member& self_member() const { return entries_.at(self_).member; }
  // Replaces this node's own record (incarnation bumps, metadata, leave).
  void set_self(const Member& self);

  // Merges a record about another member by the precedence rules. A record
  // about an unknown member is adopted only if it carries the member's info.
  // Only an alive record revives a failed or left member (a suspicion of a
  // later incarnation just raises the incarnation held), and only if
  // `allow_revival`: a list pulled from a peer may hold a refutation that
  // never reached the nodes that declared the failure, so such a revival is
  // checked by contacting the member instead.
  ApplyResult apply(const MemberRecord& record, core::TimePoint now, bool allow_revival = true);

  const MemberEntry* find(core::NodeId id) const;
  const std::map<core::NodeId, MemberEntry>& entries() const { return entries_; }
  // Members with info (self included): those a sync carries.
  size_t with_info_count() const { return digest_parts_.size(); }
  // MemberDigest's bucket hashes of this table for `buckets` >= 1. Kept up
  // to date at every edit for the last bucket count asked for, and made for
  // another from the members' kept parts: a digest is made for every
  // push-pull request and answer, and a walk of the whole table hashing
  // every member each time grew with the mesh.
  const std::vector<uint32_t>& bucket_hashes(size_t buckets) const;
  // Alive and suspect members other than self, by id. Kept sorted at every
  // edit instead of walked out of the table: Medley reads it at every probe,
  // and walking a 1000-member tree for it was 14.5 % of a large mesh's
  // steady-state CPU (bench/README.md, "Simulator scaling").
  const std::vector<core::NodeId>& live_others() const { return live_others_; }
  size_t live_count() const { return live_count_; }  // self included
  // Changes whenever live_others() may have: a member added, erased, or
  // moved between live and not live. Equal values, equal lists.
  uint64_t live_set_version() const { return live_set_version_; }
  MemberRecord record_of(core::NodeId id) const;  // id must be known
  void erase(core::NodeId id);

 private:
  class DigestEdit;

  core::NodeId self_;
  // `id` is now live or not (or is gone: not live): lists it in, or out of,
  // live_others_ and moves live_set_version_.
  void note_liveness(core::NodeId id, bool live);
  // Add `entry`'s part of the digest; remove_from_digest() takes it away
  // again, so an edit is bracketed by the two.
  void add_to_digest(const MemberEntry& entry);
  void remove_from_digest(const MemberEntry& entry);

  std::map<core::NodeId, MemberEntry> entries_;
  std::vector<core::NodeId> live_others_;
  size_t live_count_ = 1;
  uint64_t live_set_version_ = 0;
  // What each member with info adds to the digest, sorted by id: a digest
  // of another bucket count (a peer's, or ours after the list grew) is a
  // scan of this array, not a walk of the tree hashing every member.
  struct DigestPart {
    core::NodeId id;
    uint32_t hash = 0;
  };
  std::vector<DigestPart> digest_parts_;
  // Empty until bucket_hashes() is first asked; then for bucket_hashes_.size() buckets.
  mutable std::vector<uint32_t> bucket_hashes_;
};

}  // namespace mesh::membership
