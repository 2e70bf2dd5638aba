#pragma once

#include <array>
#include <optional>
#include <string_view>

#include "core/metrics.h"
#include "core/time.h"

namespace mesh::kgroup {

// Why a member began the election it won.
enum class ElectionTrigger {
  first,        // it never followed a leader of this group (a new group, a restart)
  leader_lost,  // its leader's lease ran out, membership reported it failed, or it stepped down
  preempt,      // it outranked its leader and let that leader's lease lapse (Bully pre-emption)
};
std::string_view to_string(ElectionTrigger trigger);

// The latencies a member measures of its own group's operations, the ones
// CoMesh Table 4 reports (quorum, election, state transfer), in milliseconds
// of Env time. Each is measured at the one member where both ends happen, so
// no two clocks are compared. One instance per node, shared by its replicas.
//   kgroup_quorum_commit_ms           a submission proposed by the leader -> committed at f + 1 members
//   kgroup_election_ms{trigger}       this member began electing -> it won its term
//   kgroup_leader_gap_ms{trigger}     the last append it accepted from its leader (or its own step-down)
//                                     -> it won (includes the lease it waited out); not for trigger=first
//   kgroup_seal_commit_ms             the leader proposed the seal -> the seal committed
//   kgroup_state_transfer_ms          a successor member started (the start request, sent once the seal
//                                     committed, arrived) -> as the successor's leader it committed the
//                                     inherited state at a quorum (its election included)
//   kgroup_state_pull_ms              the successor's leader asked an old member for the sealed state
//                                     -> it committed the inherited state
// and counts log compaction (not latencies):
//   kgroup_snapshots_taken_total      snapshots this member took of its own state (log compaction)
//   kgroup_snapshots_installed_total  snapshots it received from another member because the entries it
//                                     needed were compacted away there
class ReplicaMetrics {
 public:
  explicit ReplicaMetrics(core::Metrics& metrics);

  void quorum_commit(core::Duration d) { quorum_commit_.record(core::to_millis(d)); }
  void election(ElectionTrigger trigger, core::Duration since_start, std::optional<core::Duration> leader_gap);
  void seal_commit(core::Duration d) { seal_commit_.record(core::to_millis(d)); }
  void state_transfer(core::Duration d) { state_transfer_.record(core::to_millis(d)); }
  void state_pull(core::Duration d) { state_pull_.record(core::to_millis(d)); }
  void snapshot_taken() { snapshots_taken_.add(); }
  void snapshot_installed() { snapshots_installed_.add(); }

 private:
  static constexpr size_t kTriggers = 3;
  core::Histogram& quorum_commit_;
  std::array<core::Histogram*, kTriggers> election_{};
  std::array<core::Histogram*, kTriggers> leader_gap_{};
  core::Histogram& seal_commit_;
  core::Histogram& state_transfer_;
  core::Histogram& state_pull_;
  core::Counter& snapshots_taken_;
  core::Counter& snapshots_installed_;
};

}  // namespace mesh::kgroup
