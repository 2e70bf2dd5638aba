// meshctl: the command-line client of a running meshagent, over its admin
// Unix socket (length-prefixed AdminRequest/AdminResponse frames). This file
// parses the command line, assembles --help and dispatches to the verbs;
// each verb family lives in its own file (see verbs.h).
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshctl/client.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr const char* kDefaultSocket = "/run/meshagent/admin.sock";
constexpr const char* kSocketEnv = "MESHCTL_SOCKET";

// The verb families in the order --help documents them. A new family is one
// file (see verbs.h) and one line here.
std::span<const VerbFamily* const> families() {
  static const VerbFamily* const table[] = {
      &node_verbs(),   &routing_verbs(), &membership_verbs(), &lock_verbs(),
      &kgroup_verbs(), &device_verbs(),  &routine_verbs(),    &precondition_verbs(),
  };
  return table;
}

// --help: this head, each family's COMMANDS entries (a blank line after
// each), then this tail.
constexpr std::string_view kHelpHead = R"(NAME
    meshctl - query and control a running meshagent

SYNOPSIS
    meshctl [--socket PATH] [--json] [--timeout S] COMMAND [ARGS]
    meshctl --help

DESCRIPTION
    meshctl talks to the meshagent running on this machine over its admin
    Unix socket. Each command sends one request (ping sends one per echo)
    and prints the agent's answer, for people by default or as one JSON
    object with --json.

COMMANDS
)";

constexpr std::string_view kHelpTail = R"(    help
        Prints this text.

