#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kgroup/device_clusters.h"
#include "kgroup/group_target.h"
#include "kgroup/hash_selection.h"
#include "kgroup/lsh_selection.h"
#include "membership/member_view.h"

namespace mesh::kgroup {

// hash: consistent hashing of each target; lsh: members near the target's
// centre (CoMesh 3.6); central: every target's group on the same members
// (those hashing selects for one fixed key), the central hub that CoMesh
// Fig. 11 compares against (bench/routine_bench.cc).
enum class SelectionMode { hash, lsh, central };

struct SelectionOptions {
  size_t k = 5;  // k = 2f + 1 (CoMesh Table 3: k = 5, f = 2)
  SelectionMode mode = SelectionMode::hash;
  LshParams lsh;
  DeviceClusters::Options clusters;
};

// Zero-message selection from one node's view (CoMesh 3.1, 3.6): any node
// computes the group of any target from its live member list alone (all
// members are smart nodes for now), so nodes whose lists agree compute the
// same groups. LSH mode needs the target's centre: a device's own location,
// a cluster's centre device, a routine's representative device; targets
// whose centre is unknown fall back to hash selection.
class GroupSelector {
 public:
  struct Selected {
    GroupTarget target;
    uint64_t epoch = 0;
    std::vector<ScoredMember> members;  // priority order; members.front() is the preferred leader
    std::vector<core::NodeId> near;     // LSH: the members chosen near the centre
  };

  GroupSelector(const membership::MemberView& view, SelectionOptions options);

  // The devices (from the device registry) for centres and clusters.
  void set_devices(std::vector<DeviceLocation> devices);
  // The devices a routine touches (its representative is drawn from them).
  void set_routine_devices(const std::string& routine_id, std::vector<std::string> devices);

  Selected select(const GroupTarget& target, uint64_t epoch) const;
  // The same among other nodes than the live ones: where the group would
  // have been had these been the live list (genesis asks whether a group
  // of the target could sit among members failed lately).
  Selected select_among(const GroupTarget& target, uint64_t epoch, const std::vector<SmartNode>& nodes) const;
  // The member ids alone (GroupHost::Selector).
  std::vector<core::NodeId> members(const GroupTarget& target, uint64_t epoch) const;
  const DeviceClusters& clusters() const { return clusters_; }
  const SelectionOptions& options() const { return options_; }
  // The target whose group serves a device: its cluster once clustered.
  GroupTarget device_group(const std::string& device_id) const;

  // {"target", "epoch", "leader", "members": [{"name", "id", "score"}]}, as
  // `meshctl kgroup TARGET --json` prints it.
  std::string to_json(const Selected& selected) const;

 private:
  struct Centre {
    Location location;
    std::vector<Location> neighbours;
  };
  std::optional<Centre> centre_of(const GroupTarget& target) const;
  std::optional<Centre> device_centre(const std::string& device) const;

  const membership::MemberView& view_;
  SelectionOptions options_;
  DeviceClusters clusters_;
  std::map<std::string, std::vector<std::string>> routine_devices_;
};

}  // namespace mesh::kgroup
