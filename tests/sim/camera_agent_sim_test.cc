// Camera inside whole agents on virtual time (MeshSim: OLSR, Medley and
// Camera per node, as meshagent runs them). Each seed builds a chain or a
// random mesh of 5-10 agents, lets membership settle, restarts one or more
// nodes (kill -9 + start, storage kept) and, before Medley has told every
// node that they are back, has several nodes (the restarted ones included)
// lock the same resource. The oracle: no two nodes hold it at one virtual
// instant, every grant's fencing token is above every earlier grant's, and
// every acquire is granted once the churn is over. A failing seed is printed;
// CAMERA_AGENT_SEED=<seed> replays it with mutex debug logs,
// CAMERA_AGENT_SEED_SCALE=<k> runs k times the seeds and CAMERA_AGENT_ALL=1
// goes on past a failing seed (soaks).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/log.h"
#include "core/rng.h"
#include "sim/mesh_sim.h"
#include "tests/support/quiet_logs.h"
#include "tests/support/seed_range.h"

namespace mesh::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Plan {
  std::string topology = "line";  // "line" (the testbed's chain) or "random"
  size_t min_nodes = 5;
  size_t max_nodes = 10;
  int restarted = 1;  // nodes killed and started again
  double loss = 0.0;
  bool warm_up = true;  // some grants before the restart, so tokens are not all 1
  // Lock while the mesh boots (lists still partial) instead of after a restart.
  bool lock_at_boot = false;
  // [mutex] expected_nodes: N.upper's floor (0: the estimator alone).
  bool expected_nodes = false;
  // Every node crashes at the same instant and all restart (a power cut)
  // instead of `restarted` nodes at their own moments.
  bool power_cut = false;
  // Disks that take 2-40 ms per commit, now and then 500 ms more, so a cut
  // loses whatever was not yet durable (sim/sim_disk.h).
  bool slow_disks = false;
};

struct Outcome {
  std::vector<std::string> violations;
  std::vector<std::string> unfinished;
  uint64_t grants = 0;
  uint64_t slow_grants = 0;
};

// The oracle and the workload, over node indices and their incarnations.
class LockWorkload {
 public:
  explicit LockWorkload(MeshSim& sim) : sim_(sim) {}

  // `sections` critical sections one after the other at `node`, each held
  // for `hold`, with `think` between them.
  void run(size_t node, int sections, core::Duration hold, core::Duration think) {
    if (sections <= 0) return;
    agent::Node* agent = sim_.node(node);
    if (agent == nullptr) return;
    const uint64_t id = next_++;
    open_[id] = node;
    agent->camera().acquire(
        kResource, mutex::Camera::kNoTimeout,
        [this, id, node, sections, hold, think, agent](const mutex::AcquireResult& result) {
          if (!result) {
            violations_.push_back(fmt::format("acquire at n{} failed: {}", node, mutex::to_string(result.error())));
            open_.erase(id);
            return;
          }
          // Whoever asked (meshctl, a routine leader's device commands)
          // sees the grant only once the node's storage changes before it,
          // the token's reservation among them, are durable.
          agent->after_durable([this, id, node, sections, hold, think, agent, grant = *result] {
            on_grant(node, grant);
            sim_.simulator().after(hold, [this, id, node, sections, hold, think, agent] {
              // A crash meanwhile destroyed that agent.
              if (sim_.node(node) != agent) return;
              holder_.reset();
              open_.erase(id);
              agent->camera().release(kResource);
              sim_.simulator().after(think,
                                     [this, node, sections, hold, think] { run(node, sections - 1, hold, think); });
            });
          });
        });
  }

  // Forgets the sections of a node that crashes (its grant dies with it).
  void crashed(size_t node) {
    if (holder_ && holder_->node == node) holder_.reset();
    std::erase_if(open_, [&](const auto& e) { return e.second == node; });
  }

  const std::vector<std::string>& violations() const { return violations_; }
  uint64_t grants() const { return grants_; }
  uint64_t slow_grants() const { return slow_grants_; }
  std::vector<std::string> unfinished() const {
    std::vector<std::string> out;
    for (const auto& [id, node] : open_) {
      std::string s = fmt::format("n{}", node);
      if (agent::Node* agent = sim_.node(node)) {
        for (const auto& st : agent->camera().status()) {
          if (st.resource != kResource) continue;
          s += fmt::format(" phase={} awaiting_oks={} slow={} deferred={} members={}", static_cast<int>(st.phase),
                           st.awaiting_oks, st.slow_path, st.deferred, agent->medley().live_members().size());
        }
      }
      out.push_back(s);
    }
    return out;
  }

  static constexpr const char* kResource = "pump";

 private:
  struct Holder {
    size_t node;
    uint64_t token;
    core::TimePoint since;
  };

