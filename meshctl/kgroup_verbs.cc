// meshctl verbs about k-groups: kgroups, kgroup, kgroup-write.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    kgroups
        Every k-group this node serves in: target, epoch, generation
        (re-selections within the epoch), this node's role (leader,
        follower, electing, candidate), the term it has promised, the
        leader it follows, the last committed sequence number (applied, on
        a follower), whether the group is sealed (migrated to its
        successor), and the members in priority order.

    kgroup TARGET [--log [--through-leader] [--timeout S]]
        Computes the group of TARGET (device:ID, cluster:ID or
        routine:ID) in the current epoch from this node's membership view
        alone, without messages: its members in priority order with their
        selection scores; the first is the preferred leader. Nodes whose
        member lists agree print the same group. With --json prints
        exactly {"target", "epoch", "leader", "members": [{"name", "id",
        "score"}]}.
        With --log, prints instead the text log this node's replica of
        TARGET's most recent group holds: every committed entry applied
        here, as SEQ TEXT in sequence order (SEQ is the entry's position
        in the target's log, kept across migrations). Exits 1 if this
        node serves in no group of TARGET. With --json: {"target",
        "epoch", "generation", "role", "sealed", "entries": [{"seq",
        "text"}]}. This copy may be stale: a follower applies entries
        after the leader commits them, and a member cut off from the rest
        keeps its old log.
        With --log --through-leader, prints instead the log as the
        group's leader holds it: a linearizable read, which contains
        every write acknowledged before the read was asked, and only
        committed writes. Any agent accepts it (it need not serve in the
        group) and asks the leader, following redirects; the leader
        answers only while it holds its quorum lease, has finished taking
        over, and has applied its commit point, else the agent asks again
        or another member. The first line names the leader and the term
        that answered. --timeout S (default: the agent's
        kgroup.write_timeout_ms) bounds the wait; meshctl exits 1 if no
        leader answered by then (an election, or this node on the small
        side of a partition). With --json: {"target", "epoch",
        "generation", "leader", "term", "entries": [{"seq", "text"}]}.

    kgroup-write TARGET TEXT [--timeout S]
        Appends TEXT (one argument, 1 to 512 bytes) to TARGET's replicated
        text log. Any agent accepts the write and forwards it to the
        group's leader, following redirects and waiting out elections;
        the first write to a target creates its group. Prints the entry's
        sequence number only once the leader committed it at a quorum
        (f + 1 members); with --json {"seq", "leader", "epoch",
        "generation", "attempts"}. --timeout S (default: the agent's
        kgroup.write_timeout_ms) bounds the wait; if the write is not
        acknowledged by then meshctl exits 1, and the write may or may not
        be applied later.
)";

std::string member_label(const mesh::proto::KgroupMember& member) {
  return member.name().empty() ? member.id() : fmt::format("{}({})", member.name(), member.id());
}

// The log entries of a kgroup --log answer, as JSON array elements and as a table.
std::string entries_json(const mesh::proto::KgroupReply& reply) {
  std::string out;
  for (int i = 0; i < reply.records_size(); ++i) {
    out += fmt::format(R"({}{{"seq": {}, "text": {}}})", i == 0 ? "" : ", ", reply.records(i).seq(),
                       json_string(reply.records(i).text()));
  }
  return out;
}

void print_entries(const mesh::proto::KgroupReply& reply) {
  if (reply.records().empty()) return;
  std::vector<std::vector<std::string>> rows = {{"SEQ", "TEXT"}};
  for (const auto& r : reply.records()) rows.push_back({std::to_string(r.seq()), r.text()});
  print_table(rows, {true, false});
}

int run_kgroups(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<mesh::proto::KgroupsReply>(
      connection, line, "kgroups", [](mesh::proto::AdminRequest& r) { r.mutable_kgroups(); },
      &mesh::proto::AdminResponse::has_kgroups, &mesh::proto::AdminResponse::kgroups);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->groups().empty()) {
    std::cout << "this node serves in no k-group\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"TARGET", "EPOCH", "GEN", "ROLE", "TERM", "LEADER", "COMMIT", "SEALED", "MEMBERS"}};
  for (const auto& g : reply->groups()) {
    std::vector<std::string> members;
    for (const auto& m : g.members()) members.push_back(member_label(m));
    rows.push_back({g.target(), std::to_string(g.epoch()), std::to_string(g.generation()), g.role(),
                    std::to_string(g.term()), g.leader().empty() ? "-" : g.leader(), std::to_string(g.commit()),
                    g.sealed() ? "yes" : "no", fmt::format("{}", fmt::join(members, " "))});
  }
  print_table(rows, {false, true, true, false, true, false, true, false, false});
  return kExitOk;
}

