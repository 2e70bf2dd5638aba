// meshsim: runs a scenario of hundreds of meshagent nodes in one process on
// virtual time, and prints generated topologies for the testbed scripts.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/log.h"
#include "core/version.h"
#include "routine/serial_key_choice.h"
#include "routine/visibility.h"
#include "sim/mesh_sim.h"
#include "sim/routine_workload.h"
#include "sim/routine_workload_run.h"
#include "sim/scenario.h"
#include "sim/topology.h"

namespace {

using mesh::sim::Topology;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
constexpr int kDefaultTopologyNodes = 9;
constexpr int kDefaultClusters = 3;
constexpr int kMaxTopologyNodes = 10000;
constexpr int kProgressWidth = 40;
constexpr int kDefaultWorkloadNodes = 7;
constexpr int kMaxWorkloadNodes = 200;
constexpr int64_t kMaxWorkloadSeeds = 100000;

constexpr std::string_view kHelp = R"(NAME
    meshsim - run meshagent nodes in a deterministic network simulation

SYNOPSIS
    meshsim SCENARIO.toml [--seed N] [--out DIR] [--quiet] [--hop-arq] [--log LEVEL]
    meshsim topology KIND [--nodes N] [--seed S] [--clusters C]
    meshsim routines WORKLOAD.toml [--models wv,gsv,psv,ev] [--seeds N | --seed S]
            [--nodes N] [--ev-scheduler tl|fcfs|jit] [--no-pre-lease]
            [--no-post-lease] [--out DIR] [--quiet] [--log LEVEL]
    meshsim --help | --version

DESCRIPTION
    meshsim runs one unchanged meshagent Node per simulated node, all in one
    process on virtual time: a discrete-event network with per-link delay,
    jitter and loss, link failures, partitions, and node crashes and restarts
    (a restarted node keeps its storage). A run is a pure function of the
    scenario and the seed: the same pair replays exactly and writes
    byte-identical CSV files, so a failing seed can be debugged at leisure.

    After the run meshsim prints a summary (virtual time, events processed,
    datagrams sent/delivered/lost, pings, message totals per layer) and
    writes into DIR:
        counters.csv     node,series,name,labels,value - every counter of
                         every node, summed over its restarts
        histograms.csv   node,incarnation,series,name,labels,count,sum,min,
                         max,mean,p50,p90,p99
        network.csv      scope,metric,value - datagram and byte totals per
                         channel, the ping workload, simulator totals

    meshsim topology prints a generated topology as one JSON object,
        {"kind": "grid", "nodes": N, "positions": [[x,y,z],...],
         "edges": [[i,j],...]}
    with 0-based indices, i < j, edges sorted, positions in metres. KIND is
    one of line, grid, grid3d, random, clustered, lshape. The testbed
    scripts build their network namespaces from it.

