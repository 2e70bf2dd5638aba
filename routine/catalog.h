#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "proto/routine.pb.h"
#include "routine/device_model.h"

namespace mesh::routine {

// The mesh's device catalog as one node knows it: the devices of the
// catalog file (deployment renders the same file on every node) overlaid
// with the run-time changes (meshctl device add/remove).
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
// id: `remove` hides a file device, a put replaces it.
class Catalog {
 public:
  // The file's devices (already checked: unique, valid ids) and its digest.
  void set_base(std::vector<DeviceSpec> devices, std::string file_digest);
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

  // Called after every change of the effective devices.
  void set_on_change(std::function<void()> callback) { on_change_ = std::move(callback); }

 private:
  void rebuild();

  std::map<std::string, DeviceSpec> base_;
  std::string file_digest_;
  std::vector<proto::CatalogEntry> entries_;
  std::map<std::string, DeviceSpec> devices_;
  std::function<void()> on_change_;
};

// Why `change` must be refused given the run-time changes committed before
// it (`earlier`, in version order), or nothing if it is accepted. The
// catalog group decides this at apply time, from the committed list alone,
// so every replica decides the same. A put is refused if its spec is
// invalid, or if its id is defined differently by an earlier change and
// `replace` is not set (an identical put is accepted and changes nothing).
std::optional<std::string> refusal(const std::vector<proto::CatalogEntry>& earlier,
                                   const proto::CatalogChange& change);

// The same check a node makes before it submits a change, against its whole
// catalog (file included), so an operator hears of a conflict with the file
// at once.
std::optional<std::string> check_change(const Catalog& catalog, const proto::CatalogChange& change);

}  // namespace mesh::routine
