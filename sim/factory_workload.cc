#include "sim/factory_workload.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "sim/routine_workload.h"

namespace mesh::sim {
namespace {

// Its own stream, apart from the synthetic generator's, and from the mesh a
// run seed also drives.
constexpr uint64_t kFactorySalt = 0xfac7'0a11;

enum Category : size_t { kLocal, kNeighbour, kGlobal, kCategories };

// The devices one stage may command, per category, as indices into
// Workload::devices.
using StageDevices = std::array<std::vector<size_t>, kCategories>;

WorkloadDevice dimmer(std::string id) {
  WorkloadDevice device;
  device.id = std::move(id);
  device.kind = routine::DeviceKind::dimmer;
  device.initial = initial_state_of(device.kind);
  return device;
}

WorkloadRoutine draw_routine(core::Rng& rng, const FactoryGenerator& f, const Workload& w, StageDevices unused) {
  const std::array<double, kCategories> shares = {f.local_share, f.neighbour_share, f.global_share};
  size_t reachable = 0;
  for (const auto& devices : unused) reachable += devices.size();
  const auto count = std::min<size_t>(static_cast<size_t>(rng.between(f.commands_min, f.commands_max)), reachable);
  WorkloadRoutine planned;
  while (planned.commands.size() < count) {
    // The shares among the categories that still have a device this routine
    // has not used; a category whose share is 0 is chosen only when nothing
    // else is left.
    double total = 0;
    for (size_t c = 0; c < kCategories; ++c) total += unused[c].empty() ? 0.0 : shares[c];
    size_t category = kCategories;
    if (total > 0) {
      double target = rng.unit() * total;
      for (size_t c = 0; c < kCategories; ++c) {
        if (unused[c].empty() || shares[c] <= 0) continue;
        category = c;
        if (target < shares[c]) break;
        target -= shares[c];
      }
    } else {
      for (size_t c = 0; c < kCategories && category == kCategories; ++c) {
        if (!unused[c].empty()) category = c;
      }
    }
    auto& pool = unused[category];
    const size_t pick = rng.below(pool.size());
    WorkloadCommand command;
    command.device = w.devices[pool[pick]].id;
    command.values = {{"brightness", static_cast<double>(rng.between(0, 100))}};
    command.duration = f.command_duration;
    command.must = rng.chance(f.must_share);
    planned.commands.push_back(std::move(command));
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
  }
  return planned;
}

}  // namespace

int64_t FactoryGenerator::most_arrivals_per_stage() const {
  const int64_t shortest = std::max<int64_t>(1, static_cast<int64_t>(commands_min) * command_duration.count());
  // Arrivals at start, start + shortest, ... while before the shift's end,
  // from a start at or after 0.
  return shift.count() / shortest + 1;
}

Workload generate_factory_workload(const FactoryGenerator& f, uint64_t seed) {
  core::Rng rng = core::Rng(seed).fork(kFactorySalt);
  Workload w;
  const auto stage_digits = fmt::format("{}", f.stages - 1).size();
  auto stage_name = [&](int stage) { return fmt::format("s{:0{}}", stage, stage_digits); };
  std::vector<StageDevices> reach(static_cast<size_t>(f.stages));
  for (int s = 0; s < f.stages; ++s) {
    for (int i = 0; i < f.local_devices; ++i) {
      reach[s][kLocal].push_back(w.devices.size());
      w.devices.push_back(dimmer(fmt::format("{}.l{}", stage_name(s), i)));
    }
    if (s + 1 == f.stages) continue;
    for (int i = 0; i < f.shared_devices; ++i) {
      reach[s][kNeighbour].push_back(w.devices.size());
      reach[s + 1][kNeighbour].push_back(w.devices.size());
      w.devices.push_back(dimmer(fmt::format("{}.n{}", stage_name(s), i)));
    }
  }
  std::vector<size_t> globals;
  for (int i = 0; i < f.global_devices; ++i) {
    globals.push_back(w.devices.size());
    w.devices.push_back(dimmer(fmt::format("g{}", i)));
  }
  for (auto& stage : reach) stage[kGlobal] = globals;

  struct Arrival {
    core::Duration at;
    size_t routine;
  };
  std::vector<Arrival> arrivals;
  for (int s = 0; s < f.stages; ++s) {
    const size_t first = w.routines.size();
    for (int r = 0; r < f.routines_per_stage; ++r) {
      w.routines.push_back(draw_routine(rng, f, w, reach[s]));
      w.routines.back().id = fmt::format("{}.r{}", stage_name(s), r);
    }
    std::vector<size_t> runs(static_cast<size_t>(f.routines_per_stage), 0);
    core::Duration at(static_cast<int64_t>(rng.unit() * static_cast<double>(f.command_duration.count())));
    while (at < f.shift) {
      // A routine group keeps kMaxArrivalsPerRoutine finished invocations;
      // the parser's most_arrivals_per_stage check keeps this from binding
      // at the shift lengths it accepts.
      std::vector<size_t> open;
      for (size_t r = 0; r < runs.size(); ++r) {
        if (runs[r] < kMaxArrivalsPerRoutine) open.push_back(r);
      }
      if (open.empty()) break;
      const size_t r = open[rng.below(open.size())];
      ++runs[r];
      arrivals.push_back({at, first + r});
      at += back_to_back(w.routines[first + r]);
    }
  }
  std::stable_sort(arrivals.begin(), arrivals.end(), [](const Arrival& a, const Arrival& b) {
    return a.at != b.at ? a.at < b.at : a.routine < b.routine;
  });
  for (const auto& a : arrivals) w.arrivals.push_back({a.at, a.routine});
  return w;
}

}  // namespace mesh::sim
