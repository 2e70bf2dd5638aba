#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "membership/member_record.h"
#include "proto/membership.pb.h"

namespace mesh::membership {

// Bounds a decoder enforces, so a peer cannot make us store or forward
// unbounded names and metadata.
struct CodecLimits {
  size_t max_name_bytes = 64;
  size_t max_metadata_entries = 16;
  size_t max_metadata_bytes = 384;
  size_t max_records = 256;  // per message (a sync chunk is far smaller in practice)
  size_t max_digest_buckets = 256;  // per sync request: 1 KB of hashes, within a datagram
};

void to_wire(const MemberRecord& record, proto::MemberRecord* out);
core::Expected<MemberRecord, std::string> from_wire(const proto::MemberRecord& record, const CodecLimits& limits);
// Bytes `record` adds to a repeated field (tag and length included).
size_t wire_size(const MemberRecord& record);

// Parses and validates a whole body: exactly one kind, every record valid,
// non-zero ids where a node is named. Never throws.
core::Expected<proto::MembershipBody, std::string> decode_body(std::string_view bytes, const CodecLimits& limits);

// Size of a metadata map as the limits count it.
size_t metadata_bytes(const std::map<std::string, std::string>& metadata);

}  // namespace mesh::membership
