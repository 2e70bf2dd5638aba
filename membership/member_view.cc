#include "membership/member_view.h"

namespace mesh::membership {

std::string_view to_string(MemberState state) {
  switch (state) {
    case MemberState::alive:
      return "alive";
    case MemberState::suspect:
      return "suspect";
    case MemberState::failed:
      return "failed";
    case MemberState::left:
      return "left";
  }
  return "unknown";
}

std::string_view to_string(MemberEventKind kind) {
  switch (kind) {
    case MemberEventKind::joined:
      return "joined";
    case MemberEventKind::suspected:
      return "suspected";
    case MemberEventKind::failed:
      return "failed";
    case MemberEventKind::left:
      return "left";
    case MemberEventKind::recovered:
      return "recovered";
    case MemberEventKind::metadata_changed:
      return "metadata_changed";
  }
  return "unknown";
}

}  // namespace mesh::membership
