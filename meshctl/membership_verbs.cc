// meshctl verbs about Medley membership: members.
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    members [--all]
        Medley's membership list as this node sees it: name, id, state
        (alive or suspect; with --all also failed and left members, kept
        for membership.failed_retention_s), incarnation, hops away (- when
        no route is known) and the time since the member itself was last
        heard. Lists are weakly consistent: two nodes may disagree briefly.
)";

int run_members(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 1) return usage_error("members takes no arguments (only --all)");
  mesh::proto::AdminRequest request;
  request.mutable_members()->set_all(line.all);
  auto response = connection.call(request, line.timeout_s.value_or(kDefaultTimeoutS));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_members()) return unexpected_answer("members");
  const mesh::proto::MembersReply& reply = response->members();
  if (line.json) {
    print_json(reply);
    return kExitOk;
  }
  if (reply.members().empty()) {
    std::cout << "no members\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"NAME", "ID", "STATE", "INCARNATION", "HOPS", "HEARD"}};
  for (const auto& m : reply.members()) {
    rows.push_back({m.name().empty() ? "-" : m.name(), m.id(), m.state(), std::to_string(m.incarnation()),
                    m.hops() < 0 ? "-" : std::to_string(m.hops()),
                    m.last_heard_s_ago() < 0 ? "-" : fmt::format("{:.1f} s ago", m.last_heard_s_ago())});
  }
  print_table(rows, {false, false, false, true, true, false});
  return kExitOk;
}

// Waits for CMD, whatever signals arrive meanwhile; its exit status as a
// shell reports it.

constexpr Verb kVerbs[] = {
    {"members", run_members},
};

}  // namespace

const VerbFamily& membership_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
