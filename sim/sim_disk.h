#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "core/env.h"
#include "core/memory_storage.h"
#include "core/rng.h"
#include "core/storage.h"

namespace mesh::sim {

// A node's disk on virtual time, the simulator's side of
// agent::WriteBehindStorage: changes are visible at once and become durable
// in group commits that take a while, and a crash (power_cut) loses what was
// not yet durable. With it the power-cut sweeps check what the agent relies
// on: nothing a node showed the outside world is lost (core/storage.h, the
// output commit), however slow the disk.
//
// With a zero commit time (the default) it behaves like MemoryStorage: every
// change durable at once, every after_durable() action run at once.
class SimDisk final : public core::Storage {
 public:
  struct Options {
    // Each commit takes a time drawn uniformly from [min_commit, max_commit].
    core::Duration min_commit{0};
    core::Duration max_commit{0};
    // With this probability a commit takes `stall` longer (a busy card).
    double stall_probability = 0.0;
    core::Duration stall{0};
  };

  // The slow disk of the power-cut and stall sweeps (and of
  // MESH_SIM_SLOW_DISKS=1): 2-40 ms per commit, 500 ms more on 2 % of them,
  // a busy SD card's order of magnitude.
  static Options slow() {
    Options options;
    options.min_commit = std::chrono::milliseconds(2);
    options.max_commit = std::chrono::milliseconds(40);
    options.stall_probability = 0.02;
    options.stall = std::chrono::milliseconds(500);
    return options;
  }

  SimDisk() : SimDisk(Options{}) {}
  explicit SimDisk(Options options) : options_(options) {}
  SimDisk(const SimDisk&) = delete;
  SimDisk& operator=(const SimDisk&) = delete;

  // The node incarnation now running on this disk: commits run on its
  // timers, actions on its thread. Call at each boot.
  void attach(core::Env& env);
  // The node crashed (after its Env stopped): the commit in flight lands a
  // random prefix of its changes (FileStorage's renames land in order), the
  // rest and every change queued behind it are lost, and waiting actions are
  // dropped.
  void power_cut(core::Rng& rng);

  // What survives a crash, for tests that damage it or count writes.
  core::MemoryStorage& platter() { return durable_; }
  const core::MemoryStorage& platter() const { return durable_; }
  // The disk completes nothing before `until` (a busy card, a controller
  // hiccup): a commit in flight or started before then ends no earlier.
  void stall_until(core::TimePoint until) { stall_until_ = until; }

  // Changes lost to power cuts so far.
  uint64_t lost_changes() const { return lost_; }

  core::StoredValue read(std::string_view key) const override;
  bool put(std::string_view key, std::string_view value) override;
  bool remove(std::string_view key) override;
  std::vector<std::string> keys(std::string_view prefix) const override;
  void after_durable(Action action) override;

 private:
  struct Change {
    uint64_t seq;
    std::string key;
    std::optional<std::string> value;  // nullopt: remove
  };
  bool synchronous() const { return options_.max_commit <= core::Duration::zero(); }
  void change(std::string_view key, std::optional<std::string_view> value);
  void start_commit();
  void finish_commit();
  void apply(const Change& change);

  Options options_;
  core::MemoryStorage durable_;
  core::Env* env_ = nullptr;
  std::deque<Change> queue_;  // not yet durable, oldest first
  std::map<std::string, std::pair<std::optional<std::string>, uint64_t>, std::less<>> overlay_;
  size_t in_flight_ = 0;      // the front of queue_ being committed
  uint64_t issued_ = 0;
  uint64_t durable_seq_ = 0;
  std::deque<std::pair<uint64_t, Action>> waiting_;
  uint64_t lost_ = 0;
  core::TimePoint stall_until_{};
  // Bumped by power_cut(): a commit timer of an earlier life is ignored.
  uint64_t life_ = 0;
};

}  // namespace mesh::sim
