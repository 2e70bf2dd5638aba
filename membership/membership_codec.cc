#include "membership/membership_codec.h"

#include <cmath>
#include <set>

namespace mesh::membership {
namespace {

proto::MemberStateWire state_to_wire(MemberState state) {
  switch (state) {
    case MemberState::alive:
      return proto::MEMBER_ALIVE;
    case MemberState::suspect:
      return proto::MEMBER_SUSPECT;
    case MemberState::failed:
      return proto::MEMBER_FAILED;
    case MemberState::left:
      return proto::MEMBER_LEFT;
  }
  return proto::MEMBER_STATE_UNSPECIFIED;
}

std::optional<MemberState> state_from_wire(int state) {
  switch (state) {
    case proto::MEMBER_ALIVE:
      return MemberState::alive;
    case proto::MEMBER_SUSPECT:
      return MemberState::suspect;
    case proto::MEMBER_FAILED:
      return MemberState::failed;
    case proto::MEMBER_LEFT:
      return MemberState::left;
    default:
      return std::nullopt;
  }
}

core::Unexpected<std::string> fail(std::string reason) { return core::Unexpected(std::move(reason)); }

core::Expected<bool, std::string> check_records(const google::protobuf::RepeatedPtrField<proto::MemberRecord>& records,
                                                const CodecLimits& limits) {
  if (static_cast<size_t>(records.size()) > limits.max_records) return fail("too many records");
  for (const auto& r : records) {
    auto decoded = from_wire(r, limits);
    if (!decoded) return fail(decoded.error());
  }
  return true;
}

}  // namespace

size_t metadata_bytes(const std::map<std::string, std::string>& metadata) {
  size_t total = 0;
  for (const auto& [k, v] : metadata) total += k.size() + v.size();
  return total;
}

void to_wire(const MemberRecord& record, proto::MemberRecord* out) {
  out->Clear();
  out->set_id(record.member.id.value());
  out->set_state(state_to_wire(record.member.state));
  out->set_incarnation(record.member.incarnation);
  out->set_accuser(record.accuser.value());
  if (!record.has_info) return;
  proto::MemberInfo* info = out->mutable_info();
  info->set_name(record.member.name);
  info->set_x(record.member.location[0]);
  info->set_y(record.member.location[1]);
  info->set_z(record.member.location[2]);
  for (const auto& [k, v] : record.member.metadata) {
    proto::MetadataEntry* e = info->add_metadata();
    e->set_key(k);
    e->set_value(v);
  }
}

core::Expected<MemberRecord, std::string> from_wire(const proto::MemberRecord& record, const CodecLimits& limits) {
  MemberRecord out;
  if (record.id() == 0) return fail("record without id");
  out.member.id = core::NodeId(record.id());
  auto state = state_from_wire(record.state());
  if (!state) return fail("bad member state");
  out.member.state = *state;
  out.member.incarnation = record.incarnation();
  out.accuser = core::NodeId(record.accuser());
  out.has_info = record.has_info();
  if (out.member.state == MemberState::alive && !out.has_info) return fail("alive record without info");
  if (!out.has_info) return out;
  const proto::MemberInfo& info = record.info();
  if (info.name().size() > limits.max_name_bytes) return fail("name too long");
  if (!std::isfinite(info.x()) || !std::isfinite(info.y()) || !std::isfinite(info.z())) {
    return fail("location not finite");
  }
  if (static_cast<size_t>(info.metadata_size()) > limits.max_metadata_entries) return fail("too many metadata entries");
  out.member.name = info.name();
  out.member.location = {info.x(), info.y(), info.z()};
  for (const auto& e : info.metadata()) {
    if (e.key().empty()) return fail("empty metadata key");
    if (!out.member.metadata.emplace(e.key(), e.value()).second) return fail("duplicate metadata key");
  }
  if (metadata_bytes(out.member.metadata) > limits.max_metadata_bytes) return fail("metadata too large");
  return out;
}

size_t wire_size(const MemberRecord& record) {
  proto::MemberRecord wire;
  to_wire(record, &wire);
  const size_t body = wire.ByteSizeLong();
  size_t length_bytes = 1;
  for (size_t v = body; v >= 0x80; v >>= 7) ++length_bytes;
  return 1 + length_bytes + body;
}

core::Expected<proto::MembershipBody, std::string> decode_body(std::string_view bytes, const CodecLimits& limits) {
  proto::MembershipBody body;
  if (!body.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return fail("unparsable membership body");
  switch (body.kind_case()) {
    case proto::MembershipBody::kPing: {
      if (body.ping().target() == 0) return fail("ping without target");
      auto ok = check_records(body.ping().updates(), limits);
      if (!ok) return fail(ok.error());
      break;
    }
    case proto::MembershipBody::kAck: {
      if (body.ack().target() == 0) return fail("ack without target");
      auto ok = check_records(body.ack().updates(), limits);
      if (!ok) return fail(ok.error());
      break;
    }
    case proto::MembershipBody::kPingReq: {
      if (body.ping_req().target() == 0) return fail("ping-req without target");
      auto ok = check_records(body.ping_req().updates(), limits);
      if (!ok) return fail(ok.error());
      break;
    }
    case proto::MembershipBody::kNack:
      if (body.nack().target() == 0) return fail("nack without target");
      break;
    case proto::MembershipBody::kGossip: {
      auto ok = check_records(body.gossip().updates(), limits);
      if (!ok) return fail(ok.error());
      break;
    }
    case proto::MembershipBody::kSyncRequest: {
      if (!body.sync_request().has_sender()) return fail("sync request without sender");
      auto sender = from_wire(body.sync_request().sender(), limits);
      if (!sender) return fail(sender.error());
      if (sender->member.state != MemberState::alive) return fail("sync sender not alive");
      if (static_cast<size_t>(body.sync_request().bucket_digests_size()) > limits.max_digest_buckets) {
        return fail("too many digest buckets");
      }
      break;
    }
    case proto::MembershipBody::kSyncResponse: {
      auto ok = check_records(body.sync_response().members(), limits);
      if (!ok) return fail(ok.error());
      for (const auto& r : body.sync_response().members()) {
        if (!r.has_info()) return fail("sync record without info");
      }
      break;
    }
    case proto::MembershipBody::KIND_NOT_SET:
      return fail("membership body without kind");
  }
  return body;
}

}  // namespace mesh::membership