    meshsim routines runs a SafeHome workload (devices, routines of ordered
    commands with durations, arrival times; or the paper's synthetic
    generator) on a random mesh of whole agents with emulated devices, once
    per seed and visibility model: the same workload, mesh and arrival
    nodes under every model of a seed. Each arrival is a manual run from a
    node the seed picks; after the last one the mesh runs until every
    invocation has ended (bounded). The schedule is read from the devices'
    actuation logs (a command occupies its device from its actuation for
    its duration), the metrics are SafeHome's (safehome.md section 7) and
    the oracle checks serial equivalence of the end state, GSV's one
    routine at a time and PSV's one routine per device at a time, under
    every model. It writes into DIR, per model M:
        M-invocations.csv  model,seed,invocation,routine,arrival_ms,
                           start_ms,end_ms,wait_ms,e2e_ms,overhead,
                           temporary_incongruence,outcome,ev_stretch,
                           ev_placement_ms,ev_rekeys - one row per
                           arrival; times in virtual ms after the workload's
                           start; outcome ok, failed, aborted, unfinished
                           or not_triggered; ev_stretch is (gaps between
                           the routine's commands + their durations) /
                           their durations (1: back to back, empty if
                           nothing actuated); ev_placement_ms (first serial
                           key to placed in every device's lineage, empty
                           if never placed) and ev_rekeys are EV's and
                           empty under the other models
        M-summary.csv      model,seed,invocations,ok,unfinished,e2e_p50_ms,
                           e2e_p90_ms,parallelism_level,order_mismatch,
                           final_incongruence,final_incongruence_exact,
                           temporary_incongruence_share,
                           temporary_incongruence_mean,abort_rate,
                           serial_order,global_strict,partitioned_strict,
                           device_failures,rollback_commands_per_abort,
                           ev_variant - one row per seed; serial_order,
                           global_strict and partitioned_strict pass or
                           fail; ev_variant as below, empty but under EV
    and prints one line per run. The same seed writes byte-identical files.
    M is the model's name, except for EV run with other than the default
    scheduler and leases: then it is ev-VARIANT, VARIANT the scheduler
    followed by -nopre and -nopost for a lease turned off (ev-fcfs,
    ev-tl-nopre-nopost, ...). The model column says ev for every variant;
    the summary's ev_variant column says which (tl for the default).
    The workload format is documented in sim/scenarios/WORKLOADS.md.

OPTIONS
    --seed N       run seed (default: the scenario's [run] seed); drives
                   loss, jitter, node randomness and the workload
    --out DIR      where to write the CSV files (default: ./meshsim-out)
    --quiet        print nothing but errors (the CSV files are still written)
    --hop-arq      every node acknowledges and retransmits its unicast hop
                   datagrams (transport.hop_arq; off by default)
    --log LEVEL    log level of every layer: trace, debug, info, warn, error,
                   critical, off (default: warn)
    --nodes N      topology: number of nodes (default 9; grid3d wants a
                   product of three factors and picks the most cubic one)
    --seed S       topology: layout seed for random and clustered (default 1)
    --clusters C   topology: clusters for kind clustered (default 3)
    --models LIST  routines: comma-separated visibility models among wv, gsv,
                   psv, sgsv, ev (default: wv, gsv, psv, ev; sgsv differs
                   from gsv only when devices fail)
    --seeds N      routines: run seeds 1..N (default 1)
    --seed S       routines: run seed S only; it drives the mesh, the
                   arrival nodes and, unless the workload's generator fixes
                   its own seed, the generated workload
    --nodes N      routines: mesh size (default 7)
    --ev-scheduler NAME
                   routines, EV: how an invocation chooses its serial key
                   (the agents' [routines] ev_scheduler): tl (timeline:
                   the first gap of its devices' lineages where it delays
                   nobody; the default), fcfs (after every routine placed
                   on its devices) or jit (only once its devices are
                   unused). Needs ev among --models
    --no-pre-lease routines, EV: an invocation never goes before one already
                   placed (ev_pre_lease = false; tl then appends like fcfs).
                   Needs ev among --models
    --no-post-lease
                   routines, EV: an invocation keeps every device until it
                   ends instead of giving each up after its last command
                   there (ev_post_lease = false). Needs ev among --models
    --out DIR      routines: where to write the CSV files (default
                   ./meshsim-routines)
    -h, --help     this text
    --version      the version

SCENARIO FORMAT
    A TOML file. Every key is checked; an unknown key, a wrong type or a
    value out of range stops meshsim with the file, line and key named.

    [topology]   kind      line | grid | grid3d | random | clustered | lshape
                 nodes     1..10000 (grid: or width and height;
                           grid3d: width, height and depth instead)
                 clusters  clustered only, default 3
                 seed      layout seed for random/clustered, default 1
    [link]       delay_ms  one-way delay, default 5
                 jitter_ms extra uniform delay in [0, jitter_ms], default 0;
                           it reorders datagrams
                 loss      probability in [0, 1] that a datagram is lost,
                           default 0
    [run]        duration_s virtual seconds to run, default 30
                 seed      default run seed, default 1
    [workload]   ping_interval_ms  every this often a random node pings a
                           random neighbour (0 or absent: no pings)
                 ping_targets "neighbours" (default) or "any": ping a
                           random other node, across hops along the
                           OLSR routes
    [[event]]    at_s      when, in seconds from the start
                 action    crash | restart (node = I)
                           link_down | link_up (a = I, b = J: neighbours)
                           partition (groups = [[I, ...], [J, ...]]; nodes
                             not listed form one more group)
                           heal

    Node indices are 0-based. Example:

        [topology]
        kind = "grid"
        nodes = 9

        [link]
        delay_ms = 5
        jitter_ms = 3
        loss = 0.05

        [run]
        duration_s = 30
        seed = 7

        [workload]
        ping_interval_ms = 200

        [[event]]
        at_s = 10
        action = "crash"
        node = 4

        [[event]]
        at_s = 20
        action = "restart"
        node = 4

EXIT STATUS
    0   the run finished (or the topology was printed); for routines, also
        when an oracle check failed (the CSV says which)
    1   the run failed (a node refused to start, the CSV files could not
        be written)
    2   bad usage or an invalid scenario or workload; the message says what
        to fix

EXAMPLES
    meshsim sim/scenarios/grid-9-ping.toml
    meshsim sim/scenarios/random-100-loss.toml --seed 42 --out /tmp/run42
    meshsim topology random --nodes 50 --seed 3
    meshsim routines sim/scenarios/safehome-small.toml --seeds 3 --out /tmp/sh
    meshsim routines sim/scenarios/safehome-small.toml --models ev \
            --ev-scheduler fcfs --no-pre-lease --seeds 3 --out /tmp/sh
)";

struct UsageError {
  std::string message;
};

std::optional<int64_t> parse_int(std::string_view text) {
  int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

class Args {
 public:
  Args(int argc, char** argv) : args_(argv + 1, argv + argc) {}
  bool done() const { return next_ >= args_.size(); }
  std::string_view take() { return args_[next_++]; }
  std::string_view value_of(std::string_view option) {
    if (done()) throw UsageError{fmt::format("{} needs a value", option)};
    return take();
  }
  int64_t int_of(std::string_view option, int64_t lo, int64_t hi) {
    const std::string_view text = value_of(option);
    const auto value = parse_int(text);
    if (!value || *value < lo || *value > hi) {
      throw UsageError{fmt::format("{} wants an integer in [{}, {}], got '{}'", option, lo, hi, text)};
    }
    return *value;
  }

 private:
  std::vector<std::string_view> args_;
  size_t next_ = 0;
};

// The most cubic x*y*z = n.
Topology grid3d_for(int n) {
  int best_x = 1;
  int best_y = 1;
  int best_z = n;
  for (int x = 1; x * x * x <= n; ++x) {
    if (n % x) continue;
    for (int y = x; y * y <= n / x; ++y) {
      if ((n / x) % y) continue;
      const int z = n / x / y;
      if (z - x < best_z - best_x) {
        best_x = x;
        best_y = y;
        best_z = z;
      }
    }
  }
  return mesh::sim::grid3d(best_x, best_y, best_z);
}

int topology_command(Args& args) {
  if (args.done()) throw UsageError{"topology needs a KIND (line, grid, grid3d, random, clustered, lshape)"};
  const std::string kind(args.take());
  int nodes = kDefaultTopologyNodes;
  uint64_t seed = 1;
  int clusters = kDefaultClusters;
  while (!args.done()) {
    const std::string_view arg = args.take();
    if (arg == "--nodes") {
      nodes = static_cast<int>(args.int_of(arg, 1, kMaxTopologyNodes));
    } else if (arg == "--seed") {
      seed = static_cast<uint64_t>(args.int_of(arg, 0, INT64_MAX));
    } else if (arg == "--clusters") {
      clusters = static_cast<int>(args.int_of(arg, 1, kMaxTopologyNodes));
    } else {
      throw UsageError{fmt::format("unknown topology option '{}'", arg)};
    }
  }
  Topology t;
  if (kind == "line") {
    t = mesh::sim::line(nodes);
  } else if (kind == "grid") {
    t = mesh::sim::grid_for(nodes);
  } else if (kind == "grid3d") {
    t = grid3d_for(nodes);
  } else if (kind == "random") {
    t = mesh::sim::random_geometric(nodes, seed);
  } else if (kind == "clustered") {
    if (clusters > nodes) throw UsageError{fmt::format("--clusters {} exceeds --nodes {}", clusters, nodes)};
    t = mesh::sim::clustered(nodes, clusters, seed);
  } else if (kind == "lshape") {
    t = mesh::sim::lshape(nodes);
  } else {
    throw UsageError{
        fmt::format("unknown topology kind '{}'; use one of line, grid, grid3d, random, clustered, lshape", kind)};
  }
  fmt::print("{}\n", t.to_json());
  return kExitOk;
}

void draw_progress(double fraction) {
  const int filled = static_cast<int>(std::lround(fraction * kProgressWidth));
  fmt::print(stderr, "\r[{}{}] {:3.0f}%", std::string(static_cast<size_t>(filled), '#'),
             std::string(static_cast<size_t>(kProgressWidth - filled), ' '), fraction * 100.0);
  if (fraction >= 1.0) fmt::print(stderr, "\n");
  std::fflush(stderr);
}

int run_command(std::string_view scenario_path, Args& args) {
  std::optional<uint64_t> seed;
  std::string out_dir = "meshsim-out";
  bool quiet = false;
  mesh::sim::MeshSim::Options options;
  std::string level = "warn";
  while (!args.done()) {
    const std::string_view arg = args.take();
    if (arg == "--seed") {
      seed = static_cast<uint64_t>(args.int_of(arg, 0, INT64_MAX));
    } else if (arg == "--out") {
      out_dir = std::string(args.value_of(arg));
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--hop-arq") {
      options.hop_arq = true;
    } else if (arg == "--log") {
      level = std::string(args.value_of(arg));
    } else {
      throw UsageError{fmt::format("unknown option '{}'", arg)};
    }
  }
  if (!mesh::core::set_log_level(level)) {
    throw UsageError{fmt::format("--log: unknown level '{}'; use trace, debug, info, warn, error, critical or off", level)};
  }

  mesh::sim::Scenario scenario;
  try {
    scenario = mesh::sim::load_scenario(std::string(scenario_path));
  } catch (const mesh::sim::ScenarioError& e) {
    fmt::print(stderr, "meshsim: {}\n", e.what());
    return kExitUsage;
  }
  const uint64_t run_seed = seed.value_or(scenario.run.seed);

  try {
    mesh::sim::MeshSim sim(scenario, run_seed, options);
    const bool show_progress = !quiet && isatty(STDERR_FILENO) == 1;
    sim.run(show_progress ? std::function<void(double)>(draw_progress) : std::function<void(double)>());
    sim.write_csv(out_dir);
    if (!quiet) fmt::print("{}csv             {}/{{counters,histograms,network}}.csv\n", sim.summary(), out_dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "meshsim: run failed: {}\n", e.what());
    return kExitFailure;
  }
  return kExitOk;
}

std::vector<mesh::routine::Visibility> parse_models(std::string_view text) {
  std::vector<mesh::routine::Visibility> models;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view name = text.substr(begin, comma - begin);
    const auto model = mesh::routine::parse_visibility(name);
    if (!model) throw UsageError{fmt::format("--models: unknown model '{}'; use wv, gsv, psv, sgsv or ev", name)};
    if (std::find(models.begin(), models.end(), *model) != models.end()) {
      throw UsageError{fmt::format("--models: '{}' is listed twice", name)};
    }
    models.push_back(*model);
    begin = comma + 1;
  }
  return models;
}

int routines_command(Args& args) {
  if (args.done()) throw UsageError{"routines needs a WORKLOAD.toml"};
  const std::string workload_path(args.take());
  std::vector<mesh::routine::Visibility> models = {mesh::routine::Visibility::wv, mesh::routine::Visibility::gsv,
                                                   mesh::routine::Visibility::psv, mesh::routine::Visibility::ev};
  uint64_t first_seed = 1;
  uint64_t seeds = 1;
  bool seeds_given = false;
  bool seed_given = false;
  mesh::sim::WorkloadRunOptions options;
  options.nodes = kDefaultWorkloadNodes;
  std::string out_dir = "meshsim-routines";
  bool quiet = false;
  std::string level = "warn";
  std::vector<std::string_view> ev_flags;
  while (!args.done()) {
    const std::string_view arg = args.take();
    if (arg == "--ev-scheduler") {
      const std::string_view name = args.value_of(arg);
      const auto scheduler = mesh::routine::parse_ev_scheduler(name);
      if (!scheduler) {
        throw UsageError{fmt::format("--ev-scheduler: unknown scheduler '{}'; use tl, fcfs or jit", name)};
      }
      options.ev_scheduler = *scheduler;
      ev_flags.push_back(arg);
    } else if (arg == "--no-pre-lease") {
      options.ev_pre_lease = false;
      ev_flags.push_back(arg);
    } else if (arg == "--no-post-lease") {
      options.ev_post_lease = false;
      ev_flags.push_back(arg);
    } else if (arg == "--models") {
      models = parse_models(args.value_of(arg));
    } else if (arg == "--seeds") {
      seeds = static_cast<uint64_t>(args.int_of(arg, 1, kMaxWorkloadSeeds));
      seeds_given = true;
    } else if (arg == "--seed") {
      first_seed = static_cast<uint64_t>(args.int_of(arg, 0, INT64_MAX));
      seed_given = true;
    } else if (arg == "--nodes") {
      options.nodes = static_cast<int>(args.int_of(arg, 1, kMaxWorkloadNodes));
    } else if (arg == "--out") {
      out_dir = std::string(args.value_of(arg));
    } else if (arg == "--quiet") {
      quiet = true;
    } else if (arg == "--log") {
      level = std::string(args.value_of(arg));
    } else {
      throw UsageError{fmt::format("unknown routines option '{}'", arg)};
    }
  }
  if (seeds_given && seed_given) throw UsageError{"give --seeds N or --seed S, not both"};
  if (!ev_flags.empty() && std::find(models.begin(), models.end(), mesh::routine::Visibility::ev) == models.end()) {
    throw UsageError{fmt::format("{} applies to EV only; add ev to --models", ev_flags.front())};
  }
  if (!mesh::core::set_log_level(level)) {
    throw UsageError{
        fmt::format("--log: unknown level '{}'; use trace, debug, info, warn, error, critical or off", level)};
  }
  mesh::sim::WorkloadFile workload;
  try {
    workload = mesh::sim::load_workload(workload_path);
  } catch (const mesh::sim::WorkloadError& e) {
    fmt::print(stderr, "meshsim: {}\n", e.what());
    return kExitUsage;
  }
  try {
    std::filesystem::create_directories(out_dir);
    for (const auto model : models) {
      std::string name(mesh::routine::to_string(model));
      if (model == mesh::routine::Visibility::ev && mesh::sim::ev_variant(options) != "tl") {
        name += "-" + mesh::sim::ev_variant(options);
      }
      std::string invocations = mesh::sim::invocations_csv_header();
      std::string summary = mesh::sim::summary_csv_header();
      for (uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
        const auto result = mesh::sim::run_workload(mesh::sim::instantiate(workload, seed), model, seed, options);
        invocations += mesh::sim::invocations_csv_rows(result);
        const std::string row = mesh::sim::summary_csv_row(result);
        summary += row;
        if (!quiet) fmt::print("{}", row);
        for (const auto* problem : {&result.serial_order, &result.global_strict, &result.partitioned_strict}) {
          if (*problem && !quiet) {
            fmt::print(stderr, "  {} seed {}: {}\n", name, seed, (*problem)->substr(0, (*problem)->find('\n')));
          }
        }
      }
      for (const auto& [file, text] :
           {std::pair{name + "-invocations.csv", &invocations}, std::pair{name + "-summary.csv", &summary}}) {
        std::ofstream out(std::filesystem::path(out_dir) / file, std::ios::binary);
        out << *text;
        if (!out) throw std::runtime_error(fmt::format("cannot write {}/{}", out_dir, file));
      }
    }
    if (!quiet) fmt::print("csv {}/MODEL-{{invocations,summary}}.csv\n", out_dir);
  } catch (const std::exception& e) {
    fmt::print(stderr, "meshsim: run failed: {}\n", e.what());
    return kExitFailure;
  }
  return kExitOk;
}
}  // namespace

int main(int argc, char** argv) {
  Args args(argc, argv);
  try {
    if (args.done()) throw UsageError{"missing SCENARIO.toml, 'topology KIND' or 'routines WORKLOAD.toml'"};
    const std::string_view first = args.take();
    if (first == "-h" || first == "--help") {
      fmt::print("{}", kHelp);
      return kExitOk;
    }
    if (first == "--version") {
      fmt::print("meshsim {}\n", mesh::kVersion);
      return kExitOk;
    }
    if (first == "topology") return topology_command(args);
    if (first == "routines") return routines_command(args);
    if (first.starts_with("-")) throw UsageError{fmt::format("unknown option '{}'", first)};
    return run_command(first, args);
  } catch (const UsageError& e) {
    fmt::print(stderr,
               "meshsim: {}\nusage: meshsim SCENARIO.toml [--seed N] [--out DIR] [--quiet] [--hop-arq] [--log LEVEL]\n"
               "       meshsim topology KIND [--nodes N] [--seed S] [--clusters C]\n"
               "       meshsim routines WORKLOAD.toml [--models wv,gsv,psv,ev] [--seeds N | --seed S] [--nodes N] "
               "[--ev-scheduler tl|fcfs|jit] [--no-pre-lease] [--no-post-lease] [--out DIR]\n"
               "       meshsim --help\n",
               e.message);
    return kExitUsage;
  }
}
