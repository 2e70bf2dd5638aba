// meshctl verbs about routines: routine (add, remove, enable, disable).
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    routine add --file F [--replace]
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

double wait_of(const CommandLine& line) { return line.timeout_s.value_or(kDefaultTimeoutS) + kPingAnswerGraceS; }

uint32_t timeout_ms(const CommandLine& line) {
  return line.timeout_s ? static_cast<uint32_t>(std::min(*line.timeout_s * 1000.0, 3.6e6)) : 0;
}

int add_routines(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 2 || !line.file) {
    return usage_error(
        "routine add takes --file F (a catalog file of [[routine]] tables), e.g. routine add --file night.toml");
  }
  std::ifstream in(*line.file, std::ios::binary);
  if (!in) return usage_error(fmt::format("routine add: cannot read {}", *line.file));
  std::ostringstream text;
  text << in.rdbuf();
  proto::AdminRequest request;
  auto& add = *request.mutable_routine_add();
  add.set_catalog(text.str());
  add.set_source(*line.file);
  add.set_replace(line.replace);
  add.set_timeout_ms(timeout_ms(line));
  auto response = connection.call(request, wait_of(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_routine_add()) return unexpected_answer("routine add");
  int status = kExitOk;
  if (line.json) print_json(response->routine_add());
  for (const auto& v : response->routine_add().verdicts()) {
    if (v.refused()) status = kExitFailure;
    if (line.json) continue;
    if (v.refused()) {
      std::cerr << fmt::format("meshctl: routine {} refused: {}\n", v.id(), v.detail());
    } else {
      std::cout << fmt::format("routine {} added as catalog version {}\n", v.id(), v.version());
    }
  }
  return status;
}

// Prints the verdict on a change of one routine: `done` says what happened
// ("removed", "enabled", ...), `doing` what was refused ("removing", ...).
int report(const CommandLine& line, const proto::CatalogVerdict& v, const google::protobuf::Message& reply,
           std::string_view done, std::string_view doing) {
  if (line.json) {
    print_json(reply);
  } else if (v.refused()) {
    std::cerr << fmt::format("meshctl: {} routine {} refused: {}\n", doing, v.id(), v.detail());
  } else {
    std::cout << fmt::format("routine {} {} as catalog version {}\n", v.id(), done, v.version());
  }
  return v.refused() ? kExitFailure : kExitOk;
}

int remove_routine(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 3) return usage_error("routine remove takes one ID");
  proto::AdminRequest request;
  request.mutable_routine_remove()->set_id(line.words[2]);
  request.mutable_routine_remove()->set_timeout_ms(timeout_ms(line));
  auto response = connection.call(request, wait_of(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_routine_remove()) return unexpected_answer("routine remove");
  return report(line, response->routine_remove().verdict(), response->routine_remove(), "removed", "removing");
}

int enable_routine(AgentConnection& connection, const CommandLine& line, bool enabled) {
  const std::string_view verb = enabled ? "enable" : "disable";
  if (line.words.size() != 3) return usage_error(fmt::format("routine {} takes one ID", verb));
  proto::AdminRequest request;
  request.mutable_routine_enable()->set_id(line.words[2]);
  request.mutable_routine_enable()->set_enabled(enabled);
  request.mutable_routine_enable()->set_timeout_ms(timeout_ms(line));
  auto response = connection.call(request, wait_of(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_routine_enable()) return unexpected_answer(fmt::format("routine {}", verb));
  return report(line, response->routine_enable().verdict(), response->routine_enable(),
                enabled ? "enabled" : "disabled", enabled ? "enabling" : "disabling");
}

int run_routine(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() < 2) return usage_error("routine takes one of add, remove, enable, disable");
  const std::string& sub = line.words[1];
  if (sub == "add") return add_routines(connection, line);
  if (sub == "remove") return remove_routine(connection, line);
  if (sub == "enable") return enable_routine(connection, line, true);
  if (sub == "disable") return enable_routine(connection, line, false);
  return usage_error(fmt::format("unknown routine command '{}' (add, remove, enable, disable)", sub));
}

constexpr Verb kVerbs[] = {
    {"routine", run_routine},
};

}  // namespace

const VerbFamily& routine_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
