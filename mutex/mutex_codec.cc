#include "mutex/mutex_codec.h"

#include <optional>

namespace mesh::mutex {
namespace {

bool good_resource(const std::string& resource) { return !resource.empty() && resource.size() <= kMaxResourceName; }

bool good_id(const proto::MutexRequestId& id) { return id.seq() != 0 && id.node() != 0; }

// Every message but the join reply and the ack names a resource and a request.
template <typename M>
std::optional<MutexCodecError> check_named(const M& m) {
  if (!good_resource(m.resource())) return MutexCodecError::bad_resource;
  if (!m.has_id() || !good_id(m.id())) return MutexCodecError::bad_request;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(MutexCodecError error) {
  switch (error) {
    case MutexCodecError::malformed:
      return "malformed";
    case MutexCodecError::empty:
      return "empty";
    case MutexCodecError::bad_resource:
      return "bad_resource";
    case MutexCodecError::bad_request:
      return "bad_request";
    case MutexCodecError::too_many:
      return "too_many";
  }
  return "unknown";
}

core::Expected<proto::MutexBody, MutexCodecError> decode_mutex_body(std::string_view bytes) {
  proto::MutexBody body;
  if (!body.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return core::Unexpected(MutexCodecError::malformed);
  }
  std::optional<MutexCodecError> error;
  switch (body.kind_case()) {
    case proto::MutexBody::KIND_NOT_SET:
      error = MutexCodecError::empty;
      break;
    case proto::MutexBody::kRequest:
      error = check_named(body.request());
      break;
    case proto::MutexBody::kOk:
      error = check_named(body.ok());
      if (!error && (body.ok().recently_oked_size() > kMaxListEntries ||
                     body.ok().recently_oked_nonces_size() > kMaxListEntries)) {
        error = MutexCodecError::too_many;
      }
      break;
    case proto::MutexBody::kRelease:
      error = check_named(body.release());
      break;
    case proto::MutexBody::kJoin:
      error = check_named(body.join());
      if (!error && body.join().ancestors_size() > kMaxListEntries) error = MutexCodecError::too_many;
      break;
    case proto::MutexBody::kTree:
      error = check_named(body.tree());
      if (!error && body.tree().edges_size() > kMaxListEntries) error = MutexCodecError::too_many;
      break;
    case proto::MutexBody::kSubtreeOk:
      error = check_named(body.subtree_ok());
      break;
    case proto::MutexBody::kRebuild:
      error = check_named(body.rebuild());
      break;
    case proto::MutexBody::kAdopt:
      error = check_named(body.adopt());
      break;
    case proto::MutexBody::kJoinReply:
    case proto::MutexBody::kAck:
    case proto::MutexBody::kProbe:
      break;
  }
  if (error) return core::Unexpected(*error);
  return body;
}

proto::MutexRequestId to_proto(const RequestId& id) {
  proto::MutexRequestId p;
  p.set_seq(id.seq);
  p.set_node(id.node.value());
  p.set_nonce(id.nonce);
  return p;
}

RequestId from_proto(const proto::MutexRequestId& id) {
  return RequestId{id.seq(), core::NodeId(id.node()), id.nonce()};
}

}  // namespace mesh::mutex
