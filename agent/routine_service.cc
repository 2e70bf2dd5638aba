#include "agent/routine_service.h"

#include <fmt/format.h>

#include "routine/adhoc_combo.h"
#include "routine/device_codec.h"

namespace mesh::agent {

struct RoutineService::PendingRun {
  explicit PendingRun(core::Env& env) : deadline_timer(env), poll_timer(env) {}
  std::string routine;
  std::string request_id;
  bool wait = false;
  core::TimePoint deadline{};
  core::ScopedTimer deadline_timer;
  core::ScopedTimer poll_timer;
  std::string last_problem;
  std::optional<proto::InvocationMsg> latest;
  RunCallback callback;
};

RoutineService::RoutineService(core::Env& env, KgroupService& kgroups, const routine::Catalog& catalog,
                               core::Metrics& metrics, RoutineServiceOptions options, core::TimePoint clock_origin)
    : env_(env),
      kgroups_(kgroups),
      catalog_(catalog),
      options_(options),
      clock_origin_(clock_origin),
      runs_ok_(metrics.counter("routine_client_runs_total", {{"result", "ok"}})),
      runs_failed_(metrics.counter("routine_client_runs_total", {{"result", "failed"}})) {}

RoutineService::~RoutineService() { *alive_ = false; }

void RoutineService::run(const std::string& routine, bool wait, core::Duration timeout, RunCallback callback) {
  if (catalog_.find_routine(routine) == nullptr) {
    callback(core::Unexpected(fmt::format("no routine {} in the catalog (meshctl routines lists them)", routine)));
    return;
  }
  start_run(routine, proto::RoutineTrigger{}, {}, wait, timeout, std::move(callback));
}

void RoutineService::run_adhoc(const routine::RoutineSpec& spec, const std::string& request_id, core::Duration timeout,
                               RunCallback callback) {
  proto::RoutineTrigger trigger;
  *trigger.mutable_adhoc() = routine::to_adhoc_proto(spec);
  start_run(spec.id, std::move(trigger), request_id, true, timeout, std::move(callback));
}

void RoutineService::start_run(const std::string& routine, proto::RoutineTrigger trigger, std::string request_id,
                               bool wait, core::Duration timeout, RunCallback callback) {
  if (timeout <= core::Duration::zero()) timeout = options_.run_timeout;
  const uint64_t id = next_run_++;
  auto pending = std::make_unique<PendingRun>(env_);
  pending->routine = routine;
  pending->request_id = request_id.empty() ? fmt::format("run-{:016x}", env_.rng().next_u64()) : std::move(request_id);
  pending->wait = wait;
  pending->deadline = env_.now() + timeout;
  pending->callback = std::move(callback);
  pending->deadline_timer.start(timeout, [this, id, timeout] {
    const auto it = runs_.find(id);
    if (it == runs_.end()) return;
    const PendingRun& p = *it->second;
    finish_run(id, core::Unexpected(fmt::format(
                       "routine {}: no {} after {:.1f} s (last: {}){}", p.routine,
                       p.latest ? "end" : "invocation", core::to_seconds(timeout),
                       p.last_problem.empty() ? "no answer" : p.last_problem,
                       p.latest ? fmt::format("; invocation {} is still running and will finish", p.latest->seq())
                                : "; it may still be triggered")));
  });
  proto::RoutineUpdate update;
  *update.mutable_trigger() = std::move(trigger);
  update.mutable_trigger()->set_request_id(pending->request_id);
  update.mutable_trigger()->set_manual(true);
  update.mutable_trigger()->set_tag(static_cast<uint32_t>(env_.rng().next_u64()));
  update.mutable_trigger()->set_at_us(
      std::chrono::duration_cast<std::chrono::microseconds>(env_.now() - clock_origin_).count());
  runs_[id] = std::move(pending);
  kgroups_.write(target_of(routine), update.SerializeAsString(), timeout,
                 [this, alive = alive_, id](const auto& written) {
                   if (!*alive || runs_.count(id) == 0) return;
                   if (!written) {
                     finish_run(id, core::Unexpected(fmt::format("not triggered: {}", written.error())));
                     return;
                   }
                   poll_run(id);
                 });
}

void RoutineService::poll_run(uint64_t id) {
  const auto it = runs_.find(id);
  if (it == runs_.end()) return;
  PendingRun& pending = *it->second;
  proto::RoutineQuery query;
  query.set_request_id(pending.request_id);
  kgroups_.read(target_of(pending.routine), query.SerializeAsString(), pending.deadline - env_.now(),
                [this, alive = alive_, id](const auto& read) {
                  if (!*alive) return;
                  const auto found = runs_.find(id);
                  if (found == runs_.end()) return;
                  PendingRun& p = *found->second;
                  if (read) {
                    const auto reply = routine::parse_message<proto::RoutineQueryReply>(read->answer);
                    if (reply && reply->found() && reply->invocations_size() > 0) {
                      p.latest = reply->invocations(0);
                      if (!p.wait || p.latest->phase() == proto::PHASE_DONE) {
                        finish_run(id, *p.latest);
                        return;
                      }
                      p.last_problem = fmt::format("invocation {} is {}", p.latest->seq(),
                                                   proto::RoutinePhase_Name(p.latest->phase()));
                    } else {
                      p.last_problem = "the routine's leader does not know the run (yet)";
                    }
                  } else {
                    p.last_problem = read.error();
                  }
                  p.poll_timer.start(options_.poll_interval, [this, id] { poll_run(id); });
                });
}

void RoutineService::finish_run(uint64_t id, const core::Expected<proto::InvocationMsg, std::string>& result) {
  const auto it = runs_.find(id);
  if (it == runs_.end()) return;
  std::unique_ptr<PendingRun> pending = std::move(it->second);
  runs_.erase(it);
  const bool ok = result && (!pending->wait || result->outcome() == proto::INVOCATION_OK);
  (ok ? runs_ok_ : runs_failed_).add();
  pending->callback(result);
}

void RoutineService::read(std::vector<std::string> routines, core::Duration timeout, ReadCallback callback) {
  if (routines.empty()) {
    for (const auto& [id, spec] : catalog_.routines()) routines.push_back(id);
  }
  struct Gather {
    std::vector<RoutineRead> routines;
    size_t awaiting = 0;
    ReadCallback callback;
  };
  auto gather = std::make_shared<Gather>();
  gather->callback = std::move(callback);
  gather->awaiting = routines.size();
  if (routines.empty()) {
    gather->callback({});
    return;
  }
  proto::RoutineQuery query;
  query.set_all(true);
  const std::string bytes = query.SerializeAsString();
  for (const std::string& routine : routines) {
    kgroups_.read(target_of(routine), bytes, timeout, [alive = alive_, gather, routine](const auto& read) {
      if (!*alive) return;
      RoutineRead entry;
      entry.routine = routine;
      if (!read) {
        entry.error = read.error();
      } else if (auto reply = routine::parse_message<proto::RoutineQueryReply>(read->answer)) {
        entry.leader = read->leader;
        entry.invocations.assign(reply->invocations().begin(), reply->invocations().end());
        entry.omitted = reply->omitted();
      } else {
        entry.error = "malformed answer";
      }
      gather->routines.push_back(std::move(entry));
      if (--gather->awaiting == 0) {
        std::sort(gather->routines.begin(), gather->routines.end(),
                  [](const RoutineRead& a, const RoutineRead& b) { return a.routine < b.routine; });
        gather->callback(gather->routines);
      }
    });
  }
}

}  // namespace mesh::agent
