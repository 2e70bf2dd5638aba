#include "kgroup/replica_metrics.h"

#include <string>

namespace mesh::kgroup {

std::string_view to_string(ElectionTrigger trigger) {
  switch (trigger) {
    case ElectionTrigger::first:
      return "first";
    case ElectionTrigger::leader_lost:
      return "leader_lost";
    case ElectionTrigger::preempt:
      return "preempt";
  }
  return "first";
}

ReplicaMetrics::ReplicaMetrics(core::Metrics& metrics)
    : quorum_commit_(metrics.histogram("kgroup_quorum_commit_ms")),
      seal_commit_(metrics.histogram("kgroup_seal_commit_ms")),
      state_transfer_(metrics.histogram("kgroup_state_transfer_ms")),
      state_pull_(metrics.histogram("kgroup_state_pull_ms")),
      snapshots_taken_(metrics.counter("kgroup_snapshots_taken_total")),
      snapshots_installed_(metrics.counter("kgroup_snapshots_installed_total")) {
  for (const ElectionTrigger trigger :
       {ElectionTrigger::first, ElectionTrigger::leader_lost, ElectionTrigger::preempt}) {
    const auto i = static_cast<size_t>(trigger);
    const core::Labels labels{{"trigger", std::string(to_string(trigger))}};
    election_[i] = &metrics.histogram("kgroup_election_ms", labels);
    // A first election follows no leader, so it has no gap.
    if (trigger != ElectionTrigger::first) leader_gap_[i] = &metrics.histogram("kgroup_leader_gap_ms", labels);
  }
}

void ReplicaMetrics::election(ElectionTrigger trigger, core::Duration since_start,
                              std::optional<core::Duration> leader_gap) {
  const auto i = static_cast<size_t>(trigger);
  election_[i]->record(core::to_millis(since_start));
  if (leader_gap && leader_gap_[i] != nullptr) leader_gap_[i]->record(core::to_millis(*leader_gap));
}

}  // namespace mesh::kgroup
