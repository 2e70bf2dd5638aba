// Camera against the paper's analysis (camera.md §4.3, Table 5, Figs 5.1 and
// 5.3), on virtual time with fixed link delays: a random topology, 5 % loss
// per hop unless the name says otherwise. Each benchmark runs whole
// simulations and reports ratios as counters:
//   LoneRequester     messages per entry / 2(N-1) (paper: 1) and client delay
//                     in RTTs to the farthest member (paper: 1 RTT), with
//                     retransmissions after the paper's fixed T (rto:0) or
//                     after each member's measured RTO (rto:1, the
//                     messenger's default); the requester makes
//                     kWarmEntries entries first, so its messenger has
//                     measured the members, then kMeasuredEntries whose mean
//                     is reported (the first, cold entry is reported as
//                     first_entry_client_delay_rtts); hop_arq:1 adds
//                     hop-by-hop ARQ on every unicast hop (routing/hop_arq.h,
//                     the agent's default options) and reports the hop
//                     datagrams (retransmissions and acks included) and bytes
//                     per node and entry;
//   SyncDelay         release-to-grant delay of a waiting requester in RTTs
//                     between the two (paper: 0.5 RTT);
//   Concurrent        c requesters at once, each holding for one time unit:
//                     mean wait / c in time units (the normalized wait time
//                     of Fig. 5.1) and messages per entry.
//   LongHold          what the holder lease (CameraOptions::hold_lease,
//                     camera.h "Holder lease") costs: one node holds for
//                     60 s, once with the lease and once without it, on the
//                     same mesh and seed; the end-to-end messages of the
//                     first minus the second, per second of hold, whole mesh
//                     and per node (probes and their answers).
// --benchmark_format=csv gives the CSV (bench/camera_plot.py draws it); the
// wall time columns are the cost of simulating, not a property of Camera.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include <benchmark/benchmark.h>

#include "core/log.h"
#include "tests/mutex/camera_world.h"

namespace mesh::mutex::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kHopDelay = milliseconds(5);
constexpr auto kCriticalSection = milliseconds(100);

constexpr size_t kWarmEntries = 8;
constexpr size_t kMeasuredEntries = 8;

enum class Rto { fixed, adaptive };

WorldOptions options(size_t n, double loss, Rto rto = Rto::fixed, bool hop_arq = false) {
  core::log_to_null();
  WorldOptions o;
  o.nodes = n;
  o.topology = "random";
  o.link.delay = kHopDelay;
  o.link.loss = loss;
  // A fixed retransmission timeout T, as camera.md §4.3 models drops (T =
  // 250 ms, twice the round trip of the longest paths here): with the
  // messenger's default doubling backoff the slowest of 255 OKs at 5 % loss
  // per hop dominates every wait (client delay about 140 RTTs). Adaptive:
  // the same schedule, but every wait is the member's measured RTO (T until
  // measured, and never more than T).
  o.messenger.retry.first_timeout = milliseconds(250);
  o.messenger.retry.adaptive = rto == Rto::adaptive;
  o.messenger.retry.backoff = 1.0;
  o.messenger.retry.max_interval = milliseconds(250);
  o.camera.retry = o.messenger.retry;
  o.camera.network_size.floor = n;
  if (hop_arq) o.hop_arq = routing::HopArq::Options{};
  return o;
}

void full_lists(CameraWorld& world) {
  std::vector<size_t> all(world.size());
  std::iota(all.begin(), all.end(), size_t{0});
  for (size_t i = 0; i < world.size(); ++i) world.set_list(i, all);
}

// Round trip to the farthest member: what a requester asking everyone waits.
double rtt_to_farthest_ms(CameraWorld& world, size_t from) {
  uint32_t hops = 0;
  for (size_t j = 0; j < world.size(); ++j) {
    if (j != from) hops = std::max(hops, world.routing().hops(world.id(from), world.id(j)).value_or(0));
  }
  return 2.0 * hops * core::to_millis(kHopDelay);
}

// Google Benchmark's CSV has one header for all rows: every benchmark sets
// every counter, the ones it does not measure to 0.
void set_counters(benchmark::State& state, double client_delay, double sync_delay, double normalized_wait,
                  double msgs_ratio, double e2e_ratio, double first_entry_delay = 0, double hop_datagrams_per_node = 0,
                  double hop_bytes_per_node = 0, double lease_msgs_per_s = 0, double lease_msgs_per_node_s = 0) {
  state.counters["client_delay_rtts"] = client_delay;
  state.counters["first_entry_client_delay_rtts"] = first_entry_delay;
  state.counters["sync_delay_rtts"] = sync_delay;
  state.counters["normalized_wait_cs_units"] = normalized_wait;
  state.counters["msgs_per_entry_over_2(N-1)"] = msgs_ratio;
  state.counters["e2e_msgs_per_entry_over_2(N-1)"] = e2e_ratio;
  state.counters["hop_datagrams_per_node_entry"] = hop_datagrams_per_node;
  state.counters["hop_bytes_per_node_entry"] = hop_bytes_per_node;
  state.counters["lease_msgs_per_hold_s"] = lease_msgs_per_s;
  state.counters["lease_msgs_per_node_hold_s"] = lease_msgs_per_node_s;
}