  void on_grant(size_t node, const mutex::Grant& grant) {
    ++grants_;
    if (grant.slow_path) ++slow_grants_;
    const double now_ms = core::to_millis(sim_.simulator().now().time_since_epoch());
    if (holder_) {
      violations_.push_back(fmt::format("t={}ms n{} granted token {} while n{} holds token {} since t={}ms", now_ms,
                                        node, grant.fencing_token, holder_->node, holder_->token,
                                        core::to_millis(holder_->since.time_since_epoch())));
    }
    if (grant.fencing_token <= max_token_) {
      violations_.push_back(fmt::format("t={}ms n{} granted token {}, not above the earlier grant's {}", now_ms, node,
                                        grant.fencing_token, max_token_));
    }
    max_token_ = std::max(max_token_, grant.fencing_token);
    holder_ = Holder{node, grant.fencing_token, sim_.simulator().now()};
  }

  MeshSim& sim_;
  std::optional<Holder> holder_;
  uint64_t max_token_ = 0;
  std::map<uint64_t, size_t> open_;
  uint64_t next_ = 1;
  std::vector<std::string> violations_;
  uint64_t grants_ = 0;
  uint64_t slow_grants_ = 0;
};

Outcome run(const Plan& plan, uint64_t seed) {
  core::Rng rng(seed * 104729 + 7);
  const auto n =
      static_cast<size_t>(rng.between(static_cast<int64_t>(plan.min_nodes), static_cast<int64_t>(plan.max_nodes)));
  const std::string toml = fmt::format(
      "[topology]\nkind = \"{}\"\nnodes = {}\nseed = {}\n[link]\ndelay_ms = {}\njitter_ms = {}\nloss = {}\n"
      "[run]\nduration_s = 600\n",
      plan.topology, n, seed, rng.between(1, 5), rng.between(0, 3), plan.loss);
  MeshSim::Options options;
  options.start_spread = seconds(1);
  if (plan.expected_nodes) {
    options.configure = [n](agent::NodeConfig& config) { config.mutex.network_size.floor = n; };
  }
  if (plan.slow_disks) {
    options.disk = SimDisk::slow();
  }
  MeshSim sim(parse_scenario(toml, "camera_agent.toml"), seed, options);
  LockWorkload work(sim);
  auto hold = [&rng] { return milliseconds(rng.between(20, 200)); };
  auto think = [&rng] { return milliseconds(rng.between(0, 100)); };

  if (plan.lock_at_boot) {
    std::set<size_t> requesters;
    const size_t count = static_cast<size_t>(rng.between(2, static_cast<int64_t>(std::min<size_t>(n, 5))));
    while (requesters.size() < count) requesters.insert(rng.below(n));
    for (size_t r : requesters) {
      const core::TimePoint at(milliseconds(rng.between(1000, 8000)));
      const int sections = static_cast<int>(rng.between(1, 3));
      const core::Duration h = hold();
      const core::Duration th = think();
      sim.simulator().at(at, [&work, r, sections, h, th] { work.run(r, sections, h, th); });
    }
    sim.run_until(core::TimePoint(seconds(150)));
    Outcome out;
    out.violations = work.violations();
    out.unfinished = work.unfinished();
    out.grants = work.grants();
    out.slow_grants = work.slow_grants();
    return out;
  }

  // Membership settles: every node lists all the others.
  core::TimePoint t(seconds(25));
  sim.run_until(t);
  if (plan.warm_up) {
    for (size_t k = 0, count = static_cast<size_t>(rng.between(1, 3)); k < count; ++k) {
      work.run(rng.below(n), 1, hold(), think());
    }
    t += seconds(5);
    sim.run_until(t);
  }

  // kill -9 and start again, each restart at its own moment: some before
  // the others noticed the crash, some after they declared it failed.
  std::vector<size_t> victims;
  for (int k = 0; k < plan.restarted; ++k) {
    const size_t v = rng.below(n);
    if (std::find(victims.begin(), victims.end(), v) == victims.end()) victims.push_back(v);
  }
  if (plan.power_cut) {
    victims.clear();
    for (size_t v = 0; v < n; ++v) victims.push_back(v);
  }
  const core::TimePoint power_back = plan.power_cut ? t + milliseconds(rng.between(500, 5000)) : t;
  core::TimePoint last_restart = t;
  for (size_t v : victims) {
    const core::TimePoint crash_at = plan.power_cut ? t : t + milliseconds(rng.between(0, 500));
    const core::TimePoint restart_at =
        plan.power_cut ? power_back + milliseconds(rng.between(0, 1000))
                       : crash_at + milliseconds(rng.chance(0.5) ? rng.between(200, 3000) : rng.between(4000, 15000));
    sim.simulator().at(crash_at, [&sim, &work, v] {
      work.crashed(v);
      sim.crash(v);
    });
    sim.simulator().at(restart_at, [&sim, v] { sim.restart(v); });
    last_restart = std::max(last_restart, restart_at);
  }

  // The lock step: right after the (last) restart, several nodes including
  // every restarted one lock the resource.
  std::set<size_t> requesters(victims.begin(), victims.end());
  const size_t extra = static_cast<size_t>(rng.between(1, static_cast<int64_t>(std::min<size_t>(n - 1, 4))));
  while (requesters.size() < std::min(n, victims.size() + extra)) requesters.insert(rng.below(n));
  for (size_t r : requesters) {
    const core::TimePoint at = last_restart + milliseconds(rng.between(0, 1500));
    const int sections = static_cast<int>(rng.between(1, 3));
    const core::Duration h = hold();
    const core::Duration th = think();
    sim.simulator().at(at, [&work, r, sections, h, th] { work.run(r, sections, h, th); });
  }

  sim.run_until(last_restart + seconds(120));
  Outcome out;
  out.violations = work.violations();
  out.unfinished = work.unfinished();
  out.grants = work.grants();
  out.slow_grants = work.slow_grants();
  return out;
}

