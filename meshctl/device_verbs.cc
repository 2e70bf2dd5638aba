// meshctl verbs about devices: devices, device (show, set, watch, add,
// remove).
#include <chrono>
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "meshctl/catalog_changes.h"
#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    devices
        Every device of the mesh's catalog, read through the leader of its
        device group: id, kind, room, state (as ATTR=VALUE), up or down
        (with the reason), the node leading it, and the time of its last
        change. A device whose group cannot be read shows why. With
        --json: {"devices": [{"id", "kind", "room", "floor", "driver",
        "location", "state", "known", "up", "reason", "version", "group",
        "leader", "changed_at_unix_ms", "error"}], "catalog_version"}.

    device ID
    device show ID
        One device, as devices prints it, with every field.

    device set ID ATTR=VALUE... [--timeout S] [--id COMMAND_ID]
               [--lock sla|ola|aggressive] [--ignore-preconditions]
        Runs a command: any agent accepts it, the device's leader actuates
        it through the driver and records the outcome, which is printed.
        Values follow the device's schema: power=on|off, brightness=0..100,
        color_temp=2500..9000, locked=true|false, target=5..35. A command
        is actuated at most once, even across a leader's crash; reusing a
        COMMAND_ID (--id) makes a retry of an unanswered command safe.
        It is ok only once the device shows the values set; a device that
        answers but does not change fails it as not effective.
        The exit status tells the outcome (see EXIT STATUS).
        A command that APEX precondition rules apply to runs as a combo
        (`plan device set` shows what it would need): the agent starts it
        in the group routine:adhoc:ID, whose leader (the combo's pivot)
        locks every device of its precondition graph, reads their states,
        deduces the precondition commands, runs them in graph order and the
        command last, then releases. A failed command aborts it: what ran
        is undone, newest first. A crash of the pivot hands the combo to
        the group's next leader, so it still ends committed or rolled back.
        meshctl waits for that end (default 60 s; --timeout S) and prints
        it with one line per command; `meshctl routine history adhoc:ID`
        shows it too, also after a timeout. --lock picks how the combo
        locks (default: the mesh's [routines] lock_strategy); --id makes a
        retry follow the first run instead of starting another.
        --ignore-preconditions sends the command as written instead.

    device watch [ID...]
        Prints one line per change of the given devices (all, without
        IDs) until interrupted: time, device, state, up/down, leader. With
        --json one object per line, as devices prints a device plus
        "seq".

    device add --file F [--replace]
        Adds the [[device]] tables of the catalog file F (the format of the
        agent's [devices] catalog file) to the mesh-wide catalog. Every
        node sees the change within seconds; it survives crashes and
        restarts and reaches nodes that were down. A device already defined
        differently is refused unless --replace is given. Prints the
        catalog version each device got.

    device remove ID
        Removes a device from the mesh-wide catalog.
)";

std::string changed_text(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const double ago = static_cast<double>(now - unix_ms) / 1000.0;
  return ago < 0 ? "just now" : fmt::format("{} s ago", format_number(ago));
}

std::string up_text(const proto::DeviceRow& d) {
  if (!d.error().empty() && !d.known()) return "unknown";
  if (!d.known()) return "unknown";
  return d.up() ? "up" : "down";
}

std::vector<std::string> table_row(const proto::DeviceRow& d) {
  return {d.id(),
          d.kind(),
          d.room().empty() ? "-" : d.room(),
          d.state().empty() ? "-" : d.state(),
          up_text(d),
          d.leader().empty() ? "-" : d.leader(),
          changed_text(d.changed_at_unix_ms())};
}


int run_devices(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("devices takes no arguments (device ID shows one)");
  proto::AdminRequest request;
  request.mutable_devices()->set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_devices()) return unexpected_answer("devices");
  const proto::DevicesReply& reply = response->devices();
  if (line.json) {
    print_json(reply);
    return kExitOk;
  }
  if (reply.devices().empty()) {
    std::cout << "the catalog has no devices (meshctl device add --file F adds some)\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "KIND", "ROOM", "STATE", "UP", "LEADER", "CHANGED"}};
  std::vector<std::string> problems;
  for (const auto& d : reply.devices()) {
    rows.push_back(table_row(d));
    if (!d.error().empty()) problems.push_back(fmt::format("  {}: {}", d.id(), d.error()));
    if (d.known() && !d.up()) problems.push_back(fmt::format("  {} is down: {}", d.id(), d.reason()));
  }
  print_table(rows, {false, false, false, false, false, false, false});
  for (const auto& p : problems) std::cout << p << "\n";
  return kExitOk;
}

int show_device(AgentConnection& connection, const CommandLine& line, const std::string& id) {
  proto::AdminRequest request;
  request.mutable_devices()->add_ids(id);
  request.mutable_devices()->set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_devices() || response->devices().devices_size() != 1) return unexpected_answer("device");
  const proto::DeviceRow& d = response->devices().devices(0);
  if (line.json) {
    print_json(d);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"id", d.id()},
      {"kind", d.kind()},
      {"room", d.room().empty() ? "-" : d.room()},
      {"floor", d.floor().empty() ? "-" : d.floor()},
      {"location", d.location_size() == 3 ? fmt::format("[{}, {}, {}]", format_number(d.location(0)),
                                                         format_number(d.location(1)), format_number(d.location(2)))
                                          : "-"},
      {"driver", d.driver()},
      {"state", d.state().empty() ? "-" : d.state()},
      {"up", up_text(d) + (d.known() && !d.up() ? " (" + d.reason() + ")" : "")},
      {"version", std::to_string(d.version())},
      {"group", d.group()},
      {"leader", d.leader().empty() ? "-" : d.leader()},
      {"changed", changed_text(d.changed_at_unix_ms())}};
  if (!d.error().empty()) rows.push_back({"error", d.error()});
  print_table(rows, {false, false});
  return kExitOk;
}

