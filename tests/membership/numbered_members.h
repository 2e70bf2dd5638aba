#pragma once

#include <cstdint>
#include <string>

#include "core/node_id.h"
#include "membership/member_record.h"

namespace mesh::membership::test {

// Member i of a test's table: id 10.0.0.i (self is usually 1).
inline core::NodeId numbered_id(uint32_t i) { return core::NodeId(0x0a000000u + i); }

// An alive record with info about member i.
inline MemberRecord numbered_alive(uint32_t i, uint64_t incarnation) {
  MemberRecord r;
  r.member.id = numbered_id(i);
  r.member.name = "n" + std::to_string(i);
  r.member.incarnation = incarnation;
  r.has_info = true;
  return r;
}

}  // namespace mesh::membership::test
