#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"
#include "sim/network.h"
#include "sim/topology.h"

namespace mesh::sim {

// A scenario file that cannot be used: the message names the file, line,
// key and how to fix it.
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class EventAction { crash, restart, link_down, link_up, partition, heal };
std::string_view to_string(EventAction action);

struct ScenarioEvent {
  core::Duration at{};
  EventAction action = EventAction::crash;
  int node = -1;                        // crash, restart
  int a = -1;                           // link_down, link_up
  int b = -1;
  std::vector<std::vector<int>> groups;  // partition
  int line = 0;                         // in the scenario file, for messages
};

// One simulation run's world, as read from TOML (see meshsim --help for the
// format). Node indices are 0-based topology indices.
struct Scenario {
  std::string source = "<scenario>";  // file name, for messages

  struct TopologySection {
    std::string kind = "grid";
    int nodes = 9;
    int width = 0;   // grid (optional), grid3d
    int height = 0;  // grid (optional), grid3d
    int depth = 0;   // grid3d
    int clusters = 3;
    uint64_t seed = 1;  // random and clustered layouts; fixed per scenario so events can name links
  } topology;

  struct LinkSection {
    double delay_ms = 5.0;
    double jitter_ms = 0.0;
    double loss = 0.0;
  } link;

  struct RunSection {
    double duration_s = 30.0;
    uint64_t seed = 1;  // meshsim --seed overrides
  } run;

  struct WorkloadSection {
    double ping_interval_ms = 0.0;  // 0: no pings
    // Whom a ping goes to: a random one-hop neighbour of the source, or any
    // random other node (multi-hop, along the OLSR routes).
    enum class Targets { neighbours, any };
    Targets ping_targets = Targets::neighbours;
  } workload;

  std::vector<ScenarioEvent> events;  // sorted by time, file order within a time

  Topology build_topology() const;
  LinkParams link_params() const;
  core::Duration duration() const { return core::from_seconds(run.duration_s); }
};

// Both throw ScenarioError.
Scenario load_scenario(const std::string& path);
Scenario parse_scenario(std::string_view text, std::string_view source_name);

}  // namespace mesh::sim
