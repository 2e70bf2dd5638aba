// SafeHome's scheduling policies for Eventual Visibility (safehome.md §5,
// §7.5: Fig. 14 and Fig. 15) on the centralized, sans-IO schedulers
// (routine/lazy_scheduler.h, routine/timeline_scheduler.h), evaluated the
// way the paper's own simulator does it: the whole schedule of a workload is
// built from its known arrivals and durations, then measured with
// routine/safehome_metrics.h (notes/safehome-code.md's definitions).
// Workloads come from meshsim's generator (sim/routine_workload.h) with
// Table 3's parameters and its real durations (10 s short commands, 20 min
// long ones): nothing runs, so nothing needs scaling down. Seed s draws the
// same workload for every policy, so policies compare on identical routines.
//
// Every figure benchmark runs SAFEHOME_SCHEDULER_BENCH_SEEDS (100) seeds of
// 100 routines over 25 devices (Zipf 0.05, 10 % long routines) and reports,
// pooled over every routine of every seed: latency = end-to-end / back-to-back
// (the paper's "E2E latency normalized with routine runtime") at p50, p90 and
// mean; the share of routines with temporary incongruence and its mean
// value; the parallelism level (mean over seeds); the share of routines
// TL stretched (stretch > 1) and the stretch's p90; the share of routines
// TL's search gave up on and appended. With SAFEHOME_SCHEDULER_BENCH_OUT=DIR
// each seed is a row of DIR/safehome_fig14/ or DIR/safehome_fig15/ CSV
// files, and each point's latency quantiles pooled over its seeds (the CDF
// of Fig. 14a) rows of latency_quantiles.csv there. All of it is a pure
// function of the seeds; only the placement timings depend on the machine.
//
// BM_Fig14Policy/policy:P/rho:R: FCFS (P 0), JiT (1) and TL (2, both leases
//   on) at load rho = R concurrent routines, 1-5 commands per routine
//   (Fig. 14a-c).
// BM_Fig15LeasingVsLoad/leasing:L/rho:R: TL with both leases (L 0), pre only
//   (1), post only (2), none (3) against rho, 1-5 commands (Fig. 15a-b).
// BM_Fig15LeasingVsCommands/leasing:L/commands:C: the same at rho = 4 with
//   exactly C commands per routine (Fig. 15a-b against C, and with L 0 the
//   stretch of Fig. 15c).
// BM_TimelinePlacement/commands:C (Fig. 15d): wall time to place one routine
//   of C commands with TL into a lineage table holding 30 routines over 15
//   devices (the paper's Raspberry Pi setting), cycling over 16 such tables.
//   Its baseline, BM_AppendPlacementBaseline/commands:C, places the same
//   routine into the same tables the way FCFS does (§5: appended after every
//   access on its devices). Both copy the table first (placing changes it),
//   so read TL's time as a ratio to the baseline's at the same C.
//   `probes` counts the gap positions TL tried (deterministic).

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/bench_output.h"
#include "routine/lazy_scheduler.h"
#include "routine/lineage.h"
#include "routine/safehome_metrics.h"
#include "routine/timeline_scheduler.h"
#include "sim/routine_workload.h"

