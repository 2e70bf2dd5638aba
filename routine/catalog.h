#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/routine.pb.h"
#include "routine/device_model.h"
#include "routine/precondition_rule.h"
#include "routine/routine_model.h"

namespace mesh::routine {

// The mesh's catalog of devices, routines and APEX precondition rules as one
// node knows it: those of the catalog file (deployment renders the same file
// on every node) overlaid with the run-time changes (meshctl device
// add/remove, routine add/remove/enable/disable, precondition add/remove).
//
// How versions are ordered: run-time changes are totally ordered by the
// catalog's k-group ("catalog:mesh"), which commits each at the next
// version, 1, 2, 3, ... (the position survives epoch migration, as state
// transfer carries the whole list). Every node holds a prefix of that one
// list (CatalogSync spreads it), so two nodes at the same version hold the
// same run-time layer, and a higher version is strictly newer. The file is
// the base under every version: it is not versioned by the mesh, and nodes
// whose files differ are told apart by the file digest they gossip (logged
// and shown by meshctl status). A run-time change wins over the file for its
// id: `remove` hides a file device or routine, a put replaces it, and
// enabling or disabling a routine changes the definition in effect at that
// version (a later put replaces the flag with its own).
//
// Devices, routines and rules have separate id spaces. A routine or a rule
// is checked against the devices when it is submitted (check_change); as the
// devices change afterwards (a replace, a change racing with another
// node's), it may no longer fit them: it stays defined, and
// routine_problems() says why a routine cannot run, precondition_problems()
// why a rule cannot apply. Rules are kept as written (PreconditionRuleSpec)
// and resolved against the effective devices on every change, so a rule
// whose device comes back applies again.
class Catalog {
 public:
  // The file's devices, routines and rules (already checked: unique, valid
  // ids, routines and rules valid against the file's devices) and its digest.
  void set_base(std::vector<DeviceSpec> devices, std::string file_digest, std::vector<RoutineSpec> routines = {},
                std::vector<PreconditionRuleSpec> preconditions = {});
  // Appends the committed entry at version() + 1; false (nothing changed)
  // for any other version.
  bool append(const proto::CatalogEntry& entry);
  // Replaces the run-time layer with `entries` (versions 1..n in order);
  // false, leaving it unchanged, if they are not.
  bool reset(const std::vector<proto::CatalogEntry>& entries);

  uint64_t version() const { return entries_.size(); }
  const std::vector<proto::CatalogEntry>& entries() const { return entries_; }
  const std::string& file_digest() const { return file_digest_; }
  // The effective devices, by id.
  const std::map<std::string, DeviceSpec>& devices() const { return devices_; }
  const DeviceSpec* find(const std::string& id) const;
  bool in_file(const std::string& id) const { return base_.count(id) != 0; }
  // The effective devices at an earlier run-time version (the file with the
  // first `version` changes on top): what every node held at that version,
  // so a device's earlier cluster can be recomputed anywhere.
  std::map<std::string, DeviceSpec> devices_at(uint64_t version) const;

  // The effective routines, by id, including those that cannot run now.
  const std::map<std::string, RoutineSpec>& routines() const { return routines_; }
  const RoutineSpec* find_routine(const std::string& id) const;
  bool routine_in_file(const std::string& id) const { return base_routines_.count(id) != 0; }
  // Routines that no longer fit the effective devices: id -> why (check()).
  const std::map<std::string, std::string>& routine_problems() const { return routine_problems_; }

  // The effective precondition rules as written, by id, including those
  // that cannot apply now.
  const std::map<std::string, PreconditionRuleSpec>& preconditions() const { return preconditions_; }
  const PreconditionRuleSpec* find_precondition(const std::string& id) const;
  bool precondition_in_file(const std::string& id) const { return base_preconditions_.count(id) != 0; }
  // The rules that fit the effective devices, resolved, in id order: what a
  // precondition graph is built from (precondition_graph.h).
  const std::vector<PreconditionRule>& precondition_rules() const { return precondition_rules_; }
  // Rules that do not fit the effective devices: id -> why (resolve_rule()).
  const std::map<std::string, std::string>& precondition_problems() const { return precondition_problems_; }

  // Called after every change of the effective devices, routines or rules,
  // or of what is wrong with them.
  void set_on_change(std::function<void()> callback) { on_change_ = std::move(callback); }

 private:
  void rebuild();

  std::map<std::string, DeviceSpec> base_;
  std::map<std::string, RoutineSpec> base_routines_;
  std::string file_digest_;
  std::vector<proto::CatalogEntry> entries_;
  std::map<std::string, DeviceSpec> devices_;
  std::map<std::string, RoutineSpec> routines_;
  std::map<std::string, std::string> routine_problems_;
  std::map<std::string, PreconditionRuleSpec> base_preconditions_;
  std::map<std::string, PreconditionRuleSpec> preconditions_;
  std::vector<PreconditionRule> precondition_rules_;
  std::map<std::string, std::string> precondition_problems_;
  std::function<void()> on_change_;
};

// Why `change` must be refused given the run-time changes committed before
// it (`earlier`, in version order), or nothing if it is accepted. The
// catalog group decides this at apply time, from the committed list alone,
// so every replica decides the same. A put (of a device, a routine or a
// rule) is refused if its spec is invalid, or if its id is defined
// differently by an earlier change and `replace` is not set (an identical
// put is accepted and changes nothing); removing a device is refused while a
// routine or a rule put by an earlier change names it. The file is not part
// of this decision (nodes may hold different files): check_change adds it.
std::optional<std::string> refusal(const std::vector<proto::CatalogEntry>& earlier, const proto::CatalogChange& change);

// The check a node makes before it submits a change, against its whole
// catalog (file included), so an operator hears of a conflict with the file
// at once: refusal(), then a routine must fit the catalog's devices (check())
// and its encoding one catalog change (kMaxRoutineSpecBytes), and so must a
// rule (resolve_rule(), kMaxPreconditionRuleBytes); removing a device or
// changing its definition must leave every routine and rule that names it
// valid; removing, enabling or disabling a routine needs the routine, and
// removing a rule the rule.
std::optional<std::string> check_change(const Catalog& catalog, const proto::CatalogChange& change);

// "put device hall_light", "remove routine night_hall", "put precondition
// fire_safe", ...: for logs.
std::string describe(const proto::CatalogChange& change);

}  // namespace mesh::routine
