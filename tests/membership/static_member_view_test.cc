// StaticMemberView stands in for Medley in the upper layers' simulations,
// so the events it emits for a list change must be the ones a failure
// detector would report for that change.
#include "membership/static_member_view.h"

#include <gtest/gtest.h>

#include <vector>

namespace mesh::membership {
namespace {

core::NodeId id(int n) { return core::NodeId::from_octets(10, 0, 0, static_cast<uint8_t>(n)); }

Member member(int n, MemberState state = MemberState::alive) {
  Member m;
  m.id = id(n);
  m.name = "n" + std::to_string(n);
  m.state = state;
  return m;
}

struct Recorder {
  explicit Recorder(MemberView& view) {
    view.add_listener([this](const MemberEvent& e) { events.emplace_back(e.kind, e.member.id); });
  }
  std::vector<std::pair<MemberEventKind, core::NodeId>> take() { return std::exchange(events, {}); }
  std::vector<std::pair<MemberEventKind, core::NodeId>> events;
};

using Events = std::vector<std::pair<MemberEventKind, core::NodeId>>;

TEST(StaticMemberView, StartsWithSelfAliveOnly) {
  StaticMemberView view(id(1));
  ASSERT_EQ(view.live_members().size(), 1u);
  EXPECT_EQ(view.live_members()[0].id, id(1));
  EXPECT_EQ(view.version(), 0u);
}

TEST(StaticMemberView, SetMembersEmitsTheDifference) {
  StaticMemberView view(id(1));
  Recorder rec(view);
  view.set_members({member(1), member(2), member(3)});
  // Self was known by id only; learning its name is a metadata change.
  EXPECT_EQ(rec.take(), (Events{{MemberEventKind::metadata_changed, id(1)},
                                {MemberEventKind::joined, id(2)},
                                {MemberEventKind::joined, id(3)}}));
  const uint64_t before = view.version();

  view.set_members({member(1), member(3, MemberState::suspect)});
  EXPECT_EQ(rec.take(), (Events{{MemberEventKind::failed, id(2)}, {MemberEventKind::suspected, id(3)}}));
  EXPECT_GT(view.version(), before);
  ASSERT_EQ(view.live_members().size(), 2u) << "a suspect is still live";
  EXPECT_EQ(view.member(id(2))->state, MemberState::failed);

  view.upsert(member(3));
  view.upsert(member(2));
  EXPECT_EQ(rec.take(), (Events{{MemberEventKind::recovered, id(3)}, {MemberEventKind::joined, id(2)}}));

  Member with_meta = member(2);
  with_meta.metadata["devices"] = "3";
  view.upsert(with_meta);
  view.upsert(with_meta);  // no change, no event
  view.upsert(member(2, MemberState::left));
  EXPECT_EQ(rec.take(), (Events{{MemberEventKind::metadata_changed, id(2)}, {MemberEventKind::left, id(2)}}));
}

TEST(StaticMemberView, SelfNeverFailsAndRemovedListenersHearNothing) {
  StaticMemberView view(id(1));
  int heard = 0;
  auto handle = view.add_listener([&heard](const MemberEvent&) { ++heard; });
  view.set_members({member(2)});
  view.mark_failed(id(1));
  EXPECT_EQ(view.member(id(1))->state, MemberState::alive);
  EXPECT_EQ(heard, 1);
  view.remove_listener(handle);
  view.mark_failed(id(2));
  EXPECT_EQ(heard, 1);
  EXPECT_EQ(view.member(id(2))->state, MemberState::failed);
}

TEST(StaticMemberView, SetLiveIdsKeepsKnownMetadata) {
  StaticMemberView view(id(1));
  Member m = member(2);
  m.location = {1, 2, 3};
  view.upsert(m);
  view.set_live_ids({id(1), id(2), id(4)});
  EXPECT_EQ(view.member(id(2))->location, (std::array<double, 3>{1, 2, 3}));
  EXPECT_EQ(view.live_members().size(), 3u);
}

}  // namespace
}  // namespace mesh::membership
