#include "kgroup/replica_requests.h"

#include <algorithm>

namespace mesh::kgroup {

core::RetryPolicy append_attempt(core::Duration timeout) {
  core::RetryPolicy policy;
  policy.first_timeout = timeout;
  policy.deadline = timeout;
  policy.jitter = 0.0;
  return policy;
}

core::RetryPolicy retrying(core::Duration deadline) {
  core::RetryPolicy policy;
  policy.first_timeout = std::max(deadline / 4, core::Duration(std::chrono::milliseconds(1)));
  policy.backoff = 1.5;
  policy.max_interval = deadline;
  policy.deadline = deadline;
  return policy;
}

proto::KgroupRef make_ref(const GroupTarget& target, uint64_t epoch, uint32_t generation) {
  proto::KgroupRef ref;
  ref.set_target(target.to_string());
  ref.set_epoch(epoch);
  ref.set_generation(generation);
  return ref;
}

}  // namespace mesh::kgroup
