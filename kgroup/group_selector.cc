#include "kgroup/group_selector.h"

#include <utility>

#include <fmt/format.h>

namespace mesh::kgroup {
namespace {

std::string json_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Central mode scores every target as the mesh catalog's group, so the hub
// also holds the catalog.
const GroupTarget& central_key() {
  static const GroupTarget key{TargetKind::catalog, "mesh"};
  return key;
}

}  // namespace

GroupSelector::GroupSelector(const membership::MemberView& view, SelectionOptions options)
    : view_(view), options_(options) {}

void GroupSelector::set_devices(std::vector<DeviceLocation> devices) {
  clusters_ = DeviceClusters::build(std::move(devices), options_.clusters);
}

void GroupSelector::set_routine_devices(const std::string& routine_id, std::vector<std::string> devices) {
  routine_devices_[routine_id] = std::move(devices);
}

GroupTarget GroupSelector::device_group(const std::string& device_id) const {
  if (const auto c = clusters_.cluster_of(device_id)) {
    return GroupTarget{TargetKind::cluster, clusters_.clusters()[*c].id};
  }
  return GroupTarget{TargetKind::device, device_id};
}

std::optional<GroupSelector::Centre> GroupSelector::device_centre(const std::string& device) const {
  const auto location = clusters_.location_of(device);
  if (!location) return std::nullopt;
  return Centre{*location, clusters_.cluster_neighbours(device)};
}

std::optional<GroupSelector::Centre> GroupSelector::centre_of(const GroupTarget& target) const {
  switch (target.kind) {
    case TargetKind::device:
      return device_centre(target.id);
    case TargetKind::cluster:
      for (const auto& cluster : clusters_.clusters()) {
        if (cluster.id == target.id) return device_centre(cluster.centre_device);
      }
      return std::nullopt;
    case TargetKind::routine: {
      const auto it = routine_devices_.find(target.id);
      if (it == routine_devices_.end()) return std::nullopt;
      const auto rep = representative_device(target.id, it->second, options_.lsh.seed);
      if (!rep) return std::nullopt;
      return device_centre(*rep);
    }
    case TargetKind::catalog:
      // Mesh-wide state with no place of its own: hash selection.
      return std::nullopt;
  }
  return std::nullopt;
}

GroupSelector::Selected GroupSelector::select(const GroupTarget& target, uint64_t epoch) const {
  std::vector<SmartNode> nodes;
  for (const membership::Member& m : view_.live_members()) nodes.push_back({m.id, m.location});
  return select_among(target, epoch, nodes);
}

GroupSelector::Selected GroupSelector::select_among(const GroupTarget& target, uint64_t epoch,
                                                    const std::vector<SmartNode>& nodes) const {
  Selected out;
  out.target = target;
  out.epoch = epoch;
  if (options_.mode == SelectionMode::lsh) {
    if (const auto centre = centre_of(target)) {
      LshSelection lsh =
          lsh_select(nodes, target, epoch, options_.k, centre->location, centre->neighbours, options_.lsh);
      out.members = std::move(lsh.members);
      out.near = std::move(lsh.near);
      return out;
    }
  }
  const GroupTarget& scored = options_.mode == SelectionMode::central ? central_key() : target;
  out.members = hash_select(nodes, scored, epoch, options_.k);
  return out;
}

std::vector<core::NodeId> GroupSelector::members(const GroupTarget& target, uint64_t epoch) const {
  std::vector<core::NodeId> out;
  for (const ScoredMember& m : select(target, epoch).members) out.push_back(m.id);
  return out;
}

std::string GroupSelector::to_json(const Selected& selected) const {
  std::string out = fmt::format(R"({{"target": "{}", "epoch": {}, "leader": )",
                                json_escape(selected.target.to_string()), selected.epoch);
  out +=
      selected.members.empty() ? std::string("null") : fmt::format(R"("{}")", selected.members.front().id.to_string());
  out += R"(, "members": [)";
  for (size_t i = 0; i < selected.members.size(); ++i) {
    const ScoredMember& m = selected.members[i];
    const auto member = view_.member(m.id);
    out += fmt::format(R"({}{{"name": "{}", "id": "{}", "score": "{:016x}"}})", i == 0 ? "" : ", ",
                       json_escape(member ? member->name : ""), m.id.to_string(), m.score);
  }
  out += "]}";
  return out;
}

}  // namespace mesh::kgroup
