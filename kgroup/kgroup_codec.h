#pragma once

#include <string>
#include <string_view>

#include "core/expected.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {

// Limits a decoded body must respect: every message fits one datagram.
inline constexpr size_t kMaxBodyBytes = 1400;
inline constexpr size_t kMaxEntriesPerMessage = 256;

// Parses and validates a KgroupBody: exactly one message kind, group targets
// that parse as GroupTarget, entries with non-zero sequence numbers in strictly
// increasing order. Anything else is an error, never a crash.
core::Expected<proto::KgroupBody, std::string> decode_body(std::string_view bytes);

std::string encode_body(const proto::KgroupBody& body);

}  // namespace mesh::kgroup
