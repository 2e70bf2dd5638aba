#pragma once

#include <map>
#include <vector>

#include "membership/member_view.h"

namespace mesh::membership {

// A MemberView whose list the owner sets directly: the simulator and tests
// use it to give each node exactly the (possibly inconsistent) view a
// scenario needs. Each change emits the events of the difference, so
// consumers see the same event stream a real failure detector would produce.
class StaticMemberView final : public MemberView {
 public:
  explicit StaticMemberView(core::NodeId self);

  core::NodeId self() const override { return self_; }
  std::vector<Member> live_members() const override;
  std::optional<Member> member(core::NodeId id) const override;
  uint64_t version() const override { return version_; }
  ListenerHandle add_listener(Listener listener) override;
  void remove_listener(ListenerHandle handle) override;

  // Replaces the whole list. Members absent from `members` that were live
  // become failed; self is always kept alive even if `members` omits it.
  void set_members(const std::vector<Member>& members);
  // Adds or updates one member (joined, recovered, suspected, failed, left
  // or metadata_changed, as the difference says).
  void upsert(const Member& member);
  void mark_failed(core::NodeId id);
  // Shorthand for lists of bare ids (alive, incarnation 0).
  void set_live_ids(const std::vector<core::NodeId>& ids);

 private:
  void emit(MemberEventKind kind, const Member& member);
  static std::optional<MemberEventKind> transition(const Member* before, const Member& after);

  core::NodeId self_;
  std::map<core::NodeId, Member> members_;
  uint64_t version_ = 0;
  ListenerHandle next_handle_ = 1;
  std::map<ListenerHandle, Listener> listeners_;
};

}  // namespace mesh::membership
