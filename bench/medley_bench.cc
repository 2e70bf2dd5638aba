// Medley against plain SWIM on the same topology and seed: failure detection
// time (protocol periods, at every live node) and hop-by-hop membership bytes
// per node per second, with alpha = 3 (Medley's default) and alpha = 0 (SWIM:
// uniform round-robin targets). Also false positives per node-hour under hop
// loss, with and without Lifeguard's local health. Each run is a whole
// simulated mesh on virtual time; read the ratio counters (medley / swim),
// never the wall time. By default N = 25 and 50 (so the ctest smoke run stays
// short); MEDLEY_BENCH_LARGE=1 runs N = 25, 50, 100, 200 and 400.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <set>

#include "core/log.h"
#include "tests/membership/medley_world.h"

namespace {

using mesh::core::Duration;
using mesh::core::TimePoint;
using mesh::membership::Medley;
using mesh::membership::MemberEvent;
using mesh::membership::MemberEventKind;
using mesh::membership::testing::MedleyWorld;
using mesh::membership::testing::quantile;
using mesh::membership::testing::WorldOptions;
using std::chrono::seconds;

struct Outcome {
  std::vector<double> detection;  // periods, per (observer, crashed node) pair
  double hop_bytes_per_node_s = 0;
  double body_bytes_per_node_s = 0;
  uint64_t false_failures = 0;
  double node_hours = 0;
};

mesh::sim::Topology topology(int kind, int n, uint64_t seed) {
  return kind == 0 ? mesh::sim::grid_for(n) : mesh::sim::random_geometric(n, seed);
}

// Boots every node within 5 s, lets lists settle for `warmup`, crashes
// `crashes` random nodes and watches for `window`.
Outcome run(const mesh::sim::Topology& topo, uint64_t seed, double alpha, double loss, uint32_t max_health,
            size_t crashes, Duration warmup, Duration window) {
  WorldOptions options;
  options.hop_loss = loss;
  options.medley.alpha = alpha;
  options.medley.max_local_health = max_health;
  MedleyWorld world(topo, seed, options);
  std::set<size_t> crashed;
  TimePoint crash_at{};
  struct Seen {
    TimePoint at;
    size_t observer;
    mesh::core::NodeId member;
  };
  std::vector<Seen> failed_events;
  for (size_t i = 0; i < world.size(); ++i) {
    const auto at = TimePoint(Duration(static_cast<Duration::rep>(world.simulator().rng().below(5'000'000))));
    world.simulator().at(at, [&world, &failed_events, i] {
      world.boot(i, 0, [&world, &failed_events](size_t index, Medley& m) {
        m.add_listener([&world, &failed_events, index](const MemberEvent& e) {
          if (e.kind == MemberEventKind::failed) failed_events.push_back({world.simulator().now(), index, e.member.id});
        });
      });
    });
  }
  world.run_for(warmup);
  const uint64_t hop_bytes_before = world.routing().stats().hop_bytes;
  uint64_t body_before = 0;
  for (size_t i = 0; i < world.size(); ++i) body_before += world.sent_bytes(i);
  while (crashed.size() < crashes) crashed.insert(static_cast<size_t>(world.simulator().rng().below(world.size())));
  crash_at = world.simulator().now();
  for (size_t c : crashed) world.crash(c);
  world.run_for(window);

  Outcome out;
  const double live = static_cast<double>(world.size() - crashed.size());
  const double secs = mesh::core::to_seconds(window);
  out.hop_bytes_per_node_s = static_cast<double>(world.routing().stats().hop_bytes - hop_bytes_before) / live / secs;
  uint64_t body_after = 0;
  for (size_t i = 0; i < world.size(); ++i) body_after += world.sent_bytes(i);
  out.body_bytes_per_node_s = static_cast<double>(body_after - body_before) / live / secs;
  out.node_hours = live * secs / 3600.0;
  const double period = mesh::core::to_seconds(options.medley.probe_period);
  std::set<std::pair<size_t, mesh::core::NodeId>> first_seen;
  for (const Seen& s : failed_events) {
    const bool of_crashed = crashed.contains(static_cast<size_t>(world.index_of(s.member)));
    if (!of_crashed) {
      ++out.false_failures;
      continue;
    }
    if (s.at < crash_at || !first_seen.insert({s.observer, s.member}).second) continue;
    out.detection.push_back(mesh::core::to_seconds(s.at - crash_at) / period);
  }
  return out;
}

double q(const std::vector<double>& v, double p) { return v.empty() ? 0.0 : quantile(v, p); }

// Args: topology kind (0 grid, 1 random), N.
void BM_MedleyVsSwim(benchmark::State& state) {
  mesh::core::log_to_null();
  const int kind = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  uint64_t seed = 1;
  Outcome medley;
  Outcome swim;
  for (auto _ : state) {
    const auto topo = topology(kind, n, seed);
    const size_t crashes = std::max<size_t>(1, static_cast<size_t>(n) / 25);
    medley = run(topo, seed, 3.0, 0.05, 8, crashes, seconds(90), seconds(150));
    swim = run(topo, seed, 0.0, 0.05, 8, crashes, seconds(90), seconds(150));
    ++seed;
  }
  state.counters["detect_p50_medley"] = q(medley.detection, 0.5);
  state.counters["detect_p99_medley"] = q(medley.detection, 0.99);
  state.counters["detect_p50_swim"] = q(swim.detection, 0.5);
  state.counters["detect_p99_swim"] = q(swim.detection, 0.99);
  state.counters["ratio_detect_p50"] = q(medley.detection, 0.5) / std::max(1e-9, q(swim.detection, 0.5));
  state.counters["ratio_detect_p99"] = q(medley.detection, 0.99) / std::max(1e-9, q(swim.detection, 0.99));
  state.counters["hop_Bps_node_medley"] = medley.hop_bytes_per_node_s;
  state.counters["hop_Bps_node_swim"] = swim.hop_bytes_per_node_s;
  state.counters["ratio_hop_bytes"] = medley.hop_bytes_per_node_s / std::max(1e-9, swim.hop_bytes_per_node_s);
  state.counters["ratio_e2e_bytes"] = medley.body_bytes_per_node_s / std::max(1e-9, swim.body_bytes_per_node_s);
}

// Args: hop loss in percent, local health (0 off, 1 on). No crashes: every
// failure is false.
void BM_FalsePositives(benchmark::State& state) {
  mesh::core::log_to_null();
  const double loss = static_cast<double>(state.range(0)) / 100.0;
  const uint32_t health = state.range(1) != 0 ? 8 : 0;
  uint64_t failures = 0;
  double node_hours = 0;
  for (auto _ : state) {
    // Three meshes, so one unlucky topology does not decide the comparison.
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const Outcome out =
          run(mesh::sim::random_geometric(50, seed), seed, 3.0, loss, health, 0, seconds(60), seconds(600));
      failures += out.false_failures;
      node_hours += out.node_hours;
    }
  }
  state.counters["false_failures_per_node_hour"] = static_cast<double>(failures) / node_hours;
}

void medley_args(benchmark::internal::Benchmark* b) {
  std::vector<int> sizes = {25, 50};
  if (std::getenv("MEDLEY_BENCH_LARGE") != nullptr) sizes = {25, 50, 100, 200, 400};
  for (int kind : {0, 1}) {
    for (int n : sizes) b->Args({kind, n});
  }
}

BENCHMARK(BM_MedleyVsSwim)->Apply(medley_args)->Iterations(1)->Unit(benchmark::kSecond);
BENCHMARK(BM_FalsePositives)->Args({5, 1})->Args({5, 0})->Args({10, 1})->Args({10, 0})->Iterations(1)->Unit(
    benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