namespace {

using mesh::bench::quantile;
using mesh::core::TimePoint;
using mesh::routine::LazyPolicy;
using mesh::routine::LineageTable;
using mesh::routine::RoutineArrival;
using mesh::routine::ScheduledRoutine;
using mesh::routine::TimelineOptions;
using mesh::routine::TimelineScheduler;

constexpr int kDefaultCommandsMin = 1;
constexpr int kDefaultCommandsMax = 5;  // 3 on average: Table 3's C
constexpr double kFig15Rho = 4;
constexpr int kPlacementDevices = 15;
constexpr int kPlacementRoutines = 30;
constexpr int kPlacementTables = 16;
constexpr const char* kOutVariable = "SAFEHOME_SCHEDULER_BENCH_OUT";
const char* const kPolicies[] = {"fcfs", "jit", "tl"};
const char* const kLeasings[] = {"both", "pre_only", "post_only", "none"};

int seeds() {
  const char* value = std::getenv("SAFEHOME_SCHEDULER_BENCH_SEEDS");
  return value != nullptr ? std::max(1, std::atoi(value)) : 100;
}

// Table 3 (safehome.md §7.3): 100 routines, 25 devices, Zipf 0.05, 10 % long
// routines, every command must; the generator's other defaults are these.
mesh::sim::WorkloadGenerator table3(double rho, int commands_min, int commands_max) {
  mesh::sim::WorkloadGenerator generator;
  generator.short_duration = std::chrono::seconds(10);
  generator.long_duration = std::chrono::minutes(20);
  generator.shrink = 1.0 / rho;
  generator.commands_min = commands_min;
  generator.commands_max = commands_max;
  return generator;
}

// The workload's routines numbered in arrival order, as SafeHome numbers them.
std::vector<RoutineArrival> arrivals(const mesh::sim::Workload& workload) {
  std::vector<RoutineArrival> out;
  for (const auto& arrival : workload.arrivals) {
    RoutineArrival routine{out.size(), TimePoint(arrival.at), {}};
    for (const auto& command : workload.routines[arrival.routine].commands) {
      routine.commands.push_back({command.device, command.duration});
    }
    out.push_back(std::move(routine));
  }
  return out;
}

TimelineOptions leasing(int choice) {
  TimelineOptions options;
  options.pre_lease = choice == 0 || choice == 1;
  options.post_lease = choice == 0 || choice == 2;
  return options;
}

struct Schedule {
  std::vector<ScheduledRoutine> routines;
  size_t appended = 0;
};

// TL places routines as they arrive, never re-planning one (as the paper's
// simulator does).
Schedule timeline(const TimelineOptions& options, const std::vector<RoutineArrival>& routines) {
  LineageTable table;
  TimelineScheduler scheduler(table, options);
  Schedule schedule;
  for (const auto& routine : routines) {
    auto placement = scheduler.place(routine);
    if (!placement) continue;
    schedule.appended += placement->appended ? 1 : 0;
    schedule.routines.push_back(std::move(placement->routine));
  }
  return schedule;
}

Schedule lazy(LazyPolicy policy, const std::vector<RoutineArrival>& routines) {
  LineageTable table;
  return {mesh::routine::schedule_lazy(policy, routines, table), 0};
}

// One seed's measurements.
struct SeedMetrics {
  std::vector<double> latency;
  std::vector<double> stretch;
  size_t incongruent = 0;
  double incongruence_sum = 0;
  double parallelism = 0;
  size_t appended = 0;
};

SeedMetrics measure(const Schedule& schedule) {
  SeedMetrics m;
  for (const auto& routine : schedule.routines) {
    m.latency.push_back(mesh::routine::latency_overhead(routine));
    m.stretch.push_back(mesh::routine::ev_stretch(routine));
    const double incongruence = mesh::routine::temporary_incongruence(routine, schedule.routines);
    m.incongruent += incongruence > 0 ? 1 : 0;
    m.incongruence_sum += incongruence;
  }
  m.parallelism = mesh::routine::parallelism_level(schedule.routines);
  m.appended = schedule.appended;
  return m;
}

double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0 : sum / static_cast<double>(values.size());
}

double share_above_one(const std::vector<double>& values) {
  // A stretch computed from whole microseconds is exactly 1 when nothing
  // was stretched.
  size_t above = 0;
  for (double v : values) above += v > 1.0 ? 1 : 0;
  return values.empty() ? 0 : static_cast<double>(above) / static_cast<double>(values.size());
}

std::ofstream output(const std::string& figure, const std::string& name, const std::string& header) {
  if (const char* dir = std::getenv(kOutVariable)) std::filesystem::create_directories(std::string(dir) + "/" + figure);
  return mesh::bench::open_output(kOutVariable, figure + "/" + name, header);
}

constexpr const char* kSeedHeader =
    "policy,rho,commands,seed,routines,latency_p50,latency_p90,latency_mean,incongruent_share,"
    "incongruence_mean,parallelism,stretched_share,stretch_p90,appended";

