#pragma once

#include <string>
#include <string_view>

#include "core/expected.h"
#include "mutex/request_id.h"
#include "proto/mutex.pb.h"

namespace mesh::mutex {

enum class MutexCodecError {
  malformed,     // not a parseable MutexBody
  empty,         // no message in the oneof
  bad_resource,  // empty or longer than the limit
  bad_request,   // request id without a node or with sequence number 0
  too_many,      // a repeated field beyond what one datagram can honestly carry
};
std::string_view to_string(MutexCodecError error);

// Bounds a well-formed body stays within.
inline constexpr size_t kMaxResourceName = 128;
inline constexpr int kMaxListEntries = 1024;

// Parses and validates a MutexBody: every message that names a resource and
// a request must name them properly; hostile bytes give an error, never a
// crash.
core::Expected<proto::MutexBody, MutexCodecError> decode_mutex_body(std::string_view bytes);

proto::MutexRequestId to_proto(const RequestId& id);
RequestId from_proto(const proto::MutexRequestId& id);

}  // namespace mesh::mutex
