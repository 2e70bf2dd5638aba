#include "routine/catalog_log.h"

#include <charconv>

#include "routine/catalog.h"
#include "routine/device_codec.h"

namespace mesh::routine {

void CatalogLog::apply(uint64_t seq, std::string_view update) {
  const auto write = decode_write(update);
  if (!write) return;
  auto change = parse_message<proto::CatalogChange>(write->payload);
  if (!change) return;
  uint64_t version = 0;
  if (const auto it = version_by_change_.find(change->change_id()); it != version_by_change_.end()) {
    version = it->second;
  } else {
    proto::CatalogEntry entry;
    entry.set_version(entries_.size() + 1);
    if (auto problem = refusal(entries_, *change)) {
      entry.set_refused(true);
      entry.set_detail(*problem);
    }
    *entry.mutable_change() = std::move(*change);
    version = entry.version();
    version_by_change_.emplace(entry.change().change_id(), version);
    entries_.push_back(std::move(entry));
    if (on_entry_) on_entry_(entries_.back());
  }
  version_by_group_seq_[seq] = version;
  while (version_by_group_seq_.size() > kMaxRemembered) version_by_group_seq_.erase(version_by_group_seq_.begin());
}

std::optional<uint64_t> CatalogLog::position_of(uint64_t group_seq) const {
  const auto it = version_by_group_seq_.find(group_seq);
  if (it == version_by_group_seq_.end()) return std::nullopt;
  return it->second;
}

core::Expected<std::string, std::string> CatalogLog::read(std::string_view query) const {
  uint64_t version = 0;
  const auto [ptr, ec] = std::from_chars(query.data(), query.data() + query.size(), version);
  if (ec != std::errc() || ptr != query.data() + query.size() || version == 0 || version > entries_.size()) {
    return core::Unexpected(std::string("no such catalog version"));
  }
  return entries_[version - 1].SerializeAsString();
}

std::string CatalogLog::snapshot() const {
  proto::CatalogSnapshot snapshot;
  for (const auto& entry : entries_) *snapshot.add_entries() = entry;
  return snapshot.SerializeAsString();
}

bool CatalogLog::restore(std::string_view snapshot) {
  auto decoded = parse_message<proto::CatalogSnapshot>(snapshot);
  if (!decoded) return false;
  std::vector<proto::CatalogEntry> entries;
  std::unordered_map<uint64_t, uint64_t> versions;
  for (const auto& entry : decoded->entries()) {
    if (entry.version() != entries.size() + 1) return false;
    if (!versions.emplace(entry.change().change_id(), entry.version()).second) return false;
    entries.push_back(entry);
  }
  entries_ = std::move(entries);
  version_by_change_ = std::move(versions);
  version_by_group_seq_.clear();
  for (const auto& entry : entries_) {
    if (on_entry_) on_entry_(entry);
  }
  return true;
}

}  // namespace mesh::routine
