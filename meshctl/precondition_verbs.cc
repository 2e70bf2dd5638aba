// meshctl verbs about APEX precondition rules: preconditions, precondition
// (add, remove), plan (device set, routine).
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "meshctl/catalog_changes.h"
#include "meshctl/output.h"
#include "meshctl/verbs.h"

namespace mesh::meshctl {
namespace {

constexpr std::string_view kHelp = R"(    preconditions
        Every APEX precondition rule of the mesh-wide catalog: id, the
        condition it guards (when), the conditions that must hold first
        (requires), whether it comes from the catalog file or a run-time
        change, and, for a rule that cannot apply now (a device it names
        was removed or changed), why. With --json: {"rules": [{"id",
        "when", "requirements", "in_file", "problem"}],
        "catalog_version"}.

    precondition add --file F [--replace]
        Adds the [[precondition]] tables of the catalog file F (a rules
        file holding only [[precondition]] tables is one) to the mesh-wide
        catalog. Each condition is checked against the mesh's devices: an
        unknown device or attribute, or a value the attribute does not
        take, is reported with its file, line and key. Every node sees the
        change within seconds, as for routine add. A rule already defined
        differently is refused unless --replace is given. Prints the
        catalog version each rule got.

    precondition remove ID
        Removes a rule from the mesh-wide catalog (a rule of the catalog
        file too: the removal hides it).

    plan device set ID ATTR=VALUE...
        Shows what the command would need, without running anything: the
        precondition graph of the condition it makes true, built from the
        catalog's rules, and the combo deduced from the graph and the
        devices' current states (read through their groups' leaders):
        stages in order, each step set (a command to send), hold (already
        true, kept) or check (a reading to verify), with the rules that
        asked for it. Rules that conflict on an attribute, or form a
        cycle, are named, and the exit status is 1. Several ATTR=VALUE are
        planned one by one.

    plan routine ID
        The same for each command of the routine, in order.
)";

// "[1], [2]": the vertices `vertex` must hold before.
std::string dependents_of(const proto::CommandPlanMsg& plan, uint32_t vertex) {
  std::vector<std::string> out;
  for (const auto& edge : plan.edges()) {
    if (edge.precondition() == vertex) out.push_back(fmt::format("[{}]", edge.dependent()));
  }
  return fmt::format("{}", fmt::join(out, ", "));
}

void print_plan(const proto::CommandPlanMsg& plan) {
  std::cout << fmt::format("plan for {} ({})\n", plan.command(), plan.subject());
  if (plan.vertices().empty()) return;
  std::cout << fmt::format("  graph: {} conditions, depth {}\n", plan.vertices_size(), plan.depth());
  for (const auto& vertex : plan.vertices()) {
    if (vertex.subject()) {
      std::cout << fmt::format("    [{}] {}  subject\n", vertex.index(), vertex.condition());
    } else {
      std::cout << fmt::format("    [{}] {}  before {}  ({})\n", vertex.index(), vertex.condition(),
                               dependents_of(plan, vertex.index()), fmt::join(vertex.required_by(), ", "));
    }
  }
  if (plan.stages().empty()) return;
  size_t steps = 0;
  for (const auto& stage : plan.stages()) steps += static_cast<size_t>(stage.steps_size());
  std::cout << fmt::format("  combo: {} steps in {} stages, {} commands\n", steps, plan.stages_size(),
                           plan.command_count());
  std::vector<std::vector<std::string>> rows = {{"STAGE", "ACTION", "STEP", "CONDITION", "WHY"}};
  for (int s = 0; s < plan.stages_size(); ++s) {
    for (const auto& step : plan.stages(s).steps()) {
      const std::string variable = fmt::format("{}.{}", step.device(), step.attribute());
      const std::string what = step.action() == "check" ? variable : fmt::format("{} = {}", variable, step.value());
      const std::string why = step.subject() ? "the command itself"
                                             : fmt::format("before {} ({})", dependents_of(plan, step.vertex()),
                                                           fmt::join(step.rules(), ", "));
      rows.push_back(
          {std::to_string(s + 1), step.action(), what, fmt::format("[{}] {}", step.vertex(), step.condition()), why});
    }
  }
  print_table(rows, {true, false, false, false, false}, "    ");
}

int run_preconditions(AgentConnection& connection, const CommandLine& line) {
  auto reply = simple_call<proto::PreconditionsReply>(
      connection, line, "preconditions", [](proto::AdminRequest& r) { r.mutable_preconditions(); },
      &proto::AdminResponse::has_preconditions, &proto::AdminResponse::preconditions);
  if (!reply) return reply.error();
  if (line.json) {
    print_json(*reply);
    return kExitOk;
  }
  if (reply->rules().empty()) {
    std::cout << "the catalog has no precondition rules (meshctl precondition add --file F adds some)\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"ID", "WHEN", "REQUIRES", "FROM"}};
  std::vector<std::string> problems;
  for (const auto& rule : reply->rules()) {
    rows.push_back({rule.id(), rule.when(), fmt::format("{}", fmt::join(rule.requirements(), ", ")),
                    rule.in_file() ? "file" : "run time"});
    if (!rule.problem().empty()) problems.push_back(fmt::format("  {} cannot apply: {}", rule.id(), rule.problem()));
  }
  print_table(rows, {false, false, false, false});
  for (const auto& p : problems) std::cout << p << "\n";
  return kExitOk;
}

int run_precondition(AgentConnection& connection, const CommandLine& line) {
  if (line.words.size() < 2) return usage_error("precondition takes add --file F or remove ID");
  const std::string& sub = line.words[1];
  if (sub == "add") return add_catalog_file(connection, line, CatalogKind::precondition);
  if (sub == "remove") return remove_catalog_entry(connection, line, CatalogKind::precondition);
  return usage_error(fmt::format("unknown precondition command '{}' (add, remove)", sub));
}

int run_plan(AgentConnection& connection, const CommandLine& line) {
  proto::AdminRequest request;
  proto::PlanRequest& plan = *request.mutable_plan();
  const auto& words = line.words;
  if (words.size() >= 4 && words[1] == "device" && words[2] == "set") {
    plan.mutable_device()->set_id(words[3]);
    for (size_t i = 4; i < words.size(); ++i) plan.mutable_device()->add_assignments(words[i]);
    if (words.size() == 4) return usage_error("plan device set ID takes ATTR=VALUE (e.g. power=on)");
  } else if (words.size() == 3 && words[1] == "routine") {
    plan.set_routine(words[2]);
  } else {
    return usage_error("plan takes device set ID ATTR=VALUE... or routine ID");
  }
  plan.set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  if (!response->has_plan()) return unexpected_answer("plan");
  const proto::PlanReply& reply = response->plan();
  int status = kExitOk;
  for (const auto& p : reply.plans()) {
    if (!p.error().empty()) status = kExitFailure;
  }
  if (line.json) {
    print_json(reply);
    return status;
  }
  for (const auto& p : reply.plans()) {
    print_plan(p);
    if (!p.error().empty()) std::cerr << fmt::format("meshctl: cannot plan {}: {}\n", p.command(), p.error());
  }
  for (const auto& note : reply.notes()) std::cout << "note: " << note << "\n";
  return status;
}

constexpr Verb kVerbs[] = {
    {"preconditions", run_preconditions},
    {"precondition", run_precondition},
    {"plan", run_plan},
};

}  // namespace

const VerbFamily& precondition_verbs() {
  static constexpr VerbFamily family{kHelp, kVerbs};
  return family;
}

}  // namespace mesh::meshctl
