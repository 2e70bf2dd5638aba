#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/time.h"
#include "routine/device_model.h"
#include "sim/factory_workload.h"

namespace mesh::sim {

// A SafeHome workload (safehome.md §7; the synthetic parameters of
// notes/safehome-code.md): devices, routines of ordered commands, and when
// each routine arrives. `meshsim routines` runs one on whole agents under
// each visibility model; sim/scenarios/WORKLOADS.md documents the TOML form.

// A workload file that cannot be used: the message names the file, line,
// key and how to fix it.
class WorkloadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct WorkloadDevice {
  std::string id;
  routine::DeviceKind kind = routine::DeviceKind::dimmer;
  routine::Attributes initial;  // every writable attribute of the kind
};

// One step of a routine: set `values` on `device`, then keep the device for
// `duration` (SafeHome's command running time; zero: done once actuated).
// A command that is not `must` is best effort.
struct WorkloadCommand {
  std::string device;
  routine::Attributes values;
  core::Duration duration{};
  bool must = true;
};

struct WorkloadRoutine {
  std::string id;
  std::vector<WorkloadCommand> commands;  // at most one per device
};

// Routine `routine` (an index into Workload::routines) is triggered `at`
// after the mesh has settled.
struct WorkloadArrival {
  core::Duration at{};
  size_t routine = 0;
};

// Device `device` (an index into Workload::devices) stops answering `at`
// after the mesh has settled, and answers again `down_for` later, or never:
// SafeHome's device failure and restart events (§3), injected by the runner.
struct WorkloadFailure {
  size_t device = 0;
  core::Duration at{};
  std::optional<core::Duration> down_for;
};

struct Workload {
  std::vector<WorkloadDevice> devices;
  std::vector<WorkloadRoutine> routines;
  std::vector<WorkloadArrival> arrivals;  // by time, then by routine order
  std::vector<WorkloadFailure> failures;  // by time
};

// The paper's synthetic workload parameters (notes/safehome-code.md,
// "Synthetic workloads"; defaults are Table 3's, with the command durations
// scaled down from 10 s and 20 min so a run fits in minutes of simulation).
struct WorkloadGenerator {
  int routines = 100;
  int devices = 25;
  double zipf = 0.05;  // the skew of device popularity (alpha)
  int commands_min = 1;
  int commands_max = 5;
  double long_share = 0.1;  // routines whose middle command is long
  core::Duration long_duration = std::chrono::seconds(20);
  core::Duration short_duration = std::chrono::seconds(1);
  double must_share = 1.0;
  // Arrivals are uniform over shrink * (the sum of every routine's
  // back-to-back time): load rho = 1 / shrink concurrent routines.
  double shrink = 0.25;
  // As the authors' simulator does (notes/safehome-code.md, "Failures"):
  // one failure instant, uniform over the arrival window, at which each
  // device some routine commands fails with this probability, for good.
  // Drawn apart from the routines and arrivals, which stay the same for
  // every ratio.
  double device_failure_ratio = 0;
  // Absent: every run seed draws its own workload (the same for every
  // model of that seed); present: every run uses this one.
  std::optional<uint64_t> seed;
};

// What a workload file says: a fixed workload or how to generate one.
struct WorkloadFile {
  std::string source = "<workload>";
  std::variant<Workload, WorkloadGenerator, FactoryGenerator> content;
};

// Both throw WorkloadError.
WorkloadFile load_workload(const std::string& path);
WorkloadFile parse_workload(std::string_view text, std::string_view source_name);

// The workload a run with `run_seed` uses: the fixed one, or the
// generator's draw (deterministic in the generator's seed, else run_seed).
Workload instantiate(const WorkloadFile& file, uint64_t run_seed);
Workload generate_workload(const WorkloadGenerator& generator, uint64_t seed);

// The sum of a routine's command durations: its run alone, no waits.
core::Duration back_to_back(const WorkloadRoutine& routine);

// A device of `kind` as a workload starts it unless it says otherwise: every
// writable attribute at its minimum, or false.
routine::Attributes initial_state_of(routine::DeviceKind kind);

// Limits a workload may ask for (the agent's own routine limits, and a size
// a simulation of whole agents finishes in reasonable time).
inline constexpr int kMaxWorkloadDevices = 1000;
inline constexpr int kMaxWorkloadRoutines = 1000;
inline constexpr size_t kMaxArrivalsPerRoutine = 32;  // a routine group keeps this many finished invocations
inline constexpr int64_t kMaxCommandMs = 3'600'000;
inline constexpr int64_t kMaxArrivalMs = 86'400'000;

}  // namespace mesh::sim