// Runs every seed of one point: `point` names it in the CSV (policy, rho,
// commands), `schedule` builds a seed's schedule from its routines.
template <typename Scheduler>
void run_point(benchmark::State& state, const std::string& figure, const std::string& file, const std::string& point,
               const mesh::sim::WorkloadGenerator& generator, Scheduler schedule) {
  std::vector<double> latency, stretch;
  size_t routines = 0, incongruent = 0, appended = 0;
  double incongruence_sum = 0, parallelism_sum = 0;
  auto rows = output(figure, file, kSeedHeader);
  const int n = seeds();
  for (auto _ : state) {
    for (int seed = 1; seed <= n; ++seed) {
      const auto workload = mesh::sim::generate_workload(generator, static_cast<uint64_t>(seed));
      const SeedMetrics m = measure(schedule(arrivals(workload)));
      const auto count = static_cast<double>(m.latency.size());
      if (rows.is_open()) {
        rows << fmt::format("{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{}\n", point, seed,
                            m.latency.size(), quantile(m.latency, 0.5), quantile(m.latency, 0.9), mean(m.latency),
                            static_cast<double>(m.incongruent) / count, m.incongruence_sum / count, m.parallelism,
                            share_above_one(m.stretch), quantile(m.stretch, 0.9), m.appended);
      }
      latency.insert(latency.end(), m.latency.begin(), m.latency.end());
      stretch.insert(stretch.end(), m.stretch.begin(), m.stretch.end());
      routines += m.latency.size();
      incongruent += m.incongruent;
      incongruence_sum += m.incongruence_sum;
      parallelism_sum += m.parallelism;
      appended += m.appended;
    }
  }
  const auto count = static_cast<double>(routines);
  state.counters["latency_p50"] = quantile(latency, 0.5);
  state.counters["latency_p90"] = quantile(latency, 0.9);
  state.counters["latency_mean"] = mean(latency);
  state.counters["incongruent_share"] = static_cast<double>(incongruent) / count;
  state.counters["incongruence_mean"] = incongruence_sum / count;
  state.counters["parallelism"] = parallelism_sum / n;
  state.counters["stretched_share"] = share_above_one(stretch);
  state.counters["stretch_p90"] = quantile(stretch, 0.9);
  state.counters["appended_share"] = static_cast<double>(appended) / count;
  state.counters["routines"] = count;
  if (auto out = output(figure, "latency_quantiles.csv", "policy,rho,commands,quantile,latency"); out.is_open()) {
    for (int q = 0; q <= 100; q += 5) {
      out << fmt::format("{},{:.2f},{:.4f}\n", point, q / 100.0, quantile(latency, q / 100.0));
    }
  }
}

std::string commands_label(int commands_min, int commands_max) {
  return commands_min == commands_max ? fmt::format("{}", commands_min)
                                      : fmt::format("{}-{}", commands_min, commands_max);
}

void BM_Fig14Policy(benchmark::State& state) {
  const int policy = static_cast<int>(state.range(0));
  const auto rho = static_cast<double>(state.range(1));
  const std::string point =
      fmt::format("{},{},{}", kPolicies[policy], rho, commands_label(kDefaultCommandsMin, kDefaultCommandsMax));
  run_point(state, "safehome_fig14", "policies.csv", point, table3(rho, kDefaultCommandsMin, kDefaultCommandsMax),
            [policy](const std::vector<RoutineArrival>& routines) {
              if (policy == 2) return timeline(TimelineOptions{}, routines);
              return lazy(policy == 0 ? LazyPolicy::fcfs : LazyPolicy::jit, routines);
            });
}

void BM_Fig15LeasingVsLoad(benchmark::State& state) {
  const int choice = static_cast<int>(state.range(0));
  const auto rho = static_cast<double>(state.range(1));
  const std::string point =
      fmt::format("tl_{},{},{}", kLeasings[choice], rho, commands_label(kDefaultCommandsMin, kDefaultCommandsMax));
  run_point(state, "safehome_fig15", "leasing_vs_load.csv", point,
            table3(rho, kDefaultCommandsMin, kDefaultCommandsMax),
            [choice](const std::vector<RoutineArrival>& routines) { return timeline(leasing(choice), routines); });
}

void BM_Fig15LeasingVsCommands(benchmark::State& state) {
  const int choice = static_cast<int>(state.range(0));
  const int commands = static_cast<int>(state.range(1));
  const std::string point = fmt::format("tl_{},{},{}", kLeasings[choice], kFig15Rho, commands);
  run_point(state, "safehome_fig15", "leasing_vs_commands.csv", point, table3(kFig15Rho, commands, commands),
            [choice](const std::vector<RoutineArrival>& routines) { return timeline(leasing(choice), routines); });
}

