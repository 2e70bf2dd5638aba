#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kgroup/client_state_machine.h"
#include "proto/routine.pb.h"

namespace mesh::routine {

// The state machine of the catalog's k-group ("catalog:mesh"): the totally
// ordered list of run-time catalog changes. A committed change gets the next
// version and the group's verdict (routine::refusal, decided from the list
// alone, so every replica agrees); a change retried after an unknown outcome
// (same change id) keeps its first version.
class CatalogLog : public kgroup::ClientStateMachine {
 public:
  using EntryListener = std::function<void(const proto::CatalogEntry& entry)>;

  // `on_entry` hears every entry this replica appends (the node's
  // CatalogSync learns the new version at once).
  explicit CatalogLog(EntryListener on_entry = {}) : on_entry_(std::move(on_entry)) {}

  void apply(uint64_t seq, std::string_view update) override;
  std::string snapshot() const override;
  bool restore(std::string_view snapshot) override;
  std::optional<uint64_t> position_of(uint64_t group_seq) const override;
  // Query: the decimal version of an entry; answer: that CatalogEntry.
  core::Expected<std::string, std::string> read(std::string_view query) const override;

  const std::vector<proto::CatalogEntry>& entries() const { return entries_; }

  static constexpr size_t kMaxRemembered = 4096;

 private:
  EntryListener on_entry_;
  std::vector<proto::CatalogEntry> entries_;
  std::unordered_map<uint64_t, uint64_t> version_by_change_;
  std::map<uint64_t, uint64_t> version_by_group_seq_;
};

}  // namespace mesh::routine
