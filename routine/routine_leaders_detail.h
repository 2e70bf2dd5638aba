#pragma once

// Helpers shared by the files that implement RoutineLeaders
// (routine_leaders.cc, routine_leaders_lineage.cc); nobody else includes it.

#include <cstdint>
#include <string>
#include <tuple>

#include "proto/routine.pb.h"

namespace mesh::routine::detail {

// A DeviceLockRelease of `holder`'s lock on `device` (or of its place in
// the queue or lineage), as a device group write.
// `serial_key_us`: EV, withdraw only an entry under this key or below
// (DeviceLockRelease.serial_key_us); 0 releases whatever it holds.
// `before_round`: take only a place an earlier round's request made
// (DeviceLockRelease.before_round); 0: whatever round.
inline std::string unlock_payload(const std::string& device, const std::string& holder, int64_t serial_key_us = 0,
                                  uint32_t before_round = 0) {
  proto::DeviceUpdate release;
  release.mutable_unlock()->set_device(device);
  release.mutable_unlock()->set_holder(holder);
  release.mutable_unlock()->set_serial_key_us(serial_key_us);
  release.mutable_unlock()->set_before_round(before_round);
  return release.SerializeAsString();
}

// "routine:ID" -> "ID"
inline std::string routine_id(const std::tuple<std::string, uint64_t, uint32_t>& key) {
  const std::string& target = std::get<0>(key);
  return target.substr(target.find(':') + 1);
}

}  // namespace mesh::routine::detail