int exit_status_of(const std::string& status) {
  if (status == "ok") return kExitOk;
  if (status == "refused") return 3;
  if (status == "device_down") return 4;
  if (status == "driver_error") return 5;
  if (status == "timeout") return 6;
  if (status == "interrupted") return 7;
  if (status == "not_effective") return 10;
  if (status == "failed") return 8;   // a combo stopped
  if (status == "aborted") return 9;  // a combo rolled back
  return kExitFailure;
}

int set_device(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() < 4) {
    return usage_error("device set takes an ID and at least one ATTR=VALUE, e.g. device set hall_light power=on");
  }
  proto::AdminRequest request;
  auto& set = *request.mutable_device_set();
  set.set_id(line.words[2]);
  for (size_t i = 3; i < line.words.size(); ++i) set.add_assignments(line.words[i]);
  set.set_timeout_ms(agent_timeout_ms(line));
  if (line.command_id) set.set_command_id(*line.command_id);
  set.set_ignore_preconditions(line.ignore_preconditions);
  if (line.lock_strategy) set.set_lock_strategy(*line.lock_strategy);
  // A combo may take as long as a routine: the agent waits up to its
  // routines.run_timeout_ms (60 s by default) unless --timeout says.
  auto response = connection.call(request, line.timeout_s ? answer_wait_s(line) : 60.0 + kPingAnswerGraceS);
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_device_set()) return unexpected_answer("device set");
  const proto::DeviceSetReply& reply = response->device_set();
  if (line.json) {
    print_json(reply);
  } else if (!reply.combo().empty()) {
    const bool ok = reply.status() == "ok";
    std::ostream& out = ok ? std::cout : std::cerr;
    out << fmt::format("{}{}: combo {} invocation {} {}{}\n", ok ? "" : "meshctl: device ", set.id(), reply.combo(),
                       reply.invocation().seq(), ok ? "committed" : reply.status(),
                       reply.detail().empty() ? "" : ": " + reply.detail());
    for (size_t i = 0; i < static_cast<size_t>(reply.combo_commands_size()); ++i) {
      out << fmt::format("  {}. {}\n", i + 1, reply.combo_commands(static_cast<int>(i)));
    }
  } else if (reply.status() == "ok") {
    std::cout << fmt::format("{}: ok{} (command {})\n", set.id(),
                             reply.state_after().empty() ? "" : ", now " + reply.state_after(), reply.command_id());
  } else {
    std::cerr << fmt::format("meshctl: device {}: {}: {}{}\n", set.id(), reply.status(), reply.detail(),
                             reply.command_id().empty() ? "" : " (command " + reply.command_id() + ")");
  }
  return exit_status_of(reply.status());
}

volatile std::sig_atomic_t g_interrupted = 0;

int watch_devices(AgentConnection& connection, const CommandLine& line) {
  std::signal(SIGINT, [](int) { g_interrupted = 1; });
  std::signal(SIGTERM, [](int) { g_interrupted = 1; });
  proto::AdminRequest request;
  auto& watch = *request.mutable_device_watch();
  for (size_t i = 2; i < line.words.size(); ++i) watch.add_ids(line.words[i]);
  constexpr uint32_t kPollMs = 1000;  // short polls, so an interrupt ends meshctl within a second
  watch.set_wait_ms(kPollMs);
  uint64_t after = 0;
  while (g_interrupted == 0) {
    watch.set_after(after);
    auto response = connection.call(request, kPollMs / 1000.0 + kDefaultTimeoutS);
    if (g_interrupted != 0) break;
    if (!response) return no_agent(connection, response.error());
    if (!response->error().empty()) return agent_error(response->error());
    if (!response->has_device_watch()) return unexpected_answer("device watch");
    const proto::DeviceWatchReply& reply = response->device_watch();
    for (const auto& change : reply.changes()) {
      const proto::DeviceRow& d = change.device();
      if (line.json) {
        print_json(change);
      } else {
        const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
        char clock[16];
        std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
        std::cout << fmt::format("{} {} {} {}{} leader {}\n", clock, d.id(), d.state().empty() ? "-" : d.state(),
                                 up_text(d), d.known() && !d.up() ? " (" + d.reason() + ")" : "",
                                 d.leader().empty() ? "-" : d.leader());
      }
      std::cout.flush();
    }
    after = std::max(after, reply.last());
  }
  return kExitOk;
}

int run_device(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() < 2) return usage_error("device takes ID, or one of show, set, watch, add, remove");
  const std::string& sub = line.words[1];
  if (sub == "set") return set_device(connection, line);
  if (sub == "watch") return watch_devices(connection, line);
  if (sub == "add") return add_catalog_file(connection, line, CatalogKind::device);
  if (sub == "remove") return remove_catalog_entry(connection, line, CatalogKind::device);
  if (sub == "show") {
    if (line.words.size() != 3) return usage_error("device show takes one ID");
    return show_device(connection, line, line.words[2]);
  }
  if (line.words.size() != 2) return usage_error(fmt::format("unknown device command '{}'", sub));
  return show_device(connection, line, sub);
}

constexpr Verb kVerbs[] = {
    {"devices", run_devices},
    {"device", run_device},
};

}  // namespace

const VerbFamily& device_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
