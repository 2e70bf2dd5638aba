// Simulator throughput: events per second of a 100-node mesh running real
// Nodes (beacons, authenticated datagrams, pings), against a bare TimerQueue
// scheduling and running empty callbacks in the same run; the ratio is the
// cost of simulating the protocol stack per event.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "core/log.h"
#include "core/timer_queue.h"
#include "sim/mesh_sim.h"
#include "sim/scenario.h"

namespace {

using mesh::core::Duration;
using mesh::core::TimePoint;

mesh::sim::Scenario mesh_100() {
  mesh::sim::Scenario s;
  s.source = "bench-random-100";
  s.topology.kind = "random";
  s.topology.nodes = 100;
  s.link.delay_ms = 4;
  s.link.jitter_ms = 4;
  s.link.loss = 0.05;
  s.run.duration_s = 10;
  s.workload.ping_interval_ms = 50;
  return s;
}

void BM_MeshSim100Nodes(benchmark::State& state) {
  mesh::core::log_to_null();
  const mesh::sim::Scenario scenario = mesh_100();
  uint64_t events = 0;
  uint64_t seed = 1;
  for (auto _ : state) {
    mesh::sim::MeshSim sim(scenario, seed++);
    sim.run();
    events += sim.simulator().events_processed();
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events_per_run"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_MeshSim100Nodes)->Unit(benchmark::kMillisecond);

// The floor: schedule and run N empty callbacks at spread-out deadlines.
void BM_TimerQueueBaseline(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  uint64_t events = 0;
  for (auto _ : state) {
    mesh::core::TimerQueue queue;
    uint64_t ran = 0;
    // Deadlines in a scrambled order, as network delays and timers interleave.
    for (uint64_t i = 0; i < n; ++i) queue.schedule(TimePoint(Duration((i * 7919) % n)), [&ran] { ++ran; });
    events += queue.run_due(TimePoint(Duration(n)));
    benchmark::DoNotOptimize(ran);
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_TimerQueueBaseline)->Arg(40000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
