// Simulator throughput: events per second of a 100-node mesh running real
// Nodes (beacons, authenticated datagrams, pings), against a bare TimerQueue
// scheduling and running empty callbacks in the same run; the ratio is the
// cost of simulating the protocol stack per event.
//
// BM_MeshSimScaling runs the issue-17 scenario (random topology, 2 % loss,
// a ping per second) at 100 and 250 nodes, and 500 and 1000 with
// SIM_BENCH_LARGE=1, each with OLSR's route calculation on every topology
// change (route_recalc_ms 0) and at most every 100 ms (the default), and
// with OLSR message packing off (pack 0, the emission the first
// measurement saw, one OLSR message a packet): microseconds per event (flat
// in N when no hot path grows with the mesh) and heap bytes per simulated
// node. Packing and Medley's piggy-backing make the OLSR messages each event
// carries grow with N, so the run also reports them per event and the cost
// per event plus OLSR message received.
#include <benchmark/benchmark.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>

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

// Bytes the allocator has handed out and not taken back; 0 where the C
// library cannot tell.
double heap_in_use() {
#if defined(__GLIBC__)
  return static_cast<double>(mallinfo2().uordblks);
#else
  return 0;
#endif
}

// Processor time of this process: on a shared machine, wall time mostly
// measures the neighbours.
double cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Virtual seconds per scaling run: SIM_BENCH_DURATION_S, else 30.
double scaling_duration_s() {
  const char* env = std::getenv("SIM_BENCH_DURATION_S");
  return env != nullptr ? std::stod(env) : 30.0;
}

// Arguments: nodes, the OLSR route_recalc_interval in ms (0 recalculates
// on every topology change, the cost before the interval existed), and
// whether OLSR packs messages into shared packets (1, the default).
void BM_MeshSimScaling(benchmark::State& state) {
  mesh::core::log_to_null();
  mesh::sim::MeshSim::Options options;
  options.configure = [interval = std::chrono::milliseconds(state.range(1)),
                       pack = state.range(2) != 0](mesh::agent::NodeConfig& config) {
    config.routing.route_recalc_interval = interval;
    config.routing.pack_messages = pack;
  };
  mesh::sim::Scenario scenario;
  scenario.source = "bench-random-" + std::to_string(state.range(0));
  scenario.topology.kind = "random";
  scenario.topology.nodes = static_cast<int>(state.range(0));
  scenario.link.loss = 0.02;
  scenario.run.duration_s = scaling_duration_s();
  scenario.workload.ping_interval_ms = 1000;
  uint64_t events = 0;
  uint64_t olsr_messages = 0;
  double heap_bytes = 0;
  double seconds = 0;
  for (auto _ : state) {
    const double heap_before = heap_in_use();
    const double start = cpu_seconds();
    mesh::sim::MeshSim sim(scenario, 1, options);
    sim.run();
    seconds += cpu_seconds() - start;
    events += sim.simulator().events_processed();
    olsr_messages += sim.message_totals()["olsr/hop/received"];
    // Measured while the simulation is still alive: what its nodes hold.
    heap_bytes = heap_in_use() - heap_before;
  }
  state.counters["events_per_run"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kAvgIterations);
  state.counters["us_per_event"] = seconds * 1e6 / static_cast<double>(events);
  state.counters["olsr_messages_per_event"] = static_cast<double>(olsr_messages) / static_cast<double>(events);
  state.counters["us_per_event_plus_message"] = seconds * 1e6 / static_cast<double>(events + olsr_messages);
  // The same virtual run's whole CPU time: the route interval also changes
  // how many events there are.
  state.counters["cpu_s"] = seconds / static_cast<double>(state.iterations());
  state.counters["heap_bytes_per_node"] = heap_bytes / static_cast<double>(state.range(0));
}

void scaling_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"nodes", "route_recalc_ms", "pack"});
  for (int64_t nodes : {100, 250}) b->Args({nodes, 0, 1})->Args({nodes, 100, 1})->Args({nodes, 100, 0});
  if (std::getenv("SIM_BENCH_LARGE") != nullptr) {
    for (int64_t nodes : {500, 1000}) b->Args({nodes, 0, 1})->Args({nodes, 100, 1})->Args({nodes, 100, 0});
  }
}
BENCHMARK(BM_MeshSimScaling)->Apply(scaling_args)->Unit(benchmark::kSecond)->Iterations(1);

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
  // Per CPU second, as us_per_event of the scaling runs.
  state.counters["us_per_event"] =
      benchmark::Counter(static_cast<double>(events) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TimerQueueBaseline)->Arg(40000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
