#include "membership/member_table.h"

#include <algorithm>

#include "membership/member_digest.h"

namespace mesh::membership {
namespace {

int rank(MemberState state) {
  switch (state) {
    case MemberState::alive:
      return 0;
    case MemberState::suspect:
      return 1;
    case MemberState::failed:
      return 2;
    case MemberState::left:
      return 3;
  }
  return 0;
}

bool same_info(const Member& a, const Member& b) {
  return a.name == b.name && a.location == b.location && a.metadata == b.metadata;
}

std::optional<MemberEventKind> transition(MemberState before, MemberState after) {
  if (before == after) return std::nullopt;
  switch (after) {
    case MemberState::alive:
      // A failed or departed member that comes back rejoins.
      return before == MemberState::suspect ? MemberEventKind::recovered : MemberEventKind::joined;
    case MemberState::suspect:
      return is_live(before) ? MemberEventKind::suspected : MemberEventKind::joined;
    case MemberState::failed:
      return MemberEventKind::failed;
    case MemberState::left:
      return MemberEventKind::left;
  }
  return std::nullopt;
}

}  // namespace

// Brackets one edit of an entry: its old digest part leaves, its new one
// comes in when the edit's scope ends, whichever way it returns.
class MemberTable::DigestEdit {
 public:
  DigestEdit(MemberTable& table, const MemberEntry& entry) : table_(table), entry_(entry) {
    table_.remove_from_digest(entry_);
  }
  ~DigestEdit() { table_.add_to_digest(entry_); }
  DigestEdit(const DigestEdit&) = delete;
  DigestEdit& operator=(const DigestEdit&) = delete;

