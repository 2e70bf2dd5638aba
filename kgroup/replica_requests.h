// What a GroupReplica's requests carry and how they retry (internal to the
// group_replica*.cc files).
#pragma once

#include <cstdint>

#include "core/messenger.h"
#include "core/time.h"
#include "kgroup/group_target.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {

// One attempt, given up after `timeout` (appends: the next heartbeat retries).
core::RetryPolicy single_attempt(core::Duration timeout);
// Retransmissions with backoff until `deadline`.
core::RetryPolicy retrying(core::Duration deadline);
// The reference naming one group on the wire.
proto::KgroupRef make_ref(const GroupTarget& target, uint64_t epoch, uint32_t generation);

}  // namespace mesh::kgroup
