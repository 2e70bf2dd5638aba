#include "kgroup/kgroup_codec.h"

#include "kgroup/group_target.h"

namespace mesh::kgroup {
namespace {

bool valid_ref(const proto::KgroupRef& ref) { return GroupTarget::parse(ref.target()).has_value(); }

template <typename Entries>
bool valid_entries(const Entries& entries) {
  if (static_cast<size_t>(entries.size()) > kMaxEntriesPerMessage) return false;
  uint64_t previous = 0;
  for (const proto::KgroupEntry& e : entries) {
    if (e.seq() == 0 || e.seq() <= previous) return false;
    previous = e.seq();
  }
  return true;
}

}  // namespace

core::Expected<proto::KgroupBody, std::string> decode_body(std::string_view bytes) {
  using core::Unexpected;
  if (bytes.size() > kMaxBodyBytes) return Unexpected(std::string("too_large"));
  proto::KgroupBody body;
  if (!body.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return Unexpected(std::string("malformed"));
  switch (body.kind_case()) {
    case proto::KgroupBody::kElection:
      if (!valid_ref(body.election().group())) return Unexpected(std::string("bad_group"));
      break;
    case proto::KgroupBody::kPrepare:
      if (!valid_ref(body.prepare().group())) return Unexpected(std::string("bad_group"));
      if (body.prepare().term() == 0 || body.prepare().from_seq() == 0) return Unexpected(std::string("bad_prepare"));
      break;
    case proto::KgroupBody::kPrepareReply:
      if (!valid_entries(body.prepare_reply().entries())) return Unexpected(std::string("bad_entries"));
      break;
    case proto::KgroupBody::kAppend:
      if (!valid_ref(body.append().group())) return Unexpected(std::string("bad_group"));
      if (body.append().term() == 0) return Unexpected(std::string("bad_append"));
      if (!valid_entries(body.append().entries())) return Unexpected(std::string("bad_entries"));
      break;
    case proto::KgroupBody::kHeartbeats:
      if (body.heartbeats().appends().empty()) return Unexpected(std::string("bad_heartbeats"));
      for (const proto::KgroupAppend& append : body.heartbeats().appends()) {
        if (!valid_ref(append.group())) return Unexpected(std::string("bad_group"));
        // Only heartbeats travel together: entries leave in appends of their own.
        if (append.term() == 0 || !append.entries().empty()) return Unexpected(std::string("bad_heartbeats"));
      }
      break;
    case proto::KgroupBody::kStateRequest:
      if (!valid_ref(body.state_request().group())) return Unexpected(std::string("bad_group"));
      break;
    case proto::KgroupBody::kDecommission:
      if (!valid_ref(body.decommission().group())) return Unexpected(std::string("bad_group"));
      break;
    case proto::KgroupBody::kStart:
      if (!valid_ref(body.start().group()) || !valid_ref(body.start().source())) {
        return Unexpected(std::string("bad_group"));
      }
      if (body.start().members().empty()) return Unexpected(std::string("bad_start"));
      break;
    case proto::KgroupBody::kElectionAnswer:
    case proto::KgroupBody::kStartAck:
    case proto::KgroupBody::kAppendReply:
    case proto::KgroupBody::kStateReply:
    case proto::KgroupBody::kDecommissionAck:
    case proto::KgroupBody::kHeartbeatAnswers:
      break;
    case proto::KgroupBody::KIND_NOT_SET:
      return Unexpected(std::string("empty"));
  }
  return body;
}

std::string encode_body(const proto::KgroupBody& body) { return body.SerializeAsString(); }

}  // namespace mesh::kgroup
