#include "meshctl/catalog_changes.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "meshctl/output.h"

namespace mesh::meshctl {
namespace {

std::string_view name_of(CatalogKind kind) { return kind == CatalogKind::device ? "device" : "routine"; }

}  // namespace

int add_catalog_file(AgentConnection& connection, const CommandLine& line, CatalogKind kind) {
  const std::string_view name = name_of(kind);
  if (line.words.size() != 2 || !line.file) {
    return usage_error(fmt::format("{0} add takes --file F (a catalog file of [[{0}]] tables), e.g. {0} add --file {1}",
                                   name, kind == CatalogKind::device ? "new.toml" : "night.toml"));
  }
  std::ifstream in(*line.file, std::ios::binary);
  if (!in) return usage_error(fmt::format("{} add: cannot read {}", name, *line.file));
  std::ostringstream text;
  text << in.rdbuf();
  proto::AdminRequest request;
  auto& add = kind == CatalogKind::device ? *request.mutable_device_add() : *request.mutable_routine_add();
  add.set_catalog(text.str());
  add.set_source(*line.file);
  add.set_replace(line.replace);
  add.set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  const bool answered = kind == CatalogKind::device ? response->has_device_add() : response->has_routine_add();
  if (!answered) return unexpected_answer(fmt::format("{} add", name));
  const proto::CatalogAddReply& reply =
      kind == CatalogKind::device ? response->device_add() : response->routine_add();
  int status = kExitOk;
  if (line.json) print_json(reply);
  for (const auto& v : reply.verdicts()) {
    if (v.refused()) status = kExitFailure;
    if (line.json) continue;
    if (v.refused()) {
      std::cerr << fmt::format("meshctl: {} {} refused: {}\n", name, v.id(), v.detail());
    } else {
      std::cout << fmt::format("{} {} added as catalog version {}\n", name, v.id(), v.version());
    }
  }
  return status;
}

int remove_catalog_entry(AgentConnection& connection, const CommandLine& line, CatalogKind kind) {
  const std::string_view name = name_of(kind);
  if (line.words.size() != 3) return usage_error(fmt::format("{} remove takes one ID", name));
  proto::AdminRequest request;
  auto& remove = kind == CatalogKind::device ? *request.mutable_device_remove() : *request.mutable_routine_remove();
  remove.set_id(line.words[2]);
  remove.set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  const bool answered = kind == CatalogKind::device ? response->has_device_remove() : response->has_routine_remove();
  if (!answered) return unexpected_answer(fmt::format("{} remove", name));
  const proto::CatalogRemoveReply& reply =
      kind == CatalogKind::device ? response->device_remove() : response->routine_remove();
  return report_verdict(line, kind, reply.verdict(), reply, "removed", "removing");
}

int report_verdict(const CommandLine& line, CatalogKind kind, const proto::CatalogVerdict& verdict,
                   const google::protobuf::Message& reply, std::string_view done, std::string_view doing) {
  if (line.json) {
    print_json(reply);
  } else if (verdict.refused()) {
    std::cerr << fmt::format("meshctl: {} {} {} refused: {}\n", doing, name_of(kind), verdict.id(), verdict.detail());
  } else {
    std::cout << fmt::format("{} {} {} as catalog version {}\n", name_of(kind), verdict.id(), done, verdict.version());
  }
  return verdict.refused() ? kExitFailure : kExitOk;
}

}  // namespace mesh::meshctl
