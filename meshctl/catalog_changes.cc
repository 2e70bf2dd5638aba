#include "meshctl/catalog_changes.h"

#include <fstream>
#include <iostream>
#include <sstream>

#include "meshctl/output.h"

namespace mesh::meshctl {
namespace {

std::string_view name_of(CatalogKind kind) {
  switch (kind) {
    case CatalogKind::device:
      return "device";
    case CatalogKind::routine:
      return "routine";
    case CatalogKind::precondition:
      break;
  }
  return "precondition";
}

std::string_view example_file_of(CatalogKind kind) {
  switch (kind) {
    case CatalogKind::device:
      return "new.toml";
    case CatalogKind::routine:
      return "night.toml";
    case CatalogKind::precondition:
      break;
  }
  return "rules.toml";
}

proto::CatalogAddRequest& add_request_of(proto::AdminRequest& request, CatalogKind kind) {
  switch (kind) {
    case CatalogKind::device:
      return *request.mutable_device_add();
    case CatalogKind::routine:
      return *request.mutable_routine_add();
    case CatalogKind::precondition:
      break;
  }
  return *request.mutable_precondition_add();
}

// The reply to an add of `kind`, if the response holds one.
const proto::CatalogAddReply* add_reply_of(const proto::AdminResponse& response, CatalogKind kind) {
  switch (kind) {
    case CatalogKind::device:
      return response.has_device_add() ? &response.device_add() : nullptr;
    case CatalogKind::routine:
      return response.has_routine_add() ? &response.routine_add() : nullptr;
    case CatalogKind::precondition:
      break;
  }
  return response.has_precondition_add() ? &response.precondition_add() : nullptr;
}

proto::CatalogRemoveRequest& remove_request_of(proto::AdminRequest& request, CatalogKind kind) {
  switch (kind) {
    case CatalogKind::device:
      return *request.mutable_device_remove();
    case CatalogKind::routine:
      return *request.mutable_routine_remove();
    case CatalogKind::precondition:
      break;
  }
  return *request.mutable_precondition_remove();
}

const proto::CatalogRemoveReply* remove_reply_of(const proto::AdminResponse& response, CatalogKind kind) {
  switch (kind) {
    case CatalogKind::device:
      return response.has_device_remove() ? &response.device_remove() : nullptr;
    case CatalogKind::routine:
      return response.has_routine_remove() ? &response.routine_remove() : nullptr;
    case CatalogKind::precondition:
      break;
  }
  return response.has_precondition_remove() ? &response.precondition_remove() : nullptr;
}

}  // namespace

int add_catalog_file(AgentConnection& connection, const CommandLine& line, CatalogKind kind) {
  const std::string_view name = name_of(kind);
  if (line.words.size() != 2 || !line.file) {
    return usage_error(fmt::format("{0} add takes --file F (a catalog file of [[{0}]] tables), e.g. {0} add --file {1}",
                                   name, example_file_of(kind)));
  }
  std::ifstream in(*line.file, std::ios::binary);
  if (!in) return usage_error(fmt::format("{} add: cannot read {}", name, *line.file));
  std::ostringstream text;
  text << in.rdbuf();
  proto::AdminRequest request;
  auto& add = add_request_of(request, kind);
  add.set_catalog(text.str());
  add.set_source(*line.file);
  add.set_replace(line.replace);
  add.set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  const proto::CatalogAddReply* answered = add_reply_of(*response, kind);
  if (answered == nullptr) return unexpected_answer(fmt::format("{} add", name));
  const proto::CatalogAddReply& reply = *answered;
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
  auto& remove = remove_request_of(request, kind);
  remove.set_id(line.words[2]);
  remove.set_timeout_ms(agent_timeout_ms(line));
  auto response = connection.call(request, answer_wait_s(line));
  if (!response) return no_agent(connection, response.error());
  if (!response->error().empty()) return agent_error(response->error());
  const proto::CatalogRemoveReply* reply = remove_reply_of(*response, kind);
  if (reply == nullptr) return unexpected_answer(fmt::format("{} remove", name));
  return report_verdict(line, kind, reply->verdict(), *reply, "removed", "removing");
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
