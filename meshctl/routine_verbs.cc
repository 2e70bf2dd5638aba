// meshctl verbs about routines: routines, routine (ID, run, history, add,
// remove, enable, disable).
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/node_id.h"
#include "meshctl/catalog_changes.h"
#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    routines
        One line per routine of the mesh-wide catalog: id, enabled, the
        phase of its newest invocation, its group's leader, when it last
        ran and when it may be triggered again (its minimum re-trigger
        interval after the last automatic trigger). Each routine is read
        through its group's leader.

    routine ID
        One routine in full: trigger, lock strategy, the devices it locks,
        the mesh-wide resources it takes with Camera (uses), its commands
        in order (each with its duration, the undo values a rollback sets
        and whether it is best effort), leader, and its invocations still
        running with the resources they hold (fencing token, node holding
        the grant).

    routine run ID [--wait]
        Runs the routine now, whatever its trigger says. Without --wait,
        prints the invocation's number once the routine's group committed
        it; with --wait, waits for its end and exits with its outcome
        (see EXIT STATUS).

    routine history [ID]
        Every remembered invocation (the newest 32 per routine) of ID, or
        of every routine: when it was triggered, how long it waited for
        its locks, when its commands started and when it ended, the
        resources it held, why it stopped if a lock or resource was lost,
        and each command's outcome. The lock wait is SafeHome's wait
        (trigger to every lock held); the metrics line gives its other
        measures: end to end (trigger to end), the routine's ideal run
        (its commands back to back, with their durations) and the
        overhead (end to end / ideal run), both only for an invocation
        that ran every command, and the commands its rollback undid or
        tried to. Under visibility "ev" it also shows the invocation's
        serial key (its place in the serial order), how long placing it
        in its devices' lineages took, and how often a device refused
        its key (re-keyed).

    routine add --file F [--replace]
        Adds the [[routine]] tables of the catalog file F (the format of
        the agent's [devices] catalog file) to the mesh-wide catalog. A
        routine's trigger and commands are checked against the mesh's
        devices first: an unknown device or attribute, or a value the
        device does not take, is reported with its file, line and key, and
        a mistake inside a trigger with its line and column. Every node
        sees the change within seconds; it survives crashes and restarts
        and reaches nodes that were down. A routine already defined
        differently is refused unless --replace is given. Prints the
        catalog version each routine got.

    routine remove ID
        Removes a routine from the mesh-wide catalog (a routine of the
        catalog file too: the removal hides it).

    routine enable ID
    routine disable ID
        Lets the routine run again when its trigger holds, or stops it
        from running until enabled; the definition stays. The flag is
        part of the mesh-wide catalog like the definition, and a later
        routine add --replace sets it anew from the file.
)";

// routine run --wait: the invocation's outcome.
constexpr int kExitCommandFailed = 8;
constexpr int kExitAborted = 9;

int enable_routine(AgentConnection& connection, const CommandLine& line, bool enabled) {
  const std::string_view verb = enabled ? "enable" : "disable";
  if (line.words.size() != 3) return usage_error(fmt::format("routine {} takes one ID", verb));
  proto::AdminRequest request;
  request.mutable_routine_enable()->set_id(line.words[2]);
  request.mutable_routine_enable()->set_enabled(enabled);
  request.mutable_routine_enable()->set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_routine_enable()) return unexpected_answer(fmt::format("routine {}", verb));
  return report_verdict(line, CatalogKind::routine, response->routine_enable().verdict(), response->routine_enable(),
                        enabled ? "enabled" : "disabled", enabled ? "enabling" : "disabling");
}

int64_t unix_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// "12 s ago", "in 3 s", "-".
std::string relative(int64_t unix_us) {
  if (unix_us <= 0) return "-";
  const double delta = static_cast<double>(unix_now_us() - unix_us) / 1e6;
  if (delta >= 0) return fmt::format("{} s ago", format_number(delta));
  return fmt::format("in {} s", format_number(-delta));
}

std::string phase_text(proto::RoutinePhase phase) {
  switch (phase) {
    case proto::PHASE_NOT_TRIGGERED:
      return "not triggered";
    case proto::PHASE_ACQUIRING_LOCKS:
      return "acquiring locks";
    case proto::PHASE_EXECUTING:
      return "executing";
    case proto::PHASE_RELEASING_LOCKS:
      return "releasing locks";
    case proto::PHASE_DONE:
      return "done";
    default:
      return "unknown";
  }
}

