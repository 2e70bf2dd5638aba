#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/kgroup_service.h"
#include "agent/text_log.h"
#include "core/expected.h"
#include "kgroup/group_target.h"

namespace mesh::agent {

// A target's whole text log as its group's leader holds it (meshctl kgroup
// TARGET --log --through-leader).
struct LeaderLog {
  std::vector<TextLog::Record> records;  // the committed log, positions from 1
  core::NodeId leader;                   // the leader that answered the last page, in
  uint64_t term = 0;                     // this term
  uint64_t epoch = 0;
  uint32_t generation = 0;
  uint32_t pages = 0;
};
using LeaderLogCallback = std::function<void(const core::Expected<LeaderLog, std::string>& result)>;

// Reads `target`'s text log through its leader (KgroupService::read), one
// page of at most `page_bytes` per read so that every answer fits one
// datagram, until a page reaches the end of the log; all within `timeout`
// (zero: the service's write_timeout). Each page is a linearizable read,
// and the log only grows without moving an entry (positions survive
// migration), so the earlier pages are a prefix of the log at the last
// page's read: the whole is the committed log at one instant between the
// call and the callback. The callback runs once; `kgroups` must outlive it.
void read_leader_log(KgroupService& kgroups, const kgroup::GroupTarget& target, core::Duration timeout,
                     size_t page_bytes, LeaderLogCallback callback);

}  // namespace mesh::agent
