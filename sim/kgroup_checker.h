// Invariants of one simulated k-group run, fed by the test state machine
// (CounterLog) and by the clients and observers of KgroupWorld: no committed
// update lost or reordered, one leader per term, no stale read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/node_id.h"
#include "proto/kgroup.pb.h"

namespace mesh::sim {

// "target#epoch.generation", how failures name a group.
std::string group_key(const proto::KgroupRef& ref);

// Values are unique across targets. A target's history is the list of counter values its state holds, across
// epochs: position p of it must hold the same value wherever and whenever it
// is applied or inherited.
class KgroupChecker {
 public:
  struct Ack {
    std::string target;
    size_t position;
    uint64_t value;
  };

  void applied(const std::string& target, size_t position, uint64_t value);
  // At most one leader per (group, term) reaches a quorum of promises.
  void elected(const std::string& group, uint64_t term, core::NodeId leader);
  // A client submits `value`; remember how far acknowledgements had got:
  // its own acknowledgement must land later in the history (an update
  // acknowledged before another was submitted is never ordered after it).
  void submitted(const std::string& target, uint64_t value);
  void acked(const std::string& target, size_t position, uint64_t value);
  // A leader that says it may serve reads (GroupReplica::can_read) holds
  // every update acknowledged so far: leases keep reads linearizable.
  void read(const std::string& target, const std::string& who, const std::vector<uint64_t>& values);
  void fail(const std::string& what);

  const std::vector<Ack>& acks() const { return acked_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::map<std::string, std::map<size_t, uint64_t>> history_;
  std::map<std::string, std::map<uint64_t, core::NodeId>> leaders_;
  std::map<uint64_t, std::optional<size_t>> floor_at_submit_;
  struct Latest {
    size_t position = 0;
    uint64_t value = 0;
  };
  // Per target: the highest acknowledged position and its value.
  std::map<std::string, Latest> max_acked_;
  std::vector<Ack> acked_;
  std::vector<std::string> failures_;
};

}  // namespace mesh::sim