int run_kgroup(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 2) {
    return usage_error("kgroup takes one TARGET: device:ID, cluster:ID or routine:ID (e.g. kgroup device:lamp)");
  }
  mesh::proto::AdminRequest request;
  request.mutable_kgroup()->set_target(line.words[1]);
  request.mutable_kgroup()->set_log(line.log);
  double wait_s = line.timeout_s.value_or(kDefaultTimeoutS);
  if (line.through_leader) {
    request.mutable_kgroup()->set_through_leader(true);
    if (line.timeout_s) {
      request.mutable_kgroup()->set_timeout_ms(static_cast<uint32_t>(std::min(*line.timeout_s * 1000.0, 3.6e6)));
    }
    // The agent reports a timeout itself; this only bounds a hung agent.
    wait_s += kPingAnswerGraceS;
  }
  auto response = connection.call(request, wait_s);
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_kgroup()) return unexpected_answer("kgroup");
  const mesh::proto::KgroupReply& reply = response->kgroup();
  if (line.through_leader) {
    if (line.json) {
      std::string out = fmt::format(R"({{"target": {}, "epoch": {}, "generation": {}, "leader": {}, "term": {}, )"
                                    R"("entries": [)",
                                    json_string(reply.target()), reply.log_epoch(), reply.log_generation(),
                                    json_string(reply.log_leader()), reply.log_term());
      std::cout << out << entries_json(reply) << "]}\n";
      return kExitOk;
    }
    std::cout << fmt::format("{} epoch {} generation {}: read through leader {} (term {}), {} entries\n",
                             reply.target(), reply.log_epoch(), reply.log_generation(), reply.log_leader(),
                             reply.log_term(), reply.records_size());
    print_entries(reply);
    return kExitOk;
  }
  if (line.log) {
    if (line.json) {
      std::string out = fmt::format(R"({{"target": {}, "epoch": {}, "generation": {}, "role": {}, "sealed": {}, )"
                                    R"("entries": [)",
                                    json_string(reply.target()), reply.log_epoch(), reply.log_generation(),
                                    json_string(reply.log_role()), reply.log_sealed() ? "true" : "false");
      std::cout << out << entries_json(reply) << "]}\n";
      return kExitOk;
    }
    std::cout << fmt::format("{} epoch {} generation {}: this node is {}{}, {} entries\n", reply.target(),
                             reply.log_epoch(), reply.log_generation(), reply.log_role(),
                             reply.log_sealed() ? " (sealed)" : "", reply.records_size());
    print_entries(reply);
    return kExitOk;
  }
  if (line.json) {
    std::cout << reply.selection_json() << "\n";
    return kExitOk;
  }
  std::cout << fmt::format("{} epoch {}: preferred leader {}\n", reply.target(), reply.epoch(),
                           reply.leader().empty() ? "none (no live members known)" : reply.leader());
  if (reply.members().empty()) return kExitOk;
  std::vector<std::vector<std::string>> rows = {{"NAME", "ID", "SCORE"}};
  for (const auto& m : reply.members()) rows.push_back({m.name().empty() ? "-" : m.name(), m.id(), m.score()});
  print_table(rows, {false, false, false});
  return kExitOk;
}

int run_kgroup_write(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() != 3) {
    return usage_error(
        "kgroup-write takes a TARGET and one TEXT argument (quote text with spaces), e.g. kgroup-write device:lamp "
        "'on at 18:00'");
  }
  if (line.words[2].empty()) return usage_error("kgroup-write: TEXT must not be empty");
  mesh::proto::AdminRequest request;
  auto& write = *request.mutable_kgroup_write();
  write.set_target(line.words[1]);
  write.set_text(line.words[2]);
  double wait_s = kDefaultTimeoutS;
  if (line.timeout_s) {
    write.set_timeout_ms(static_cast<uint32_t>(std::min(*line.timeout_s * 1000.0, 3.6e6)));
    wait_s = *line.timeout_s;
  }
  // The agent reports a timeout itself; this only bounds a hung agent.
  auto response = connection.call(request, wait_s + kPingAnswerGraceS);
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_kgroup_write()) return unexpected_answer("kgroup-write");
  const mesh::proto::KgroupWriteReply& reply = response->kgroup_write();
  if (line.json) {
    std::cout << fmt::format(R"({{"seq": {}, "leader": {}, "epoch": {}, "generation": {}, "attempts": {}}})"
                             "\n",
                             reply.seq(), json_string(reply.leader()), reply.epoch(), reply.generation(),
                             reply.attempts());
    return kExitOk;
  }
  std::cout << fmt::format("committed seq {} (leader {}, epoch {}, generation {}, {} attempts)\n", reply.seq(),
                           reply.leader(), reply.epoch(), reply.generation(), reply.attempts());
  return kExitOk;
}

constexpr Verb kVerbs[] = {
    {"kgroups", run_kgroups},
    {"kgroup", run_kgroup},
    {"kgroup-write", run_kgroup_write},
};

}  // namespace

const VerbFamily& kgroup_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