std::string outcome_text(proto::InvocationOutcome outcome) {
  switch (outcome) {
    case proto::INVOCATION_OK:
      return "ok";
    case proto::INVOCATION_FAILED:
      return "failed";
    case proto::INVOCATION_ABORTED:
      return "aborted";
    default:
      return "running";
  }
}

std::string status_text(proto::CommandStatus status) {
  switch (status) {
    case proto::COMMAND_OK:
      return "ok";
    case proto::COMMAND_REFUSED:
      return "refused";
    case proto::COMMAND_DEVICE_DOWN:
      return "device down";
    case proto::COMMAND_DRIVER_ERROR:
      return "driver error";
    case proto::COMMAND_TIMEOUT:
      return "timeout";
    case proto::COMMAND_INTERRUPTED:
      return "interrupted";
    case proto::COMMAND_FENCED:
      return "fenced";
    case proto::COMMAND_NOT_EFFECTIVE:
      return "not effective";
    default:
      return "pending";
  }
}

std::string seconds_between(int64_t from_us, int64_t to_us) {
  if (from_us <= 0 || to_us <= 0) return "-";
  return fmt::format("{} s", format_number(static_cast<double>(to_us - from_us) / 1e6));
}

std::optional<proto::RoutinesReply> read_routines(AgentConnection& connection, const CommandLine& line,
                                                  const std::vector<std::string>& ids, int& status) {
  proto::AdminRequest request;
  for (const auto& id : ids) request.mutable_routines()->add_ids(id);
  request.mutable_routines()->set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) {
    status = no_agent(connection, response.error());
    return std::nullopt;
  }
  if (!response->error().empty()) {
    status = agent_error(response->error());
    return std::nullopt;
  }
  if (!response->has_routines()) {
    status = unexpected_answer("routines");
    return std::nullopt;
  }
  return response->routines();
}

int run_routines(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("routines takes no arguments (routine ID shows one)");
  int status = kExitOk;
  const auto reply = read_routines(connection, line, {}, status);
  if (!reply) return status;
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->routines().empty()) {
    std::cout << "the catalog has no routines (meshctl routine add --file F adds some)\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "ENABLED", "STATE", "LEADER", "LAST RUN", "NEXT ELIGIBLE"}};
  std::vector<std::string> problems;
  for (const auto& r : reply->routines()) {
    std::string state = "idle";
    int64_t last_run = 0;
    int64_t last_automatic = 0;
    for (const auto& i : r.invocations()) {
      last_run = std::max(last_run, i.triggered_at_us());
      if (!i.manual()) last_automatic = std::max(last_automatic, i.triggered_at_us());
      if (i.phase() != proto::PHASE_DONE) state = phase_text(i.phase());
    }
    if (!r.error().empty()) state = "unknown";
    const int64_t eligible = last_automatic + static_cast<int64_t>(r.min_retrigger_ms()) * 1000;
    rows.push_back({r.id(), r.enabled() ? "yes" : "no", state, r.leader().empty() ? "-" : r.leader(),
                    relative(last_run), last_automatic == 0 || eligible <= unix_now_us() ? "now" : relative(eligible)});
    if (!r.error().empty()) problems.push_back(fmt::format("  {}: {}", r.id(), r.error()));
    if (!r.problem().empty()) problems.push_back(fmt::format("  {} cannot run: {}", r.id(), r.problem()));
  }
  print_table(rows, {false, false, false, false, false, false});
  for (const auto& p : problems) std::cout << p << "\n";
  return kExitOk;
}

std::string seconds_text(uint64_t us) { return fmt::format("{} s", format_number(static_cast<double>(us) / 1e6)); }

