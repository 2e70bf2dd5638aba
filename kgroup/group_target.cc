#include "kgroup/group_target.h"

namespace mesh::kgroup {

std::string_view to_string(TargetKind kind) {
  switch (kind) {
    case TargetKind::device:
      return "device";
    case TargetKind::cluster:
      return "cluster";
    case TargetKind::routine:
      return "routine";
    case TargetKind::catalog:
      return "catalog";
  }
  return "device";
}

std::optional<GroupTarget> GroupTarget::parse(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view kind = text.substr(0, colon);
  const std::string_view id = text.substr(colon + 1);
  if (id.empty() || id.size() > kMaxIdLength) return std::nullopt;
  for (char c : id) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return std::nullopt;
  }
  GroupTarget target;
  if (kind == "device") {
    target.kind = TargetKind::device;
  } else if (kind == "cluster") {
    target.kind = TargetKind::cluster;
  } else if (kind == "routine") {
    target.kind = TargetKind::routine;
  } else if (kind == "catalog") {
    target.kind = TargetKind::catalog;
  } else {
    return std::nullopt;
  }
  target.id = std::string(id);
  return target;
}

std::string GroupTarget::to_string() const {
  std::string out(kgroup::to_string(kind));
  out += ':';
  out += id;
  return out;
}

}  // namespace mesh::kgroup
