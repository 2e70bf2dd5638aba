// k-group operation delays on a simulated mesh (CoMesh Fig. 7 and Fig. 9).
//
// Setup, after the paper's Table 3 as far as our simulator goes: a grid of
// 250 devices 10 m apart of which 100 (drawn by seed) are smart and host
// k-groups, the rest only relay; every hop takes 1 ms (the paper's "1 time
// unit" per hop, so delays below read as hop-latency units), no jitter, no
// loss, and no bandwidth model (the paper scales bandwidth by neighbour
// count); ten device groups whose members are chosen by LSH-random mix (m =
// 2, l = 2, r = 4) around a random device position, successors likewise;
// epochs of 3 s (the paper's 200 units would be shorter than our default
// 600 ms lease); failures are announced to every node 200-500 ms after a
// crash (membership is told, not run: Medley's detection time is
// medley_bench's subject).
//
// Per run (22 virtual seconds): a client per group submits to the group's
// serving leader every 50 ms; each group's leader is crashed once at a
// random time and restarts 2 s later; under churn, that fraction of the
// smart nodes also crash and recover over and over (up 1-5 s, down 1-5 s).
// Measured:
//   quorum      submit at the leader -> committed at f + 1 members
//   election    failure announced -> a new leader of the same group won its
//               term (Bully round plus the promise round)
//   transfer    a successor group's leader elected -> the sealed state
//               pulled from the old group and committed at a quorum of the
//               new one (CoMesh 3.4 steps 3-4), epoch changes and
//               re-selections alike
//   changeover  the old group's epoch end -> the successor serving with the
//               inherited state (steps 1-4; epoch changes only)
// Counters give the median, mean and P90 (as the paper's Table 4) in ms,
// with sample counts and the fraction of started operations that finished.
// BM_KgroupDelayUnderLoss repeats k = 5 with 5 % loss per hop beside 0 %,
// each without and with hop-by-hop ARQ (hop_arq:1, routing/hop_arq.h with
// the agent's default options), and reports the hop datagrams (ARQ
// retransmissions and acks included) and their bytes per node and second.
// KGROUP_BENCH_SEEDS sets the seeds per point (default 5).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/log.h"
#include "kgroup/lsh_selection.h"
#include "sim/kgroup_world.h"