// SafeHome's latency metrics (the agent computes them,
// routine/invocation_metrics.h) but the wait, which the line above shows as
// the lock wait: "end to end 2.45 s, ideal run 2.1 s, overhead 1.17,
// stretch 1.05, rollback 1 command"; what is not known is left out.
std::string metrics_text(const proto::InvocationMetricsMsg& m) {
  std::vector<std::string> parts;
  if (m.has_end_to_end_us()) parts.push_back("end to end " + seconds_text(m.end_to_end_us()));
  if (m.has_back_to_back_us()) parts.push_back("ideal run " + seconds_text(m.back_to_back_us()));
  if (m.has_latency_overhead()) parts.push_back("overhead " + format_number(m.latency_overhead()));
  if (m.has_stretch()) parts.push_back("stretch " + format_number(m.stretch()));
  if (m.rollback_commands() > 0) {
    parts.push_back(fmt::format("rollback {} command{}", m.rollback_commands(), m.rollback_commands() == 1 ? "" : "s"));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

void print_invocation(const proto::InvocationMsg& i, const proto::RoutineRow& r) {
  std::cout << fmt::format("invocation {} ({}): {}{}\n", i.seq(), i.manual() ? "run by hand" : "triggered",
                           i.phase() == proto::PHASE_DONE ? outcome_text(i.outcome()) : phase_text(i.phase()),
                           i.detail().empty() ? "" : ": " + i.detail());
  std::cout << fmt::format("  triggered {}, lock wait {}, executing {}, ended {}\n", relative(i.triggered_at_us()),
                           seconds_between(i.triggered_at_us(), i.locked_at_us()),
                           seconds_between(i.locked_at_us(), i.releasing_at_us()),
                           i.ended_at_us() > 0 ? relative(i.ended_at_us()) : "-");
  for (const auto& m : r.metrics()) {
    if (m.seq() != i.seq()) continue;
    if (const std::string text = metrics_text(m); !text.empty()) std::cout << "  metrics: " << text << "\n";
  }
  if (i.serial_key_us() != 0) {
    // EV: where it stands in the serial order, and what placing it cost.
    std::cout << fmt::format(
        "  serial key {}{}{}\n", i.serial_key_us(),
        i.placed_at_us() > 0
            ? ", placed in its devices' lineages in " + seconds_between(i.keyed_at_us(), i.placed_at_us())
            : std::string(", not placed yet"),
        i.rekeys() > 0 ? fmt::format(", re-keyed {} time{}", i.rekeys(), i.rekeys() == 1 ? "" : "s") : std::string());
  }
  if (i.resources_size() > 0) {
    std::vector<std::string> held;
    for (const auto& resource : i.resources()) {
      held.push_back(fmt::format("{} (token {}, at {})", resource.resource(), resource.token(),
                                 core::NodeId(resource.holder()).to_string()));
    }
    std::cout << fmt::format("  resources: {}\n", fmt::join(held, ", "));
  }
  if (!i.stop_reason().empty()) std::cout << fmt::format("  stopped: {}\n", i.stop_reason());
  if (!i.abort_reason().empty()) std::cout << fmt::format("  aborted: {}\n", i.abort_reason());
  // An invocation that ran precondition commands numbers them too.
  const proto::ComboCommands* combo = nullptr;
  for (const auto& c : r.combos()) {
    if (c.seq() == i.seq()) combo = &c;
  }
  const auto& texts = combo != nullptr ? combo->commands() : r.commands();
  const auto what = [&texts](uint32_t index) {
    return static_cast<int>(index) < texts.size() ? texts[static_cast<int>(index)]
                                                  : fmt::format("command {}", index + 1);
  };
  for (const auto& command : i.commands()) {
    std::cout << fmt::format("  {}. {}: {}{}\n", command.index() + 1, what(command.index()),
                             status_text(command.status()),
                             command.detail().empty() ? "" : " (" + command.detail() + ")");
  }
  // The rollback, in the order it ran: newest command first.
  for (auto undo = i.undone().rbegin(); undo != i.undone().rend(); ++undo) {
    std::cout << fmt::format("  undo {}.: {}{}\n", undo->index() + 1, status_text(undo->status()),
                             undo->detail().empty() ? "" : " (" + undo->detail() + ")");
  }
}

int show_routine(AgentConnection& connection, const CommandLine& line, const std::string& id) {
  int status = kExitOk;
  const auto reply = read_routines(connection, line, {id}, status);
  if (!reply) return status;
  if (reply->routines_size() != 1) return unexpected_answer("routine");
  const proto::RoutineRow& r = reply->routines(0);
  if (line.json) {
    print_json(r);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"id", r.id()},
      {"enabled", r.enabled() ? "yes" : "no"},
      {"trigger", r.trigger()},
      {"min retrigger", fmt::format("{} s", format_number(r.min_retrigger_ms() / 1000.0))},
      {"visibility", r.visibility()},
      {"lock", r.lock()},
      {"devices", fmt::format("{}", fmt::join(r.devices(), ", "))},
      {"uses", r.uses().empty() ? "-" : fmt::format("{}", fmt::join(r.uses(), ", "))},
      {"leader", r.leader().empty() ? "-" : r.leader()},
  };
  for (int c = 0; c < r.commands_size(); ++c) rows.push_back({fmt::format("command {}", c + 1), r.commands(c)});
  print_table(rows, {false, false});
  if (!r.error().empty()) std::cout << "read failed: " << r.error() << "\n";
  if (!r.problem().empty()) std::cout << "cannot run: " << r.problem() << "\n";
  for (const auto& i : r.invocations()) {
    if (i.phase() != proto::PHASE_DONE) print_invocation(i, r);
  }
  return kExitOk;
}

int routine_history(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() > 3) return usage_error("routine history takes at most one ID");
  std::vector<std::string> ids;
  if (line.words.size() == 3) ids.push_back(line.words[2]);
  int status = kExitOk;
  const auto reply = read_routines(connection, line, ids, status);
  if (!reply) return status;
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  for (const auto& r : reply->routines()) {
    std::cout << fmt::format(
        "routine {}: {} invocations remembered{}{}\n", r.id(), r.invocations_size() + r.omitted_invocations(),
        r.omitted_invocations() == 0
            ? ""
            : fmt::format(", the {} oldest not shown (one answer's size)", r.omitted_invocations()),
        r.error().empty() ? "" : " (read failed: " + r.error() + ")");
    for (const auto& i : r.invocations()) print_invocation(i, r);
  }
  return kExitOk;
}