OPTIONS
    --socket PATH
        The agent's admin socket. Default: $MESHCTL_SOCKET, else
        /run/meshagent/admin.sock (the agent's admin.socket setting).

    --json
        Prints exactly one JSON object per command, with the protobuf field
        names of proto/admin.proto: StatusReply for status, MetricsReply
        for metrics, LogLevelReply for log, PingSummary for ping,
        NeighborsReply for neighbors, RoutesReply for routes, e.g.
        {"routes": [{"destination": "10.0.0.5", "next_hop": "10.0.0.2",
        "hops": 4}]}, TopologyReply for topology and MembersReply for
        members, e.g. {"members": [{"name": "n1", "id": "10.0.0.1",
        "state": "alive", "incarnation": "0", "hops": 1, ...}]}
        (incarnation is a string: protobuf's JSON form of uint64).
        PreconditionsReply for preconditions and PlanReply for plan, e.g.
        {"plans": [{"command": "garden_sprinkler power=on", "subject",
        "vertices", "edges", "depth", "stages": [{"steps": [{"action":
        "set", "device", "attribute", "value", "condition", "vertex",
        "after", "rules", "subject"}]}], "command_count", "error"}],
        "notes"}.

    --all
        members: also list failed and left members.

    --log
        kgroup: print this node's copy of the target's log.

    --through-leader
        kgroup --log: print the log as the group's leader holds it (a
        linearizable read) instead of this node's copy.

    --timeout S
        Seconds to wait for the agent's answer (default 10). For ping, the
        agent waits S seconds for each echo (default: its ping_timeout)
        and meshctl 2 seconds more for the agent's report.

    --wait
        routine run: wait for the invocation to end and exit with its
        outcome (default wait: the agent's routines.run_timeout_ms, 60 s).

    --ignore-preconditions
        device set: send the command even though precondition rules apply
        to it; their precondition commands are not run.

    --lock sla|ola|aggressive
        device set, when precondition rules apply: how the combo locks its
        devices (default: the mesh's [routines] lock_strategy). sla and
        ola are APEX's conservative strategy, aggressive its aggressive one.

    -h, --help
        Prints this text.

EXIT STATUS
    0   the command succeeded; for ping, at least one reply came back.
    1   the agent reported an error, no echo was answered, or no agent
        answers at the socket.
    2   the command line is wrong.
    For lock, once the resource is granted: the status of CMD. For
    kgroup-write, 1 also when the write was not acknowledged in time.
    For device set, the command's outcome: 0 ok (for a combo: committed),
    3 refused (outside the device's schema, or rules that cannot be
    applied), 4 device down, 5 driver error, 6 the device did not
    answer in time, 7 interrupted (its leader died while actuating: it may
    or may not have happened), 10 not effective (the device answered but
    never showed the values set: a stuck actuator); for a combo, 8 it
    stopped (a lock was lost) and 9 it was aborted and rolled back; 1 if
    no outcome arrived in time. For device
    add, device remove, routine add, remove, enable and disable, and
    precondition add and remove, 1 if any change was refused. For plan, 1
    if a command cannot be planned (rules that conflict or form a cycle,
    no value to choose); the plans that can be are still printed. For
    routine run --wait, the invocation's
    outcome: 0 every command ok, 8 it ran but a command failed, 9 it was
    aborted (its definition changed or was removed); 1 if it did not end
    in time.

ENVIRONMENT
    MESHCTL_SOCKET
        The admin socket to use when --socket is not given.

EXAMPLES
    meshctl status
    meshctl --json metrics
    meshctl log debug routing
    meshctl log info
    meshctl ping 10.0.0.2 --count 5 --interval 0.2
    meshctl routes
    meshctl --json neighbors
    meshctl members --all
    meshctl kgroup device:lamp
    meshctl kgroup-write device:lamp 'on at 18:00' --timeout 5
    meshctl --json kgroup device:lamp --log
    meshctl kgroup device:lamp --log --through-leader --timeout 5
    meshctl kgroups
    meshctl devices
    meshctl device set hall_light power=on brightness=30 --timeout 5
    meshctl device watch hall_light hall_motion
    meshctl device add --file new-devices.toml
    meshctl routine add --file night-routines.toml
    meshctl routine disable night_hall
    meshctl routines
    meshctl routine run all_off --wait
    meshctl routine history night_hall
    meshctl precondition add --file rules.toml
    meshctl preconditions
    meshctl plan device set garden_sprinkler power=on
    meshctl --json plan routine night_hall
    meshctl lock pump --timeout 30 -- sh -c 'echo "token $MESH_FENCING_TOKEN"'
    MESHCTL_SOCKET=/tmp/mesh/n1/admin.sock meshctl status
)";

std::string help_text() {
  std::string text(kHelpHead);
  for (const VerbFamily* family : families()) {
    text += family->help;
    text += "\n";
  }
  text += kHelpTail;
  return text;
}

const Verb* find_verb(std::string_view name) {
  for (const VerbFamily* family : families()) {
    for (const Verb& verb : family->verbs) {
      if (verb.name == name || (!verb.alias.empty() && verb.alias == name)) return &verb;
    }
  }
  return nullptr;
}

// "status, metrics, ...": every verb in --help order, for usage errors.
std::string verb_list() {
  std::vector<std::string_view> names;
  for (const VerbFamily* family : families()) {
    for (const Verb& verb : family->verbs) names.push_back(verb.name);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

std::optional<double> parse_seconds(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || errno != 0 || !std::isfinite(value) || value < 0) {
    return std::nullopt;
  }
  return value;
}

std::optional<unsigned> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  return value;
}

Expected<CommandLine, std::string> parse_command_line(int argc, char** argv) {
  CommandLine line;
  if (const char* env = std::getenv(kSocketEnv); env != nullptr && *env != '\0') {
    line.socket = env;
  } else {
    line.socket = kDefaultSocket;
  }
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      line.words.emplace_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      line.dash_dash = line.words.size();
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      line.help = true;
      continue;
    }
    if (arg == "--json") {
      line.json = true;
      continue;
    }
    if (arg == "--all") {
      line.all = true;
      continue;
    }
    if (arg == "--log") {
      line.log = true;
      continue;
    }
    if (arg == "--through-leader") {
      line.through_leader = true;
      continue;
    }
    if (arg == "--prometheus") {
      line.prometheus = true;
      continue;
    }
    if (arg == "--replace") {
      line.replace = true;
      continue;
    }
    if (arg == "--wait") {
      line.wait = true;
      continue;
    }
    if (arg == "--ignore-preconditions") {
      line.ignore_preconditions = true;
      continue;
    }
    // Options with a value: "--name VALUE" or "--name=VALUE".
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (name != "--socket" && name != "--timeout" && name != "--count" && name != "--interval" && name != "--file" &&
        name != "--id" && name != "--lock") {
      return Unexpected(fmt::format("unknown option '{}'", arg));
    }
    if (!value) {
      if (i + 1 >= argc) return Unexpected(fmt::format("option {} needs a value", name));
      value = argv[++i];
    }
    if (name == "--socket") {
      if (value->empty()) return Unexpected(std::string("--socket needs a path"));
      line.socket = *value;
    } else if (name == "--file") {
      if (value->empty()) return Unexpected(std::string("--file needs a path"));
      line.file = std::string(*value);
    } else if (name == "--lock") {
      if (*value != "sla" && *value != "ola" && *value != "aggressive") {
        return Unexpected(fmt::format("--lock wants sla, ola or aggressive, not '{}'", *value));
      }
      line.lock_strategy = std::string(*value);
    } else if (name == "--id") {
      if (value->empty()) return Unexpected(std::string("--id needs a command id"));
      line.command_id = std::string(*value);
    } else if (name == "--timeout") {
      line.timeout_s = parse_seconds(*value);
      if (!line.timeout_s || *line.timeout_s <= 0) {
        return Unexpected(fmt::format("--timeout wants a positive number of seconds, not '{}'", *value));
      }
    } else if (name == "--count") {
      line.count = parse_count(*value);
      if (!line.count || *line.count == 0) {
        return Unexpected(fmt::format("--count wants a positive whole number, not '{}'", *value));
      }
    } else {
      line.interval_s = parse_seconds(*value);
      if (!line.interval_s) {
        return Unexpected(fmt::format("--interval wants a number of seconds, not '{}'", *value));
      }
    }
  }
  return line;
}

