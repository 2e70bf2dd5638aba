// SWIM precedence (incarnation, then alive < suspect < failed < left), the
// events each transition raises, the membership table's edge cases, and
// what it keeps up to date at every edit (its digest, its live set's
// version) against a walk of the whole table.
#include "membership/member_table.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

#include "membership/member_digest.h"
#include "tests/membership/numbered_members.h"

namespace mesh::membership {
namespace {

using test::numbered_alive;
using test::numbered_id;

const core::NodeId kSelf = core::NodeId::from_octets(10, 0, 0, 1);
const core::NodeId kOther = core::NodeId::from_octets(10, 0, 0, 2);
const core::NodeId kThird = core::NodeId::from_octets(10, 0, 0, 3);
const core::TimePoint kNow{};

MemberRecord record(MemberState state, uint64_t incarnation, bool info = true, core::NodeId accuser = kThird) {
  MemberRecord r;
  r.member.id = kOther;
  r.member.name = "other";
  r.member.state = state;
  r.member.incarnation = incarnation;
  r.has_info = info;
  r.accuser = accuser;
  return r;
}

MemberTable table_with(MemberState state, uint64_t incarnation) {
  Member self;
  self.id = kSelf;
  MemberTable t(self);
  t.apply(record(MemberState::alive, incarnation), kNow);
  if (state != MemberState::alive) t.apply(record(state, incarnation, false), kNow);
  EXPECT_EQ(t.find(kOther)->member.state, state);
  return t;
}

TEST(Precedence, HigherIncarnationAlwaysWins) {
  const MemberState all[] = {MemberState::alive, MemberState::suspect, MemberState::failed, MemberState::left};
  for (MemberState a : all) {
    for (MemberState b : all) {
      EXPECT_TRUE(supersedes(a, 5, b, 4));
      EXPECT_FALSE(supersedes(a, 4, b, 5));
    }
  }
}

TEST(Precedence, AtEqualIncarnationStrongerStateWins) {
  EXPECT_TRUE(supersedes(MemberState::suspect, 3, MemberState::alive, 3));
  EXPECT_TRUE(supersedes(MemberState::failed, 3, MemberState::suspect, 3));
  EXPECT_TRUE(supersedes(MemberState::left, 3, MemberState::failed, 3));
  EXPECT_FALSE(supersedes(MemberState::alive, 3, MemberState::suspect, 3));
  EXPECT_FALSE(supersedes(MemberState::suspect, 3, MemberState::failed, 3));
  EXPECT_FALSE(supersedes(MemberState::alive, 3, MemberState::alive, 3));
}

TEST(MemberTable, UnknownMemberNeedsInfo) {
  Member self;
  self.id = kSelf;
  MemberTable t(self);
  EXPECT_FALSE(t.apply(record(MemberState::suspect, 1, false), kNow).changed);
  EXPECT_EQ(t.find(kOther), nullptr);
  const ApplyResult joined = t.apply(record(MemberState::alive, 1), kNow);
  EXPECT_TRUE(joined.changed);
  EXPECT_EQ(joined.event, MemberEventKind::joined);
  EXPECT_EQ(t.live_count(), 2u);
}

TEST(MemberTable, FailedMemberFirstSeenRaisesNoEvent) {
  Member self;
  self.id = kSelf;
  MemberTable t(self);
  const ApplyResult r = t.apply(record(MemberState::failed, 1), kNow);
  EXPECT_TRUE(r.changed);
  EXPECT_FALSE(r.event.has_value());
  EXPECT_TRUE(t.live_others().empty());
}

TEST(MemberTable, SuspicionAndRefutation) {
  MemberTable t = table_with(MemberState::alive, 2);
  // A stale suspicion is ignored but flagged.
  ApplyResult r = t.apply(record(MemberState::suspect, 1, false), kNow);
  EXPECT_FALSE(r.changed);
  EXPECT_TRUE(r.stale_accusation);
  r = t.apply(record(MemberState::suspect, 2, false), kNow);
  EXPECT_EQ(r.event, MemberEventKind::suspected);
  // Same incarnation, same state, other accuser: a confirmation.
  r = t.apply(record(MemberState::suspect, 2, false, kSelf), kNow);
  EXPECT_TRUE(r.new_accuser);
  EXPECT_FALSE(r.event.has_value());
  EXPECT_EQ(t.find(kOther)->accusers.size(), 2u);
  // The same accuser again is no news.
  EXPECT_FALSE(t.apply(record(MemberState::suspect, 2, false, kSelf), kNow).changed);
  // Alive at the same incarnation does not refute ...
  EXPECT_FALSE(t.apply(record(MemberState::alive, 2), kNow).changed);
  // ... a higher one does.
  r = t.apply(record(MemberState::alive, 3), kNow);
  EXPECT_EQ(r.event, MemberEventKind::recovered);
  EXPECT_TRUE(t.find(kOther)->accusers.empty());
}

TEST(MemberTable, FailedIsRevivedOnlyByAliveWithHigherIncarnation) {
  MemberTable t = table_with(MemberState::failed, 4);
  EXPECT_FALSE(t.apply(record(MemberState::alive, 4), kNow).changed);
  // A suspicion of a later incarnation raises the incarnation held, not the state.
  ApplyResult r = t.apply(record(MemberState::suspect, 5, false), kNow);
  EXPECT_FALSE(r.event.has_value());
  EXPECT_EQ(t.find(kOther)->member.state, MemberState::failed);
  EXPECT_EQ(t.find(kOther)->member.incarnation, 5u);
  // Second hand (a pulled list): refused, flagged for a check.
  r = t.apply(record(MemberState::alive, 6), kNow, false);
  EXPECT_TRUE(r.revival_refused);
  EXPECT_EQ(t.find(kOther)->member.state, MemberState::failed);
  r = t.apply(record(MemberState::alive, 6), kNow);
  EXPECT_EQ(r.event, MemberEventKind::joined);
  EXPECT_EQ(t.live_count(), 2u);
}

TEST(MemberTable, LeftBeatsFailedAtSameIncarnation) {
  MemberTable t = table_with(MemberState::failed, 1);
  const ApplyResult r = t.apply(record(MemberState::left, 1, false), kNow);
  EXPECT_EQ(r.event, MemberEventKind::left);
  EXPECT_FALSE(t.apply(record(MemberState::failed, 1, false), kNow).changed);
}

TEST(MemberTable, NewInfoIsMetadataChange) {
  MemberTable t = table_with(MemberState::alive, 1);
  MemberRecord r = record(MemberState::alive, 2);
  r.member.metadata["role"] = "smart";
  EXPECT_EQ(t.apply(r, kNow).event, MemberEventKind::metadata_changed);
  // Incarnation alone raises no event.
  r.member.incarnation = 3;
  const ApplyResult same = t.apply(r, kNow);
  EXPECT_TRUE(same.changed);
  EXPECT_FALSE(same.event.has_value());
}

TEST(MemberTable, RecordsAboutSelfAreNotApplied) {
  Member self;
  self.id = kSelf;
  MemberTable t(self);
  MemberRecord r = record(MemberState::failed, 9);
  r.member.id = kSelf;
  EXPECT_FALSE(t.apply(r, kNow).changed);
  EXPECT_EQ(t.self_member().state, MemberState::alive);
}

// The digest as it was computed before the table kept it: every member with
// info walked and hashed into its bucket.
std::vector<uint32_t> walked_digest(const MemberTable& table, size_t buckets) {
  std::vector<uint32_t> hashes(buckets, 0);
  size_t with_info = 0;
  for (const auto& [id, entry] : table.entries()) {
    if (!entry.has_info) continue;
    hashes[MemberDigest::bucket_of(id, buckets)] ^= MemberDigest::hash_of(entry);
    ++with_info;
  }
  EXPECT_EQ(table.with_info_count(), with_info);
  return hashes;
}

// The live list and count as they were computed before the table kept them.
std::vector<core::NodeId> walked_live_others(const MemberTable& table) {
  std::vector<core::NodeId> live;
  size_t count = 0;
  for (const auto& [id, entry] : table.entries()) {
    if (!is_live(entry.member.state)) continue;
    ++count;
    if (id != table.self()) live.push_back(id);
  }
  EXPECT_EQ(table.live_count(), count);
  return live;
}

TEST(MemberTable, KeptSummariesMatchAWalkAfterRandomEdits) {
  constexpr uint32_t kMembers = 24;
  const MemberState states[] = {MemberState::alive, MemberState::suspect, MemberState::failed, MemberState::left};
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    auto draw = [&rng](uint32_t bound) { return static_cast<uint32_t>(rng() % bound); };
    MemberTable table(numbered_alive(1, 0).member);
    std::vector<core::NodeId> live_before = table.live_others();
    uint64_t version_before = table.live_set_version();
    for (int step = 0; step < 2000; ++step) {
      const uint32_t op = draw(20);
      if (op == 0) {
        table.erase(numbered_id(1 + draw(kMembers)));
      } else if (op == 1) {
        Member self = table.self_member();
        self.incarnation += draw(2);
        self.state = states[draw(2)];
        table.set_self(self);
      } else {
        MemberRecord update = numbered_alive(1 + draw(kMembers), draw(4));
        update.member.state = states[draw(4)];
        update.has_info = draw(3) != 0;
        if (update.member.state == MemberState::suspect && draw(4) != 0)
          update.accuser = numbered_id(1 + draw(kMembers));
        // Records about self are not applied, so they report nothing held.
        const MemberEntry* before = update.member.id == table.self() ? nullptr : table.find(update.member.id);
        const bool was_known = before != nullptr;
        const bool was_suspect = was_known && before->member.state == MemberState::suspect;
        const ApplyResult result = table.apply(update, core::TimePoint(core::Duration(step)), draw(2) != 0);
        ASSERT_EQ(result.was_known, was_known) << "seed " << seed << " step " << step;
        ASSERT_EQ(result.was_suspect, was_suspect) << "seed " << seed << " step " << step;
      }
      // Asked for by another bucket count now and then, as a peer's
      // request may be: the table then walks once and keeps that count.
      const size_t buckets = draw(10) == 0 ? 1 + draw(7) : 4;
      ASSERT_EQ(table.bucket_hashes(buckets), walked_digest(table, buckets)) << "seed " << seed << " step " << step;
      const std::vector<core::NodeId> live = table.live_others();
      ASSERT_EQ(live, walked_live_others(table)) << "seed " << seed << " step " << step;
      if (table.live_set_version() == version_before) {
        ASSERT_EQ(live, live_before) << "seed " << seed << " step " << step;
      }
      live_before = live;
      version_before = table.live_set_version();
    }
  }
}

}  // namespace
}  // namespace mesh::membership
