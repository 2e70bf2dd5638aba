#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/node_id.h"

namespace mesh::membership {

// A member as one node's membership list sees it. Lists are weakly
// consistent: two nodes may disagree for a while, and upper layers must be
// correct anyway (Camera's Mutual Friend Property, k-group re-selection).
enum class MemberState { alive, suspect, failed, left };
std::string_view to_string(MemberState state);
// Alive or suspected: still a member others should count on.
inline bool is_live(MemberState state) { return state == MemberState::alive || state == MemberState::suspect; }

struct Member {
  core::NodeId id;
  std::string name;
  MemberState state = MemberState::alive;
  uint64_t incarnation = 0;
  std::array<double, 3> location{};  // x, y, z in metres, from the member's config
  // Small key/value slot other layers publish in (size-bounded by the
  // membership implementation).
  std::map<std::string, std::string> metadata;

  friend bool operator==(const Member&, const Member&) = default;
};

enum class MemberEventKind { joined, suspected, failed, left, recovered, metadata_changed };
std::string_view to_string(MemberEventKind kind);

struct MemberEvent {
  MemberEventKind kind;
  Member member;  // as it is after the event
};

// What the layers above membership read: the live list and its changes.
// Implemented by Medley in the agent and by StaticMemberView in tests, where
// a simulation sets each node's list directly (even inconsistent ones).
class MemberView {
 public:
  using Listener = std::function<void(const MemberEvent& event)>;
  using ListenerHandle = uint64_t;

  virtual ~MemberView() = default;

  virtual core::NodeId self() const = 0;
  // Alive and suspect members, this node included, sorted by id.
  virtual std::vector<Member> live_members() const = 0;
  // live_members().size(), without copying every member.
  virtual size_t live_count() const { return live_members().size(); }
  // Any state, while the member is still remembered.
  virtual std::optional<Member> member(core::NodeId id) const = 0;
  // Changes whenever the live list or a live member's metadata changes.
  virtual uint64_t version() const = 0;
  // The listener sees every event after this call, in order, never from
  // inside add_listener itself.
  virtual ListenerHandle add_listener(Listener listener) = 0;
  virtual void remove_listener(ListenerHandle handle) = 0;
  // A layer above learned that `peer` knows more live members than this
  // view (k-group genesis asks every node it knows): pull `peer`'s list now
  // rather than at the next anti-entropy round. Views that are set from
  // outside (tests) ignore it.
  virtual void catch_up_from(core::NodeId peer) { (void)peer; }
};

}  // namespace mesh::membership