 private:
  MemberTable& table_;
  const MemberEntry& entry_;
};

bool supersedes(MemberState state, uint64_t incarnation, MemberState over_state, uint64_t over_incarnation) {
  if (incarnation != over_incarnation) return incarnation > over_incarnation;
  return rank(state) > rank(over_state);
}

MemberTable::MemberTable(Member self) : self_(self.id) {
  MemberEntry entry;
  entry.member = std::move(self);
  entry.has_info = true;
  add_to_digest(entries_.emplace(self_, std::move(entry)).first->second);
}

void MemberTable::set_self(const Member& self) {
  MemberEntry& entry = entries_.at(self_);
  const DigestEdit edit(*this, entry);
  const bool was_live = is_live(entry.member.state);
  entry.member = self;
  if (was_live != is_live(self.state)) note_liveness(self_, is_live(self.state));
}

ApplyResult MemberTable::apply(const MemberRecord& record, core::TimePoint now, bool allow_revival) {
  ApplyResult result;
  const core::NodeId id = record.member.id;
  if (id == self_ || id.is_unspecified()) return result;
  auto it = entries_.find(id);
  result.was_known = it != entries_.end();
  result.was_suspect = result.was_known && it->second.member.state == MemberState::suspect;
  if (it == entries_.end()) {
    if (!record.has_info) return result;
    MemberEntry entry;
    entry.member = record.member;
    entry.has_info = true;
    entry.state_since = now;
    if (record.member.state == MemberState::suspect) {
      entry.accusers.insert(record.accuser);
      entry.suspect_since = now;
    }
    add_to_digest(entries_.emplace(id, std::move(entry)).first->second);
    note_liveness(id, is_live(record.member.state));
    result.changed = true;
    // A member first heard of as failed or gone was never live here: no event.
    if (is_live(record.member.state)) result.event = MemberEventKind::joined;
    return result;
  }

  MemberEntry& entry = it->second;
  const DigestEdit edit(*this, entry);
  Member& current = entry.member;
  if (record.member.state == MemberState::suspect && current.state == MemberState::suspect &&
      record.member.incarnation == current.incarnation) {
    if (!record.accuser.is_unspecified() && entry.accusers.insert(record.accuser).second) {
      result.changed = true;
      result.new_accuser = true;
    }
    return result;
  }
  if (!supersedes(record.member.state, record.member.incarnation, current.state, current.incarnation)) {
    result.stale_accusation = record.member.state != MemberState::alive && is_live(current.state) &&
                              record.member.incarnation < current.incarnation;
    if (record.has_info && !entry.has_info && record.member.incarnation == current.incarnation) {
      current.name = record.member.name;
      current.location = record.member.location;
      current.metadata = record.member.metadata;
      entry.has_info = true;
    }
    return result;
  }

  if (!is_live(current.state)) {
    if (record.member.state == MemberState::suspect) {
      current.incarnation = record.member.incarnation;
      return result;
    }
    if (record.member.state == MemberState::alive && !allow_revival) {
      result.revival_refused = true;
      return result;
    }
  }
  const MemberState before = current.state;
  const bool info_changed = record.has_info && !same_info(current, record.member);
  current.state = record.member.state;
  current.incarnation = record.member.incarnation;
  if (record.has_info) {
    current.name = record.member.name;
    current.location = record.member.location;
    current.metadata = record.member.metadata;
    entry.has_info = true;
  }
  if (before != current.state) entry.state_since = now;
  if (is_live(before) != is_live(current.state)) note_liveness(id, is_live(current.state));
  entry.accusers.clear();
  if (current.state == MemberState::suspect) {
    if (!record.accuser.is_unspecified()) entry.accusers.insert(record.accuser);
    entry.suspect_since = now;
  }
  result.changed = true;
  result.event = transition(before, current.state);
  if (!result.event && info_changed && is_live(current.state)) result.event = MemberEventKind::metadata_changed;
  return result;
}

const MemberEntry* MemberTable::find(core::NodeId id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second;
}

void MemberTable::note_liveness(core::NodeId id, bool live) {
  ++live_set_version_;
  if (id != self_) {
    const auto at = std::lower_bound(live_others_.begin(), live_others_.end(), id);
    const bool listed = at != live_others_.end() && *at == id;
    if (live && !listed) live_others_.insert(at, id);
    if (!live && listed) live_others_.erase(at);
  }
  live_count_ = live_others_.size() + (is_live(self_member().state) ? 1 : 0);
}

MemberRecord MemberTable::record_of(core::NodeId id) const {
  const MemberEntry& e = entries_.at(id);
  MemberRecord r;
  r.member = e.member;
  r.has_info = e.has_info;
  if (e.member.state == MemberState::suspect && !e.accusers.empty()) r.accuser = *e.accusers.begin();
  return r;
}

void MemberTable::erase(core::NodeId id) {
  if (id == self_) return;
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  remove_from_digest(it->second);
  entries_.erase(it);
  note_liveness(id, false);
}

const std::vector<uint32_t>& MemberTable::bucket_hashes(size_t buckets) const {
  if (bucket_hashes_.size() != buckets) {
    bucket_hashes_.assign(buckets, 0);
    for (const DigestPart& part : digest_parts_) bucket_hashes_[MemberDigest::bucket_of(part.id, buckets)] ^= part.hash;
  }
  return bucket_hashes_;
}

void MemberTable::add_to_digest(const MemberEntry& entry) {
  if (!entry.has_info) return;
  const DigestPart part{entry.member.id, MemberDigest::hash_of(entry)};
  auto at = std::lower_bound(digest_parts_.begin(), digest_parts_.end(), part.id,
                             [](const DigestPart& p, core::NodeId id) { return p.id < id; });
  digest_parts_.insert(at, part);
  if (!bucket_hashes_.empty()) {
    bucket_hashes_[MemberDigest::bucket_of(part.id, bucket_hashes_.size())] ^= part.hash;
  }
}

void MemberTable::remove_from_digest(const MemberEntry& entry) {
  if (!entry.has_info) return;
  auto at = std::lower_bound(digest_parts_.begin(), digest_parts_.end(), entry.member.id,
                             [](const DigestPart& p, core::NodeId id) { return p.id < id; });
  // XOR is its own inverse.
  if (!bucket_hashes_.empty()) {
    bucket_hashes_[MemberDigest::bucket_of(at->id, bucket_hashes_.size())] ^= at->hash;
  }
  digest_parts_.erase(at);
}

}  // namespace mesh::membership