struct Totals {
  uint64_t seeds = 0;
  uint64_t grants = 0;
  uint64_t slow_grants = 0;
};

void sweep(const Plan& plan, uint64_t first_seed, int seeds, Totals& totals) {
  const test_support::SeedRange range =
      test_support::seed_range("CAMERA_AGENT", first_seed, static_cast<uint64_t>(seeds));
  if (range.replaying) {
    core::set_log_level("warn");
    core::set_log_level("debug", "mutex");
  }
  for (uint64_t seed = range.first; seed < range.end(); ++seed) {
    const Outcome o = run(plan, seed);
    ++totals.seeds;
    totals.grants += o.grants;
    totals.slow_grants += o.slow_grants;
    if (o.violations.empty() && o.unfinished.empty()) continue;
    std::string msg = test_support::failing_seed("CAMERA_AGENT", seed);
    for (const auto& v : o.violations) msg += "  safety: " + v + "\n";
    for (const auto& u : o.unfinished) msg += "  not granted: " + u + "\n";
    ADD_FAILURE() << msg;
    if (!std::getenv("CAMERA_AGENT_ALL")) return;
  }
  std::printf("seeds=%llu grants=%llu slow_path_grants=%llu\n", static_cast<unsigned long long>(range.count),
              static_cast<unsigned long long>(totals.grants), static_cast<unsigned long long>(totals.slow_grants));
}

TEST(CameraAgentSim, ChainRestartThenEveryoneLocks) {
  Plan plan;
  plan.topology = "line";
  plan.min_nodes = 5;
  plan.max_nodes = 7;
  Totals t;
  sweep(plan, 1, 40, t);
  // Every seed has at least two requesters.
  EXPECT_GE(t.grants, 2 * t.seeds);
}

TEST(CameraAgentSim, RandomMeshSeveralRestartsWithLoss) {
  Plan plan;
  plan.topology = "random";
  plan.min_nodes = 6;
  plan.max_nodes = 10;
  plan.restarted = 3;
  plan.loss = 0.02;
  Totals t;
  sweep(plan, 1000, 30, t);
  // Found by a 20x soak: a JOIN retried after a timeout was not sent again
  // (its peer had joined the tree from elsewhere meanwhile), and nothing
  // looked at the subtree, which was complete: the root waited for good.
  sweep(plan, 1090, 1, t);
  EXPECT_GE(t.grants, 2 * t.seeds);
}

TEST(CameraAgentSim, LockWhileTheMeshBootsWithExpectedNodes) {
  Plan plan;
  plan.topology = "line";
  plan.lock_at_boot = true;
  plan.expected_nodes = true;
  Totals t;
  sweep(plan, 2000, 40, t);
  EXPECT_GE(t.grants, 2 * t.seeds);
}

// Issue 16 (power cut): every node crashes at once after some grants, and
// all come back within a second of each other. Token reservations are
// persisted before a token is shown, so every grant after the cut is above
// every grant before it, and the locks still exclude each other while the
// restarted mesh rebuilds its member lists.
TEST(CameraAgentSim, WholeMeshPowerCut) {
  Plan plan;
  plan.topology = "random";
  plan.power_cut = true;
  Totals t;
  sweep(plan, 4000, 30, t);
  EXPECT_GE(t.grants, 2 * t.seeds);
}

// The same cut on disks that lose what they had not yet made durable: a
// token is shown only once its reservation is on disk, so none repeats.
TEST(CameraAgentSim, WholeMeshPowerCutOnSlowDisks) {
  Plan plan;
  plan.topology = "random";
  plan.power_cut = true;
  plan.slow_disks = true;
  Totals t;
  sweep(plan, 4100, 30, t);
  EXPECT_GE(t.grants, 2 * t.seeds);
}

// Without expected_nodes a booting node's N.upper counts only the ids it has
// heard of, and two corners of a line can each look like a majority: seeds
// 3002, 3004, 3006, ... granted overlapping locks until requests at boot
// waited for the member list to stop growing (CameraOptions::boot_settle).
TEST(CameraAgentSim, LockWhileTheMeshBootsEstimatorAlone) {
  Plan plan;
  plan.topology = "line";
  plan.lock_at_boot = true;
  Totals t;
  sweep(plan, 3000, 40, t);
  EXPECT_GE(t.grants, 2 * t.seeds);
}

}  // namespace
}  // namespace mesh::sim