int run_now(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 3) return usage_error("routine run takes one ID");
  proto::AdminRequest request;
  request.mutable_routine_run()->set_id(line.words[2]);
  request.mutable_routine_run()->set_wait(line.wait);
  request.mutable_routine_run()->set_timeout_ms(agent_timeout_ms(line));
  // The agent waits for the invocation's end up to its own run timeout.
  const double wait =
      line.timeout_s ? answer_wait_s(line) : (line.wait ? 60.0 + kPingAnswerGraceS : answer_wait_s(line));
  auto response = connection.call(request, wait);
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_routine_run()) return unexpected_answer("routine run");
  const proto::InvocationMsg& i = response->routine_run().invocation();
  if (line.json) {
    print_json(response->routine_run());
  } else if (!line.wait) {
    std::cout << fmt::format("routine {} invocation {} started ({})\n", line.words[2], i.seq(), phase_text(i.phase()));
  } else {
    std::cout << fmt::format("routine {} invocation {} {}{}\n", line.words[2], i.seq(), outcome_text(i.outcome()),
                             i.detail().empty() ? "" : ": " + i.detail());
  }
  if (!line.wait) return kExitOk;
  switch (i.outcome()) {
    case proto::INVOCATION_OK:
      return kExitOk;
    case proto::INVOCATION_FAILED:
      return kExitCommandFailed;
    case proto::INVOCATION_ABORTED:
      return kExitAborted;
    default:
      return kExitFailure;
  }
}

int run_routine(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() < 2) {
    return usage_error("routine takes an ID or one of run, history, add, remove, enable, disable");
  }
  const std::string& sub = line.words[1];
  if (sub == "run") return run_now(connection, line);
  if (sub == "history") return routine_history(connection, line);
  if (sub == "add") return add_catalog_file(connection, line, CatalogKind::routine);
  if (sub == "remove") return remove_catalog_entry(connection, line, CatalogKind::routine);
  if (sub == "enable") return enable_routine(connection, line, true);
  if (sub == "disable") return enable_routine(connection, line, false);
  if (sub == "show" && line.words.size() == 3) return show_routine(connection, line, line.words[2]);
  if (line.words.size() == 2) return show_routine(connection, line, sub);
  return usage_error(fmt::format("unknown routine command '{}' (ID, run, history, add, remove, enable, disable)", sub));
}

constexpr Verb kVerbs[] = {
    {"routines", run_routines},
    {"routine", run_routine},
};

}  // namespace

const VerbFamily& routine_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