uint64_t camera_messages(CameraWorld& world) {
  uint64_t total = 0;
  for (size_t i = 0; i < world.size(); ++i) {
    if (!world.up(i)) continue;
    for (const auto& row : world.metrics(i).counters()) {
      if (row.name != "mutex_messages_sent_total") continue;
      for (const auto& [k, v] : row.labels) {
        if (k == "type" && (v == "request" || v == "ok")) total += row.value;
      }
    }
  }
  return total;
}

void LoneRequester(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const double loss = static_cast<double>(state.range(1)) / 100.0;
  const Rto rto = state.range(2) != 0 ? Rto::adaptive : Rto::fixed;
  const bool hop_arq = state.range(3) != 0;
  double delay_rtts = 0;
  double first_rtts = 0;
  double msgs_ratio = 0;
  double e2e_ratio = 0;
  double hop_datagrams = 0;
  double hop_bytes = 0;
  int runs = 0;
  for (auto _ : state) {
    CameraWorld world(static_cast<uint64_t>(runs) + 1, options(n, loss, rto, hop_arq));
    full_lists(world);
    const size_t who = static_cast<size_t>(world.simulator().rng().below(n));
    const sim::IdealRouting::Stats before = world.routing().stats();
    const uint64_t sent_before = before.sent;
    // One entry at a time, each long after the previous one's release.
    constexpr size_t kEntries = kWarmEntries + kMeasuredEntries;
    for (size_t e = 0; e < kEntries; ++e) {
      world.run_section({who, "pump", kCriticalSection, Camera::kNoTimeout});
      world.simulator().run_until(world.now() + seconds(60));
    }
    if (world.waits_ms().size() != kEntries) {
      state.SkipWithError("lone request not granted");
      return;
    }
    const double rtt_ms = rtt_to_farthest_ms(world, who);
    const auto& waits = world.waits_ms();
    delay_rtts += std::accumulate(waits.begin() + static_cast<std::ptrdiff_t>(kWarmEntries), waits.end(), 0.0) /
                  static_cast<double>(kMeasuredEntries) / rtt_ms;
    first_rtts += world.waits_ms().front() / rtt_ms;
    // Request/OK messages of the protocol, and every end-to-end message
    // (retransmissions and the flooded RELEASE included), per entry.
    const double per_entry = static_cast<double>(kEntries) * 2.0 * static_cast<double>(n - 1);
    msgs_ratio += static_cast<double>(camera_messages(world)) / per_entry;
    e2e_ratio += static_cast<double>(world.routing().stats().sent - sent_before) / per_entry;
    const sim::IdealRouting::Stats& after = world.routing().stats();
    const double node_entries = static_cast<double>(kEntries * n);
    hop_datagrams +=
        static_cast<double>(after.hop_transmissions + after.hop_acks - before.hop_transmissions - before.hop_acks) /
        node_entries;
    hop_bytes += static_cast<double>(after.hop_bytes - before.hop_bytes) / node_entries;
    ++runs;
  }
  set_counters(state, delay_rtts / runs, 0, 0, msgs_ratio / runs, e2e_ratio / runs, first_rtts / runs,
               hop_datagrams / runs, hop_bytes / runs);
}

void SyncDelay(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const double loss = static_cast<double>(state.range(1)) / 100.0;
  double sync_rtts = 0;
  int runs = 0;
  for (auto _ : state) {
    CameraWorld world(static_cast<uint64_t>(runs) + 1, options(n, loss));
    full_lists(world);
    auto& rng = world.simulator().rng();
    const size_t a = static_cast<size_t>(rng.below(n));
    size_t b = static_cast<size_t>(rng.below(n - 1));
    if (b >= a) ++b;
    core::TimePoint released{};
    world.run_section({a, "pump", seconds(2), Camera::kNoTimeout}, [&](bool) { released = world.now(); });
    // b asks well after a holds, so it has reached a long before a leaves.
    world.simulator().after(milliseconds(500), [&] { world.run_section({b, "pump", kCriticalSection}); });
    world.simulator().run_until(core::TimePoint(seconds(120)));
    if (world.waits_ms().size() != 2) {
      state.SkipWithError("requests not granted");
      return;
    }
    const double granted_ms = 500.0 + world.waits_ms()[1];
    const double sync_ms = granted_ms - core::to_millis(released.time_since_epoch());
    const double rtt_ms = 2.0 * world.routing().hops(world.id(a), world.id(b)).value_or(1) * core::to_millis(kHopDelay);
    sync_rtts += sync_ms / rtt_ms;
    ++runs;
  }
  set_counters(state, 0, sync_rtts / runs, 0, 0, 0);
}

