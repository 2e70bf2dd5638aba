#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "core/time.h"

namespace mesh::sim {

struct Workload;

// SafeHome's factory benchmark (safehome.md §7.2, Fig. 12a's bottom row): "an
// assembly line with 50 workers at 50 stages. Each stage has access to local
// devices, to some devices shared with immediately preceding and succeeding
// stages, and to 5 global devices. Each stage's routine has device access
// probabilities: 0.6 for local devices, 0.3 for neighbor devices, and 0.1 for
// global devices. Routines are generated to keep each worker occupied (no
// idle time)", "probabilistically generated (with possible repetition)".
//
// The paper publishes neither the routines nor how many devices a stage has,
// so this generator fills in what it leaves open, and every choice is a key:
// each stage has `local_devices` of its own and `shared_devices` between it
// and the next stage (so a middle stage has twice that many neighbour
// devices, the first and last once), and a repertoire of `routines_per_stage`
// routines drawn once per run. A command goes to a local, neighbour or global
// device with the given shares (among the categories that still have a device
// the routine has not used), then to a device of that category uniformly.
// Each stage's worker starts at a random instant within the first command
// duration and then triggers one of its repertoire, uniformly, each time the
// previous one would end if it ran alone (its back-to-back time), until the
// shift is over: the back-to-back arrivals the paper blames for EV's slower
// median here.
struct FactoryGenerator {
  int stages = 50;
  int local_devices = 3;
  int shared_devices = 1;
  int global_devices = 5;
  double local_share = 0.6;
  double neighbour_share = 0.3;
  double global_share = 0.1;
  int routines_per_stage = 3;
  int commands_min = 1;  // Table 3's command mix: 1 to 5, 3 on average
  int commands_max = 5;
  core::Duration command_duration = std::chrono::seconds(10);
  core::Duration shift = std::chrono::minutes(5);
  double must_share = 1.0;
  // Absent: every run seed draws its own factory; present: every run uses
  // this one.
  std::optional<uint64_t> seed;

  int devices() const { return stages * local_devices + (stages - 1) * shared_devices + global_devices; }
  int routines() const { return stages * routines_per_stage; }
  // The most routines one worker can start in a shift: every one as short
  // as the generator allows.
  int64_t most_arrivals_per_stage() const;
};

// Deterministic in `seed`. Devices are `sNN.lK` (stage NN's own), `sNN.nK`
// (between stages NN and NN+1) and `gK` (global), all dimmers at brightness
// 0; routines are `sNN.rK`. Each command sets a brightness drawn from 0..100,
// so an end state that is no serial order's shows.
Workload generate_factory_workload(const FactoryGenerator& factory, uint64_t seed);

}  // namespace mesh::sim
