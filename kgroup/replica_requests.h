// What a GroupReplica's requests carry and how they retry (internal to the
// group_replica*.cc files).
#pragma once

#include <cstdint>

#include "core/messenger.h"
#include "core/time.h"
#include "kgroup/group_target.h"
#include "proto/kgroup.pb.h"

namespace mesh::kgroup {

// An append, given up after `timeout` (then the next heartbeat sends a new
// one). To a follower whose round trip is measured (core::RttEstimator) it is
// retransmitted after the RTO, doubling, so an append lost on one of its
// hops is sent again about one round trip later; to an unmeasured one it is
// sent once.
core::RetryPolicy append_attempt(core::Duration timeout);
// Retransmissions with backoff until `deadline`: the first after the
// destination's measured RTO, or after deadline / 4 while its round trip is
// unmeasured.
core::RetryPolicy retrying(core::Duration deadline);
// The reference naming one group on the wire.
proto::KgroupRef make_ref(const GroupTarget& target, uint64_t epoch, uint32_t generation);

}  // namespace mesh::kgroup