int run(int argc, char** argv) {
  auto parsed = parse_command_line(argc, argv);
  if (!parsed) return usage_error(parsed.error());
  const CommandLine& line = *parsed;
  if (line.help || (!line.words.empty() && line.words[0] == "help")) {
    std::cout << help_text();
    return kExitOk;
  }
  if (line.words.empty()) return usage_error(fmt::format("no command given ({})", verb_list()));
  const std::string& command = line.words[0];
  if ((line.count || line.interval_s) && command != "ping") {
    return usage_error("--count and --interval apply to ping only");
  }
  if (line.all && command != "members") return usage_error("--all applies to members only");
  if (line.log && command != "kgroup") return usage_error("--log applies to kgroup only");
  if (line.through_leader && (command != "kgroup" || !line.log)) {
    return usage_error("--through-leader applies to kgroup TARGET --log only");
  }
  if (line.prometheus && command != "metrics") return usage_error("--prometheus applies to metrics only");
  const std::string sub =
      line.words.size() > 1 && (command == "device" || command == "routine" || command == "precondition")
          ? line.words[1]
          : std::string();
  if ((line.file || line.replace) && sub != "add") {
    return usage_error("--file and --replace apply to device add, routine add and precondition add only");
  }
  if (line.command_id && (command != "device" || sub != "set")) return usage_error("--id applies to device set only");
  if (line.wait && (command != "routine" || sub != "run")) return usage_error("--wait applies to routine run only");
  if (line.ignore_preconditions && (command != "device" || sub != "set")) {
    return usage_error("--ignore-preconditions applies to device set only");
  }
  if (line.lock_strategy && (command != "device" || sub != "set"))
    return usage_error("--lock applies to device set only");
  if (line.lock_strategy && line.ignore_preconditions) {
    return usage_error("--lock chooses how a combo locks its devices; with --ignore-preconditions none runs");
  }
  const Verb* verb = find_verb(command);
  if (verb == nullptr) return usage_error(fmt::format("unknown command '{}' ({})", command, verb_list()));
  AgentConnection connection(line.socket);
  return verb->run(connection, line);
}

}  // namespace
}  // namespace mesh::meshctl

int main(int argc, char** argv) { return mesh::meshctl::run(argc, argv); }
