#include "membership/static_member_view.h"

#include <set>

namespace mesh::membership {
StaticMemberView::StaticMemberView(core::NodeId self) : self_(self) {
  Member me;
  me.id = self;
  members_.emplace(self, me);
}

std::vector<Member> StaticMemberView::live_members() const {
  std::vector<Member> live;
  for (const auto& [id, m] : members_) {
    if (is_live(m.state)) live.push_back(m);
  }
  return live;
}

std::optional<Member> StaticMemberView::member(core::NodeId id) const {
  auto it = members_.find(id);
  if (it == members_.end()) return std::nullopt;
  return it->second;
}

StaticMemberView::ListenerHandle StaticMemberView::add_listener(Listener listener) {
  ListenerHandle handle = next_handle_++;
  listeners_.emplace(handle, std::move(listener));
  return handle;
}

void StaticMemberView::remove_listener(ListenerHandle handle) { listeners_.erase(handle); }

std::optional<MemberEventKind> StaticMemberView::transition(const Member* before, const Member& after) {
  if (before == nullptr) {
    if (is_live(after.state)) return MemberEventKind::joined;
    if (after.state == MemberState::failed) return MemberEventKind::failed;
    return MemberEventKind::left;
  }
  if (before->state != after.state) {
    switch (after.state) {
      case MemberState::alive:
        // A failed or departed member that comes back rejoins.
        return before->state == MemberState::suspect ? MemberEventKind::recovered : MemberEventKind::joined;
      case MemberState::suspect:
        return is_live(before->state) ? MemberEventKind::suspected : MemberEventKind::joined;
      case MemberState::failed:
        return MemberEventKind::failed;
      case MemberState::left:
        return MemberEventKind::left;
    }
  }
  if (before->metadata != after.metadata || before->name != after.name || before->location != after.location ||
      before->incarnation != after.incarnation) {
    return MemberEventKind::metadata_changed;
  }
  return std::nullopt;
}

void StaticMemberView::upsert(const Member& member) {
  Member next = member;
  if (next.id == self_) next.state = MemberState::alive;
  auto it = members_.find(next.id);
  const Member* before = it == members_.end() ? nullptr : &it->second;
  std::optional<MemberEventKind> kind = transition(before, next);
  if (!kind) return;
  members_[next.id] = next;
  ++version_;
  emit(*kind, next);
}

void StaticMemberView::mark_failed(core::NodeId id) {
  auto it = members_.find(id);
  if (it == members_.end() || id == self_ || !is_live(it->second.state)) return;
  Member failed = it->second;
  failed.state = MemberState::failed;
  upsert(failed);
}

void StaticMemberView::set_members(const std::vector<Member>& members) {
  std::set<core::NodeId> listed;
  for (const Member& m : members) listed.insert(m.id);
  std::vector<core::NodeId> dropped;
  for (const auto& [id, m] : members_) {
    if (!listed.contains(id) && id != self_ && is_live(m.state)) dropped.push_back(id);
  }
  for (core::NodeId id : dropped) mark_failed(id);
  for (const Member& m : members) upsert(m);
}

void StaticMemberView::set_live_ids(const std::vector<core::NodeId>& ids) {
  std::vector<Member> members;
  members.reserve(ids.size());
  for (core::NodeId id : ids) {
    auto it = members_.find(id);
    Member m = it == members_.end() ? Member{} : it->second;
    m.id = id;
    m.state = MemberState::alive;
    members.push_back(m);
  }
  set_members(members);
}

void StaticMemberView::emit(MemberEventKind kind, const Member& member) {
  // Copy: a listener may add or remove listeners.
  std::map<ListenerHandle, Listener> listeners = listeners_;
  MemberEvent event{kind, member};
  for (auto& [handle, listener] : listeners) {
    if (listeners_.contains(handle)) listener(event);
  }
}

}  // namespace mesh::membership
