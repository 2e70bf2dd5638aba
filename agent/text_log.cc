#include "agent/text_log.h"

#include "proto/kgroup_client.pb.h"

namespace mesh::agent {
namespace {

constexpr size_t kWriteIdBytes = 8;

}  // namespace

std::string TextLog::encode_update(uint64_t write_id, std::string_view text) {
  // A fixed header and the raw text: the update must fit the group's
  // max_update_bytes, and a protobuf adds nothing here.
  std::string out;
  out.reserve(kWriteIdBytes + text.size());
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((write_id >> shift) & 0xff));
  out.append(text);
  return out;
}

std::optional<TextLog::Update> TextLog::decode_update(std::string_view update) {
  if (update.size() < kWriteIdBytes) return std::nullopt;
  Update out;
  for (size_t i = 0; i < kWriteIdBytes; ++i) out.write_id = (out.write_id << 8) | static_cast<uint8_t>(update[i]);
  out.text = std::string(update.substr(kWriteIdBytes));
  return out;
}

void TextLog::apply(uint64_t seq, std::string_view update) {
  auto decoded = decode_update(update);
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
    records_.push_back({position, decoded->write_id, std::move(decoded->text)});
  }
  position_by_group_seq_[seq] = position;
  while (position_by_group_seq_.size() > kMaxRemembered) position_by_group_seq_.erase(position_by_group_seq_.begin());
}

std::optional<uint64_t> TextLog::position_of(uint64_t group_seq) const {
  const auto it = position_by_group_seq_.find(group_seq);
  if (it == position_by_group_seq_.end()) return std::nullopt;
  return it->second;
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
