// Medley against plain SWIM on the same topology and seed: failure detection
// time (protocol periods, at every live node) and hop-by-hop membership bytes
// per node per second, with alpha = 3 (Medley's default) and alpha = 0 (SWIM:
// uniform round-robin targets). Also false positives per node-hour under hop
// loss, with and without Lifeguard's local health. Each run is a whole
// simulated mesh on virtual time; read the ratio counters (medley / swim),
// never the wall time. By default N = 25 and 50 (so the ctest smoke run stays
// short); MEDLEY_BENCH_LARGE=1 runs N = 25, 50, 100, 200 and 400, the false
// positives at N = 50 to 200 and the traffic breakdown at N = 100.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

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
  uint64_t false_failures = 0;         // in the window
  uint64_t false_failures_warmup = 0;  // before it (lists still forming)
  double node_hours = 0;
  // Every membership counter series (name{labels}) summed over the nodes
  // alive at the end, per node per second of the window.
  std::map<std::string, double> per_node_s;
};

// Membership counters of node i, by series.
std::map<std::string, uint64_t> counters_of(MedleyWorld& world, size_t i) {
  std::map<std::string, uint64_t> out;
  if (world.metrics(i) == nullptr) return out;
  for (const auto& row : world.metrics(i)->counters()) {
    if (row.name.rfind("membership_", 0) == 0) out[row.series] = row.value;
  }
  return out;
}

mesh::sim::Topology topology(int kind, int n, uint64_t seed) {
  return kind == 0 ? mesh::sim::grid_for(n) : mesh::sim::random_geometric(n, seed);
}

// Boots every node within 5 s, lets lists settle for `warmup`, crashes
// `crashes` random nodes and watches for `window`.
Outcome run(const mesh::sim::Topology& topo, uint64_t seed, const mesh::membership::MedleyOptions& medley, double loss,
            size_t crashes, Duration warmup, Duration window) {
  WorldOptions options;
  options.hop_loss = loss;
  options.medley = medley;
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
  std::vector<std::map<std::string, uint64_t>> counters_before;
  for (size_t i = 0; i < world.size(); ++i) counters_before.push_back(counters_of(world, i));
  const uint64_t hop_bytes_before = world.routing().stats().hop_bytes;
  uint64_t body_before = 0;
  for (size_t i = 0; i < world.size(); ++i) body_before += world.sent_bytes(i);
  // Victims whose loss leaves the rest connected: a cut-off part is rightly
  // declared failed, which would count as a false positive here.
  while (crashed.size() < crashes) {
    const auto c = static_cast<size_t>(world.simulator().rng().below(world.size()));
    if (mesh::membership::testing::still_connected_without(world.topology(), crashed, c)) crashed.insert(c);
  }
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
  for (size_t i = 0; i < world.size(); ++i) {
    if (!world.up(i)) continue;
    for (const auto& [series, value] : counters_of(world, i)) {
      auto it = counters_before[i].find(series);
      const uint64_t before = it == counters_before[i].end() ? 0 : it->second;
      out.per_node_s[series] += static_cast<double>(value - before) / live / secs;
    }
  }
  const double period = mesh::core::to_seconds(options.medley.probe_period);
  std::set<std::pair<size_t, mesh::core::NodeId>> first_seen;
  for (const Seen& s : failed_events) {
    const bool of_crashed = crashed.contains(static_cast<size_t>(world.index_of(s.member)));
    if (!of_crashed) {
      // Only in the measured window: boot-time churn is not steady state.
      if (s.at >= crash_at) ++out.false_failures;
      else ++out.false_failures_warmup;
      continue;
    }
    if (s.at < crash_at || !first_seen.insert({s.observer, s.member}).second) continue;
    out.detection.push_back(mesh::core::to_seconds(s.at - crash_at) / period);
  }
  return out;
}

// The defaults with this exponent and local-health cap.
mesh::membership::MedleyOptions medley_options(double alpha, uint32_t max_health) {
  mesh::membership::MedleyOptions o;
  o.alpha = alpha;
  o.max_local_health = max_health;
  return o;
}

// The options before the traffic tuning (the "before" column of
// BM_TrafficBreakdown): every silent probe suspects at once, updates are
// retransmitted 4 * ceil(log10(N + 1)) times, push-pull of whole lists every
// 30 s at any N with any live member.
mesh::membership::MedleyOptions untuned_options() {
  mesh::membership::MedleyOptions o = medley_options(3.0, 8);
  o.silent_probes_to_suspect = 1;
  o.push_pull_scale_threshold = 0;
  o.push_pull_members_per_bucket = 0;
  return o;
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
    medley = run(topo, seed, medley_options(3.0, 8), 0.05, crashes, seconds(90), seconds(150));
    // Plain SWIM knows nothing of hops: every silent probe counts.
    mesh::membership::MedleyOptions swim_options = medley_options(0.0, 8);
    swim_options.silence_radius_hops = 0;
    swim = run(topo, seed, swim_options, 0.05, crashes, seconds(90), seconds(150));
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
  // 5 % loss, local health on, over the window (live nodes only).
  state.counters["false_per_node_hour_medley"] = static_cast<double>(medley.false_failures) / medley.node_hours;
  state.counters["false_per_node_hour_swim"] = static_cast<double>(swim.false_failures) / swim.node_hours;
  state.counters["nodes"] = n;
}

