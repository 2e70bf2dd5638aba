#include "agent/admin_routines.h"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "agent/catalog_file.h"
#include "agent/catalog_submit.h"
#include "routine/routine_model.h"

namespace mesh::agent {
namespace {

proto::AdminResponse error_response(std::string text) {
  proto::AdminResponse response;
  response.set_error(std::move(text));
  return response;
}

core::Duration timeout_of(uint32_t timeout_ms) { return std::chrono::milliseconds(timeout_ms); }

}  // namespace

void AdminRoutines::add(const proto::RoutineAddRequest& request, Reply reply) {
  const std::string source = request.source().empty() ? "catalog" : request.source();
  auto file = parse_catalog(request.catalog(), source, &node_.catalog().devices());
  if (!file) {
    reply(error_response(file.error()));
    return;
  }
  if (file->routines.empty()) {
    reply(error_response(fmt::format("{} defines no [[routine]]", source)));
    return;
  }
  std::vector<CatalogSubmission> submissions;
  for (const auto& spec : file->routines) {
    CatalogSubmission submission{spec.id, {}};
    *submission.change.mutable_put_routine() = routine::to_proto(spec);
    submission.change.set_replace(request.replace());
    submissions.push_back(std::move(submission));
  }
  submit_all(node_.devices(), std::move(submissions), timeout_of(request.timeout_ms()),
             [alive = alive_, reply = std::move(reply)](std::vector<proto::CatalogVerdict> verdicts) {
               if (!*alive) return;
               proto::AdminResponse response;
               for (auto& verdict : verdicts) *response.mutable_routine_add()->add_verdicts() = std::move(verdict);
               reply(std::move(response));
             });
}

void AdminRoutines::remove(const proto::RoutineRemoveRequest& request, Reply reply) {
  proto::CatalogChange change;
  change.set_remove_routine(request.id());
  node_.devices().change_catalog(change, timeout_of(request.timeout_ms()),
                                 [alive = alive_, id = request.id(), reply = std::move(reply)](const auto& result) {
                                   if (!*alive) return;
                                   if (!result) {
                                     reply(error_response(result.error()));
                                     return;
                                   }
                                   proto::AdminResponse response;
                                   *response.mutable_routine_remove()->mutable_verdict() = verdict_of(id, result);
                                   reply(std::move(response));
                                 });
}

void AdminRoutines::set_enabled(const proto::RoutineEnableRequest& request, Reply reply) {
  proto::CatalogChange change;
  change.mutable_set_routine_enabled()->set_id(request.id());
  change.mutable_set_routine_enabled()->set_enabled(request.enabled());
  node_.devices().change_catalog(change, timeout_of(request.timeout_ms()),
                                 [alive = alive_, id = request.id(), reply = std::move(reply)](const auto& result) {
                                   if (!*alive) return;
                                   if (!result) {
                                     reply(error_response(result.error()));
                                     return;
                                   }
                                   proto::AdminResponse response;
                                   *response.mutable_routine_enable()->mutable_verdict() = verdict_of(id, result);
                                   reply(std::move(response));
                                 });
}

}  // namespace mesh::agent
