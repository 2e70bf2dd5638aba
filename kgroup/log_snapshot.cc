#include "kgroup/log_snapshot.h"

#include <algorithm>

#include "core/sha256.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {
namespace {

constexpr uint8_t kSnapshotVersion = 1;
constexpr size_t kDigestSize = std::tuple_size_v<core::Sha256Digest>;
constexpr size_t kHeaderSize = 1 + kDigestSize;

}  // namespace

std::string encode_log_snapshot(const LogSnapshot& snapshot) {
  proto::KgroupLogSnapshot record;
  record.set_last_seq(snapshot.last_seq);
  record.set_last_term(snapshot.last_term);
  record.set_state(snapshot.state);
  const std::string body = record.SerializeAsString();
  const core::Sha256Digest digest = core::sha256(body);
  std::string out;
  out.reserve(kHeaderSize + body.size());
  out.push_back(static_cast<char>(kSnapshotVersion));
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  out += body;
  return out;
}

std::optional<LogSnapshot> decode_log_snapshot(std::string_view bytes) {
  if (bytes.size() < kHeaderSize || static_cast<uint8_t>(bytes[0]) != kSnapshotVersion) return std::nullopt;
  const std::string_view body = bytes.substr(kHeaderSize);
  const core::Sha256Digest digest = core::sha256(body);
  if (!std::equal(digest.begin(), digest.end(), reinterpret_cast<const uint8_t*>(bytes.data() + 1))) {
    return std::nullopt;
  }
  proto::KgroupLogSnapshot record;
  if (!record.ParseFromArray(body.data(), static_cast<int>(body.size())) || record.last_seq() == 0) {
    return std::nullopt;
  }
  return LogSnapshot{record.last_seq(), record.last_term(), record.state()};
}

}  // namespace mesh::kgroup