// A table TL built from 30 routines over 15 devices, and one more routine of
// `commands` commands arriving with the first of them, so that every routine
// in the table is still ahead of it.
struct PlacementCase {
  LineageTable table;
  RoutineArrival routine;
};

std::vector<PlacementCase> placement_cases(int commands) {
  std::vector<PlacementCase> cases;
  for (int seed = 1; seed <= kPlacementTables; ++seed) {
    auto generator = table3(kFig15Rho, kDefaultCommandsMin, kDefaultCommandsMax);
    generator.devices = kPlacementDevices;
    generator.routines = kPlacementRoutines;
    const auto existing = arrivals(mesh::sim::generate_workload(generator, static_cast<uint64_t>(seed)));
    PlacementCase one;
    TimelineScheduler scheduler(one.table);
    for (const auto& routine : existing) scheduler.place(routine);
    generator.routines = 1;
    generator.commands_min = generator.commands_max = commands;
    one.routine = arrivals(mesh::sim::generate_workload(generator, static_cast<uint64_t>(seed))).front();
    one.routine.id = existing.size();
    one.routine.arrival = existing.front().arrival;
    cases.push_back(std::move(one));
  }
  return cases;
}

void BM_TimelinePlacement(benchmark::State& state) {
  const auto cases = placement_cases(static_cast<int>(state.range(0)));
  double probes = 0, appended = 0;
  for (const auto& one : cases) {
    LineageTable table = one.table;
    const auto placement = TimelineScheduler(table).place(one.routine);
    probes += static_cast<double>(placement->probes);
    appended += placement->appended ? 1 : 0;
  }
  size_t i = 0;
  for (auto _ : state) {
    LineageTable table = cases[i].table;
    auto placement = TimelineScheduler(table).place(cases[i].routine);
    benchmark::DoNotOptimize(placement);
    i = (i + 1) % cases.size();
  }
  state.counters["probes"] = probes / static_cast<double>(cases.size());
  state.counters["appended_share"] = appended / static_cast<double>(cases.size());
}

void BM_AppendPlacementBaseline(benchmark::State& state) {
  const auto cases = placement_cases(static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    LineageTable table = cases[i].table;
    const RoutineArrival& routine = cases[i].routine;
    TimePoint start = routine.arrival;
    for (const auto& command : routine.commands) {
      if (const auto* lineage = table.find(command.device)) {
        for (const auto& access : lineage->accesses()) start = std::max(start, access.end);
      }
    }
    for (const auto& command : routine.commands) {
      table.insert(command.device, {routine.id, start, start + command.duration});
      start += command.duration;
    }
    benchmark::DoNotOptimize(table);
    i = (i + 1) % cases.size();
  }
  // The same counters as BM_TimelinePlacement, so both fit one CSV file:
  // the baseline searches no gap and appends every routine.
  state.counters["probes"] = 0;
  state.counters["appended_share"] = 1;
}

void fig14_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"policy", "rho"});
  for (int rho : {1, 2, 4, 8}) {
    for (int policy = 0; policy < 3; ++policy) b->Args({policy, rho});
  }
}
void leasing_vs_load_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"leasing", "rho"});
  for (int rho : {1, 2, 4, 8}) {
    for (int choice = 0; choice < 4; ++choice) b->Args({choice, rho});
  }
}
void leasing_vs_commands_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"leasing", "commands"});
  for (int commands : {1, 2, 3, 4, 6, 8, 10}) {
    for (int choice = 0; choice < 4; ++choice) b->Args({choice, commands});
  }
}
void placement_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"commands"});
  for (int commands = 1; commands <= 10; ++commands) b->Arg(commands);
}

BENCHMARK(BM_Fig14Policy)->Apply(fig14_args)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Fig15LeasingVsLoad)->Apply(leasing_vs_load_args)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Fig15LeasingVsCommands)->Apply(leasing_vs_commands_args)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_AppendPlacementBaseline)->Apply(placement_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TimelinePlacement)->Apply(placement_args)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