void Concurrent(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const size_t c = static_cast<size_t>(state.range(1));
  double normalized = 0;
  double msgs_ratio = 0;
  int runs = 0;
  for (auto _ : state) {
    CameraWorld world(static_cast<uint64_t>(runs) + 1, options(n, 0.05));
    full_lists(world);
    std::vector<size_t> nodes(n);
    std::iota(nodes.begin(), nodes.end(), size_t{0});
    std::shuffle(nodes.begin(), nodes.end(), world.simulator().rng());
    for (size_t k = 0; k < c; ++k) world.run_section({nodes[k], "pump", kCriticalSection, Camera::kNoTimeout});
    world.simulator().run_until(core::TimePoint(seconds(600)));
    if (world.waits_ms().size() != c || !world.violations().empty()) {
      state.SkipWithError("not every request granted, or a safety violation");
      return;
    }
    const double mean = std::accumulate(world.waits_ms().begin(), world.waits_ms().end(), 0.0) / static_cast<double>(c);
    normalized += mean / static_cast<double>(c) / core::to_millis(kCriticalSection);
    msgs_ratio +=
        static_cast<double>(camera_messages(world)) / static_cast<double>(c) / (2.0 * static_cast<double>(n - 1));
    ++runs;
  }
  set_counters(state, 0, 0, normalized / runs, msgs_ratio / runs, 0);
}

// End-to-end messages sent while one node holds "pump" for kLongHold.
constexpr auto kLongHold = seconds(60);
uint64_t messages_during_long_hold(size_t n, double loss, uint64_t seed, bool lease) {
  WorldOptions o = options(n, loss);
  if (!lease) o.camera.hold_lease = core::Duration::zero();
  CameraWorld world(seed, o);
  full_lists(world);
  const size_t who = static_cast<size_t>(world.simulator().rng().below(n));
  uint64_t at_grant = 0;
  uint64_t at_release = 0;
  bool granted = false;
  world.run_section({who, "pump", kLongHold, Camera::kNoTimeout}, [&](bool ok) {
    granted = ok;
    at_release = world.routing().stats().sent;
  });
  // The grant comes within a second; the hold is measured from then.
  world.simulator().run_until(world.now() + seconds(1));
  at_grant = world.routing().stats().sent;
  world.simulator().run_until(world.now() + kLongHold + seconds(5));
  if (!granted || !world.violations().empty()) return UINT64_MAX;
  return at_release - at_grant;
}

void LongHold(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const double loss = static_cast<double>(state.range(1)) / 100.0;
  double per_s = 0;
  int runs = 0;
  for (auto _ : state) {
    const uint64_t seed = static_cast<uint64_t>(runs) + 1;
    const uint64_t with_lease = messages_during_long_hold(n, loss, seed, true);
    const uint64_t without = messages_during_long_hold(n, loss, seed, false);
    if (with_lease == UINT64_MAX || without == UINT64_MAX) {
      state.SkipWithError("the long hold was not granted, or a safety violation");
      return;
    }
    per_s += (static_cast<double>(with_lease) - static_cast<double>(without)) / core::to_seconds(kLongHold);
    ++runs;
  }
  set_counters(state, 0, 0, 0, 0, 0, 0, 0, 0, per_s / runs, per_s / runs / static_cast<double>(n));
}

BENCHMARK(LoneRequester)
    ->ArgNames({"N", "loss_pct", "rto", "hop_arq"})
    ->Args({16, 0, 0, 0})
    ->Args({64, 0, 0, 0})
    ->Args({256, 0, 0, 0})
    ->Args({256, 5, 0, 0})
    ->Args({256, 0, 1, 0})
    ->Args({256, 5, 1, 0})
    ->Args({256, 5, 1, 1})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(SyncDelay)
    ->ArgNames({"N", "loss_pct"})
    ->Args({64, 0})
    ->Args({256, 5})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
// Fig. 5.1: N = 256 (Table 5), c = 1-64; Fig. 5.3: c = 10 (Table 5), N = 16-256.
// ctest runs the whole binary, so the points are few (c = 32 alone is 20 s).
BENCHMARK(Concurrent)
    ->ArgNames({"N", "c"})
    ->Args({256, 1})
    ->Args({256, 4})
    ->Args({256, 8})
    ->Args({256, 16})
    ->Args({256, 64})
    ->Args({16, 10})
    ->Args({32, 10})
    ->Args({64, 10})
    ->Args({128, 10})
    ->Args({256, 10})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(LongHold)
    ->ArgNames({"N", "loss_pct"})
    ->Args({16, 0})
    ->Args({64, 0})
    ->Args({256, 0})
    ->Args({256, 5})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mesh::mutex::testing

BENCHMARK_MAIN();
