#include "agent/text_log.h"

#include <algorithm>

#include "proto/kgroup_client.pb.h"

namespace mesh::agent {

void TextLog::apply(uint64_t seq, std::string_view update) {
  auto decoded = decode_write(update);
  if (!decoded) {
    ++malformed_;
    return;
  }
  uint64_t position = 0;
  if (const auto it = position_by_write_.find(decoded->write_id); it != position_by_write_.end()) {
    position = it->second;
  } else {
    position = records_.size() + 1;
    position_by_write_.emplace(decoded->write_id, position);
    records_.push_back({position, decoded->write_id, std::move(decoded->payload)});
  }
  position_by_group_seq_[seq] = position;
  while (position_by_group_seq_.size() > kMaxRemembered) position_by_group_seq_.erase(position_by_group_seq_.begin());
}

std::optional<uint64_t> TextLog::position_of(uint64_t group_seq) const {
  const auto it = position_by_group_seq_.find(group_seq);
  if (it == position_by_group_seq_.end()) return std::nullopt;
  return it->second;
}

core::Expected<std::string, std::string> TextLog::read(std::string_view query) const {
  proto::TextLogQuery decoded;
  if (query.size() > static_cast<size_t>(INT32_MAX) ||
      !decoded.ParseFromArray(query.data(), static_cast<int>(query.size()))) {
    return core::Unexpected(std::string("a text log read wants a TextLogQuery (proto/kgroup_client.proto)"));
  }
  const uint64_t from = std::max<uint64_t>(decoded.from(), 1);
  proto::TextLogPage page;
  page.set_first(from);
  page.set_total(records_.size());
  size_t bytes = 0;
  for (uint64_t position = from; position <= records_.size(); ++position) {
    const Record& record = records_[position - 1];
    // What the entry adds on the wire, tags and lengths included, roughly.
    const size_t cost = record.text.size() + 16;
    if (decoded.max_bytes() != 0 && page.entries_size() > 0 && bytes + cost > decoded.max_bytes()) break;
    bytes += cost;
    proto::TextLogEntry& entry = *page.add_entries();
    entry.set_write_id(record.write_id);
    entry.set_text(record.text);
  }
  return page.SerializeAsString();
}

std::string TextLog::snapshot() const {
  proto::TextLogSnapshot snapshot;
  for (const Record& record : records_) {
    proto::TextLogEntry& entry = *snapshot.add_entries();
    entry.set_write_id(record.write_id);
    entry.set_text(record.text);
  }
  return snapshot.SerializeAsString();
}

bool TextLog::restore(std::string_view snapshot) {
  proto::TextLogSnapshot decoded;
  if (snapshot.size() > static_cast<size_t>(INT32_MAX) ||
      !decoded.ParseFromArray(snapshot.data(), static_cast<int>(snapshot.size()))) {
    return false;
  }
  std::vector<Record> records;
  std::unordered_map<uint64_t, uint64_t> positions;
  records.reserve(static_cast<size_t>(decoded.entries_size()));
  for (const proto::TextLogEntry& entry : decoded.entries()) {
    const uint64_t position = records.size() + 1;
    // Every copy of a snapshot comes from apply(), which never stores a
    // write twice: a duplicate means this is not one of ours.
    if (!positions.emplace(entry.write_id(), position).second) return false;
    records.push_back({position, entry.write_id(), entry.text()});
  }
  records_ = std::move(records);
  position_by_write_ = std::move(positions);
  position_by_group_seq_.clear();
  return true;
}

}  // namespace mesh::agent
