#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/kgroup_service.h"
#include "core/env.h"
#include "core/expected.h"
#include "core/metrics.h"
#include "proto/invocation.pb.h"
#include "routine/catalog.h"

namespace mesh::agent {

struct RoutineServiceOptions {
  // `meshctl routine run --wait` waits this long for the invocation's end
  // unless told otherwise.
  core::Duration run_timeout = std::chrono::seconds(60);
  // While waiting, the routine's group is asked this often.
  core::Duration poll_interval = std::chrono::milliseconds(250);
};

// The agent's client side of routines: manual runs and reads of the
// routines' groups (state, history), from any node. Each request is routed
// to the routine group's leader by KgroupService; the routine leaders
// (routine/routine_leaders.h) do the rest.
class RoutineService {
 public:
  using RunCallback = std::function<void(const core::Expected<proto::InvocationMsg, std::string>& result)>;
  struct RoutineRead {
    std::string routine;
    core::NodeId leader;
    std::optional<std::string> error;
    std::vector<proto::InvocationMsg> invocations;  // oldest first
    uint32_t omitted = 0;  // older ones left out of the group's answer (RoutineQueryReply)
  };
  using ReadCallback = std::function<void(const std::vector<RoutineRead>& routines)>;

  RoutineService(core::Env& env, KgroupService& kgroups, const routine::Catalog& catalog, core::Metrics& metrics,
                 RoutineServiceOptions options, core::TimePoint clock_origin);
  RoutineService(const RoutineService&) = delete;
  RoutineService& operator=(const RoutineService&) = delete;
  ~RoutineService();

  // Triggers `routine` by hand (its trigger may say `manual`, or not). The
  // callback gets the invocation once its group committed it, or, with
  // `wait`, once it ended; or an error (unknown routine, no answer in time).
  void run(const std::string& routine, bool wait, core::Duration timeout, RunCallback callback);
  // Runs an ad hoc combo (routine/adhoc_combo.h): `spec`, an adhoc_spec, as
  // an invocation of its own in its subject device's group; the callback
  // gets it once it ended, or an error, as run() with `wait`. A
  // `request_id` already used in that group (a retry) runs nothing new and
  // follows the first; empty: a new one.
  void run_adhoc(const routine::RoutineSpec& spec, const std::string& request_id, core::Duration timeout,
                 RunCallback callback);
  // Reads the invocations of `routines` (empty: every routine of the
  // catalog) through their groups' leaders.
  void read(std::vector<std::string> routines, core::Duration timeout, ReadCallback callback);

  static kgroup::GroupTarget target_of(const std::string& routine) {
    return {kgroup::TargetKind::routine, routine};
  }

 private:
  struct PendingRun;
  // Commits `trigger` (given its request id, a new one if empty, its tag
  // and time here) in `routine`'s group and follows the invocation.
  void start_run(const std::string& routine, proto::RoutineTrigger trigger, std::string request_id, bool wait,
                 core::Duration timeout, RunCallback callback);
  void poll_run(uint64_t id);
  void finish_run(uint64_t id, const core::Expected<proto::InvocationMsg, std::string>& result);

  core::Env& env_;
  KgroupService& kgroups_;
  const routine::Catalog& catalog_;
  RoutineServiceOptions options_;
  core::TimePoint clock_origin_;
  std::map<uint64_t, std::unique_ptr<PendingRun>> runs_;
  uint64_t next_run_ = 1;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  core::Counter& runs_ok_;
  core::Counter& runs_failed_;
};

}  // namespace mesh::agent