namespace {

using mesh::core::Duration;
using mesh::core::TimePoint;
using mesh::kgroup::GroupReplica;
using mesh::sim::KgroupWorld;
using std::chrono::milliseconds;

constexpr int kDevices = 250;
constexpr size_t kSmart = 100;
constexpr size_t kGroups = 10;
constexpr Duration kWarmup = std::chrono::seconds(2);
constexpr Duration kMeasure = std::chrono::seconds(20);
constexpr Duration kSubmitEvery = milliseconds(50);

struct Samples {
  std::vector<double> quorum, election, transfer, changeover;
  uint64_t submitted = 0;
  uint64_t elections_started = 0;
  uint64_t transfers_started = 0;
  // Hop datagrams on the air and their bytes, and node-seconds they were sent in.
  uint64_t hop_datagrams = 0;
  uint64_t hop_bytes = 0;
  double node_seconds = 0;
};

double ms(Duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void run(size_t k, int churn_pct, double hop_loss, uint64_t seed, Samples& samples, bool hop_arq = false) {
  const mesh::sim::Topology topology = mesh::sim::grid_for(kDevices);
  mesh::core::Rng rng(mesh::sim::mix_seed(seed, 0xde1a));
  mesh::kgroup::LshParams lsh;
  lsh.seed = 1;
  std::map<std::string, mesh::kgroup::Location> centres;
  std::vector<mesh::kgroup::GroupTarget> targets;
  for (size_t g = 0; g < kGroups; ++g) {
    targets.push_back({mesh::kgroup::TargetKind::device, std::string("d").append(std::to_string(g))});
    centres[targets.back().to_string()] = topology.positions[rng.below(topology.size())];
  }
  auto lsh_members = [&centres, &lsh, k](const std::vector<mesh::kgroup::SmartNode>& live,
                                         const mesh::kgroup::GroupTarget& target, uint64_t epoch) {
    std::vector<mesh::core::NodeId> out;
    const auto selected = mesh::kgroup::lsh_select(live, target, epoch, k, centres.at(target.to_string()), {}, lsh);
    for (const auto& m : selected.members) out.push_back(m.id);
    return out;
  };

  mesh::sim::KgroupWorldOptions options;
  options.topology = topology;
  options.smart = kSmart;
  options.k = k;
  options.hop_delay = milliseconds(1);
  options.hop_jitter = Duration::zero();
  options.hop_loss = hop_loss;
  options.epoch_length = std::chrono::seconds(3);
  options.select = lsh_members;
  if (hop_arq) options.hop_arq = mesh::routing::HopArq::Options{};
  KgroupWorld world(seed, options);
  mesh::sim::Simulator& sim = world.simulator();
  for (const auto& target : targets) {
    mesh::kgroup::GroupConfig config;
    config.target = target;
    config.members = lsh_members(world.smart_nodes(), target, 0);
    world.add_group(config);
  }

  // Elections waiting for a new leader (group key -> announced, old term),
  // successor leaders waiting for their state (group key -> elected).
  struct Pending {
    TimePoint since;
    uint64_t term;
  };
  std::map<std::string, Pending> elections;
  std::map<std::string, TimePoint> transfers;
  world.set_on_elected([&](size_t, GroupReplica& replica, uint64_t term) {
    const std::string key = mesh::sim::group_key(replica.ref());
    if (const auto it = elections.find(key); it != elections.end() && term > it->second.term) {
      samples.election.push_back(ms(sim.now() - it->second.since));
      elections.erase(it);
    }
    if (!replica.inherited() && transfers.emplace(key, sim.now()).second) ++samples.transfers_started;
  });
  world.set_on_restored([&](size_t node, const std::string& target) {
    GroupReplica* replica = world.host(node)->latest(target);
    if (replica == nullptr || replica->role() != mesh::kgroup::Role::leader) return;
    const auto it = transfers.find(mesh::sim::group_key(replica->ref()));
    if (it == transfers.end()) return;
    samples.transfer.push_back(ms(sim.now() - it->second));
    const auto& source = replica->config().source;
    if (source && source->epoch < replica->ref().epoch() && replica->ref().generation() == 0) {
      const TimePoint end = world.schedule()->epoch_end(replica->config().target, source->epoch);
      samples.changeover.push_back(ms(sim.now() - end));
    }
    transfers.erase(it);
  });

  const TimePoint stop = TimePoint{} + kWarmup + kMeasure;
  // Crash node i; announce it failed after detection; restart after `down`.
  // Each group it was serving as leader starts an election measurement.
  auto crash = [&](size_t i, Duration down) {
    if (!world.up(i)) return;
    std::vector<std::pair<std::string, uint64_t>> led;  // group key, term
    for (GroupReplica* r : world.host(i)->replicas()) {
      if (r->serving()) led.emplace_back(mesh::sim::group_key(r->ref()), r->leader_term());
    }
    world.crash(i);
    sim.after(milliseconds(200 + rng.below(300)), [&, i, led] {
      if (world.up(i)) return;
      world.announce_failed(i);
      if (sim.now() >= stop) return;
      for (const auto& [key, term] : led) {
        elections[key] = {sim.now(), term};
        ++samples.elections_started;
      }
    });
    sim.after(down, [&world, i] {
      if (world.up(i)) return;
      world.boot(i);
      world.announce_alive(i);
    });
  };
  world.boot_all();
  // Clients, one per group.
  std::function<void(std::string)> client = [&](const std::string& target) {
    if (sim.now() >= stop) return;
    if (GroupReplica* leader = world.serving_leader(target); leader != nullptr && sim.now() >= TimePoint{} + kWarmup) {
      ++samples.submitted;
      const TimePoint sent = sim.now();
      world.submit(*leader, target, [&samples, &sim, sent](const mesh::kgroup::SubmitResult& result) {
        if (result.status == mesh::kgroup::SubmitStatus::committed) samples.quorum.push_back(ms(sim.now() - sent));
      });
    }
    sim.after(kSubmitEvery, [&client, target] { client(target); });
  };
  for (const auto& target : targets) {
    sim.after(milliseconds(rng.below(50)), [&client, name = target.to_string()] { client(name); });
  }
  // One leader crash per group at a random time of the measurement.
  for (const auto& target : targets) {
    const Duration at = kWarmup + milliseconds(rng.below(static_cast<uint64_t>(ms(kMeasure)) - 3000));
    sim.after(at, [&, name = target.to_string()] {
      if (GroupReplica* leader = world.serving_leader(name))
        crash(world.index_of(leader->leader()), std::chrono::seconds(2));
    });
  }
  // Churn: a fixed share of the smart nodes fail and recover over and over.
  std::vector<size_t> smart;
  for (size_t i = 0; i < world.size(); ++i) {
    if (world.smart(i)) smart.push_back(i);
  }
  std::shuffle(smart.begin(), smart.end(), rng);
  smart.resize(smart.size() * static_cast<size_t>(churn_pct) / 100);
  std::function<void(size_t)> churn = [&](size_t i) {
    if (sim.now() >= stop) return;
    const Duration down = milliseconds(1000 + rng.below(4000));
    crash(i, down);
    sim.after(down + milliseconds(1000 + rng.below(4000)), [&churn, i] { churn(i); });
  };
  for (size_t i : smart) {
    sim.after(kWarmup + milliseconds(rng.below(5000)), [&churn, i] { churn(i); });
  }

  const Duration run_length = kWarmup + kMeasure + std::chrono::seconds(3);
  world.run_for(run_length);
  const auto& traffic = world.routing().stats();
  samples.hop_datagrams += traffic.hop_transmissions + traffic.hop_acks;
  samples.hop_bytes += traffic.hop_bytes;
  samples.node_seconds += static_cast<double>(world.size()) * ms(run_length) / 1000.0;
  if (!world.checker().failures().empty()) {
    mesh::core::log("kgroup").error("bench run broke an invariant: {}", world.checker().failures().front());
  }
}

struct Stats {
  double p50 = 0, mean = 0, p90 = 0;
};

Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.p50 = v[v.size() / 2];
  s.p90 = v[std::min(v.size() - 1, v.size() * 9 / 10)];
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  return s;
}

void report(benchmark::State& state, const Samples& samples) {
  auto put = [&](const std::string& name, const std::vector<double>& v) {
    const Stats s = stats(v);
    state.counters[name + "_p50_ms"] = s.p50;
    state.counters[name + "_mean_ms"] = s.mean;
    state.counters[name + "_p90_ms"] = s.p90;
    state.counters[name + "_n"] = static_cast<double>(v.size());
  };
  put("quorum", samples.quorum);
  put("election", samples.election);
  put("transfer", samples.transfer);
  put("changeover", samples.changeover);
  auto ratio = [](size_t done, uint64_t started) {
    return started == 0 ? 0.0 : static_cast<double>(done) / static_cast<double>(started);
  };
  state.counters["quorum_done"] = ratio(samples.quorum.size(), samples.submitted);
  state.counters["election_done"] = ratio(samples.election.size(), samples.elections_started);
  state.counters["transfer_done"] = ratio(samples.transfer.size(), samples.transfers_started);
  const double node_seconds = std::max(samples.node_seconds, 1e-9);
  state.counters["hop_datagrams_per_node_s"] = static_cast<double>(samples.hop_datagrams) / node_seconds;
  state.counters["hop_bytes_per_node_s"] = static_cast<double>(samples.hop_bytes) / node_seconds;
}

uint64_t seeds() {
  const char* env = std::getenv("KGROUP_BENCH_SEEDS");
  return env != nullptr ? std::max<uint64_t>(1, std::strtoull(env, nullptr, 10)) : 5;
}

void BM_KgroupDelayVsK(benchmark::State& state) {
  mesh::core::set_log_level("error", "kgroup");
  const auto k = static_cast<size_t>(state.range(0));
  Samples samples;
  for (auto _ : state) {
    for (uint64_t seed = 1; seed <= seeds(); ++seed) run(k, 0, 0.0, seed, samples);
  }
  state.counters["k"] = static_cast<double>(k);
  state.counters["churn_pct"] = 0;
  report(state, samples);
}
BENCHMARK(BM_KgroupDelayVsK)->DenseRange(3, 11, 2)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_KgroupDelayUnderChurn(benchmark::State& state) {
  mesh::core::set_log_level("error", "kgroup");
  const auto churn = static_cast<int>(state.range(0));
  Samples samples;
  for (auto _ : state) {
    for (uint64_t seed = 1; seed <= seeds(); ++seed) run(5, churn, 0.0, seed, samples);
  }
  state.counters["k"] = 5;
  state.counters["churn_pct"] = churn;
  report(state, samples);
}
BENCHMARK(BM_KgroupDelayUnderChurn)->DenseRange(0, 60, 10)->Iterations(1)->Unit(benchmark::kMillisecond);

// Loss per hop (k = 5, no churn beyond the leader crashes): 0 % is the
// loss-free baseline of the same run. Every request of the group (appends,
// claims, Bully rounds) crosses several hops, each dropping it independently.
void BM_KgroupDelayUnderLoss(benchmark::State& state) {
  mesh::core::set_log_level("error", "kgroup");
  const auto loss_pct = static_cast<int>(state.range(0));
  const bool hop_arq = state.range(1) != 0;
  Samples samples;
  for (auto _ : state) {
    for (uint64_t seed = 1; seed <= seeds(); ++seed) run(5, 0, loss_pct / 100.0, seed, samples, hop_arq);
  }
  state.counters["k"] = 5;
  state.counters["churn_pct"] = 0;
  state.counters["loss_pct"] = loss_pct;
  state.counters["hop_arq"] = hop_arq ? 1 : 0;
  report(state, samples);
}
BENCHMARK(BM_KgroupDelayUnderLoss)
    ->ArgNames({"loss_pct", "hop_arq"})
    ->ArgsProduct({{0, 5}, {0, 1}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