// Args: hop loss in percent, local health (0 off, 1 on), N. No crashes:
// every failure is false. Random meshes; with MEDLEY_BENCH_LARGE three seeds
// of 600 s up to N = 100 and one seed of 300 s at N = 200; one seed of 600 s
// at N = 50 in the ctest smoke run.
void BM_FalsePositives(benchmark::State& state) {
  mesh::core::log_to_null();
  const double loss = static_cast<double>(state.range(0)) / 100.0;
  const uint32_t health = state.range(1) != 0 ? 8 : 0;
  const int n = static_cast<int>(state.range(2));
  const uint64_t seeds = std::getenv("MEDLEY_BENCH_LARGE") != nullptr && n <= 100 ? 3 : 1;
  const Duration window = n <= 100 ? seconds(600) : seconds(300);
  uint64_t failures = 0;
  double node_hours = 0;
  for (auto _ : state) {
    // Several meshes where affordable, so one unlucky topology does not
    // decide the comparison.
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      const Outcome out =
          run(mesh::sim::random_geometric(n, seed), seed, medley_options(3.0, health), loss, 0, seconds(90), window);
      failures += out.false_failures;
      node_hours += out.node_hours;
    }
  }
  state.counters["false_failures_per_node_hour"] = static_cast<double>(failures) / node_hours;
  state.counters["false_failures"] = static_cast<double>(failures);
  state.counters["nodes"] = n;
}

// Where the membership bytes go (random mesh, 5 % hop loss, the same
// topology, seed and crashes as BM_MedleyVsSwim/1/N): every membership
// counter per node per second, printed as a table. Args: N, options (0 the
// untuned ones, 1 the defaults).
void BM_TrafficBreakdown(benchmark::State& state) {
  mesh::core::log_to_null();
  const int n = static_cast<int>(state.range(0));
  const bool tuned = state.range(1) != 0;
  Outcome out;
  for (auto _ : state) {
    const size_t crashes = std::max<size_t>(1, static_cast<size_t>(n) / 25);
    out = run(mesh::sim::random_geometric(n, 1), 1, tuned ? medley_options(3.0, 8) : untuned_options(), 0.05, crashes,
              seconds(90), seconds(150));
  }
  std::printf("traffic breakdown, %s options, random N=%d, 5%% loss, seed 1, per node per second:\n",
              tuned ? "default" : "untuned", n);
  for (const auto& [series, value] : out.per_node_s) std::printf("  %-70s %10.2f\n", series.c_str(), value);
  state.counters["false_failures"] = static_cast<double>(out.false_failures);
  state.counters["false_failures_warmup"] = static_cast<double>(out.false_failures_warmup);
  state.counters["hop_Bps_node"] = out.hop_bytes_per_node_s;
  state.counters["body_Bps_node"] = out.body_bytes_per_node_s;
  state.counters["detect_p50"] = q(out.detection, 0.5);
  state.counters["detect_p99"] = q(out.detection, 0.99);
}

void medley_args(benchmark::internal::Benchmark* b) {
  std::vector<int> sizes = {25, 50};
  if (std::getenv("MEDLEY_BENCH_LARGE") != nullptr) sizes = {25, 50, 100, 200, 400};
  for (int kind : {0, 1}) {
    for (int n : sizes) b->Args({kind, n});
  }
}

BENCHMARK(BM_MedleyVsSwim)->Apply(medley_args)->Iterations(1)->Unit(benchmark::kSecond);
void breakdown_args(benchmark::internal::Benchmark* b) {
  const int n = std::getenv("MEDLEY_BENCH_LARGE") != nullptr ? 100 : 25;
  b->Args({n, 0})->Args({n, 1});
}

BENCHMARK(BM_TrafficBreakdown)->Apply(breakdown_args)->Iterations(1)->Unit(benchmark::kSecond);
void false_positive_args(benchmark::internal::Benchmark* b) {
  std::vector<int> sizes = {50};
  // N = 400 is left out: at 10 % loss one seed takes many minutes on the
  // 2-core machine.
  if (std::getenv("MEDLEY_BENCH_LARGE") != nullptr) sizes = {50, 100, 200};
  for (int n : sizes) {
    for (int loss : {5, 10}) {
      for (int health : {1, 0}) b->Args({loss, health, n});
    }
  }
}

BENCHMARK(BM_FalsePositives)->Apply(false_positive_args)->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace

BENCHMARK_MAIN();
