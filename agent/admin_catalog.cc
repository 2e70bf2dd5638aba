#include "agent/admin_catalog.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "agent/admin_response.h"
#include "agent/catalog_file.h"
#include "routine/device_codec.h"
#include "routine/precondition_codec.h"
#include "routine/routine_model.h"

namespace mesh::agent {
namespace {

// The verdict on the change of `id`: the version it got and whether the
// catalog group refused it, or, if it was never decided (refused by this
// node's check, or no answer in time), refused with the reason.
proto::CatalogVerdict verdict_of(const std::string& id,
                                 const core::Expected<proto::CatalogEntry, std::string>& result) {
  proto::CatalogVerdict verdict;
  verdict.set_id(id);
  if (!result) {
    verdict.set_refused(true);
    verdict.set_detail(result.error());
  } else {
    verdict.set_version(result->version());
    verdict.set_refused(result->refused());
    verdict.set_detail(result->detail());
  }
  return verdict;
}

struct Submission {
  std::string id;  // the device, routine or rule the change is about
  proto::CatalogChange change;
};

std::string_view table_of(AdminCatalog::Kind kind) {
  switch (kind) {
    case AdminCatalog::Kind::device:
      return "[[device]]";
    case AdminCatalog::Kind::routine:
      return "[[routine]]";
    case AdminCatalog::Kind::precondition:
      return "[[precondition]]";
  }
  return "";
}

// One change per [[device]] (or [[routine]], or [[precondition]]) table of
// the file.
std::vector<Submission> submissions_of(AdminCatalog::Kind kind, const CatalogFile& file, bool replace) {
  std::vector<Submission> submissions;
  switch (kind) {
    case AdminCatalog::Kind::device:
      for (const auto& device : file.devices) {
        Submission submission{device.id, {}};
        *submission.change.mutable_put() = routine::to_proto(device);
        submissions.push_back(std::move(submission));
      }
      break;
    case AdminCatalog::Kind::routine:
      for (const auto& spec : file.routines) {
        Submission submission{spec.id, {}};
        *submission.change.mutable_put_routine() = routine::to_proto(spec);
        submissions.push_back(std::move(submission));
      }
      break;
    case AdminCatalog::Kind::precondition:
      for (const auto& spec : file.preconditions) {
        Submission submission{spec.id, {}};
        *submission.change.mutable_put_precondition() = routine::to_proto(spec);
        submissions.push_back(std::move(submission));
      }
      break;
  }
  for (auto& submission : submissions) submission.change.set_replace(replace);
  return submissions;
}

}  // namespace

void AdminCatalog::add(Kind kind, const proto::CatalogAddRequest& request, Reply reply) {
  const std::string source = request.source().empty() ? "catalog" : request.source();
  auto file = parse_catalog(request.catalog(), source, &node_.catalog().devices());
  if (!file) {
    reply(error_response(file.error()));
    return;
  }
  std::vector<Submission> submissions = submissions_of(kind, *file, request.replace());
  if (submissions.empty()) {
    reply(error_response(fmt::format("{} defines no {}", source, table_of(kind))));
    return;
  }
  // Every change goes at once; the reply waits for the last verdict and
  // lists them in the file's order.
  struct Gather {
    proto::AdminResponse response;
    proto::CatalogAddReply* verdicts = nullptr;
    size_t awaiting = 0;
    Reply reply;
  };
  auto gather = std::make_shared<Gather>();
  switch (kind) {
    case Kind::device:
      gather->verdicts = gather->response.mutable_device_add();
      break;
    case Kind::routine:
      gather->verdicts = gather->response.mutable_routine_add();
      break;
    case Kind::precondition:
      gather->verdicts = gather->response.mutable_precondition_add();
      break;
  }
  for (size_t i = 0; i < submissions.size(); ++i) gather->verdicts->add_verdicts();
  gather->awaiting = submissions.size();
  gather->reply = std::move(reply);
  for (size_t i = 0; i < submissions.size(); ++i) {
    node_.devices().change_catalog(std::move(submissions[i].change), timeout_of(request.timeout_ms()),
                                   [alive = alive_, gather, i, id = submissions[i].id](const auto& result) {
                                     if (!*alive) return;
                                     *gather->verdicts->mutable_verdicts(static_cast<int>(i)) = verdict_of(id, result);
                                     if (--gather->awaiting == 0) gather->reply(std::move(gather->response));
                                   });
  }
}

void AdminCatalog::remove(Kind kind, const proto::CatalogRemoveRequest& request, Reply reply) {
  proto::CatalogChange change;
  switch (kind) {
    case Kind::device:
      change.set_remove(request.id());
      break;
    case Kind::routine:
      change.set_remove_routine(request.id());
      break;
    case Kind::precondition:
      change.set_remove_precondition(request.id());
      break;
  }
  submit_one(
      request.id(), std::move(change), request.timeout_ms(),
      [kind](proto::AdminResponse& response) {
        switch (kind) {
          case Kind::device:
            return response.mutable_device_remove()->mutable_verdict();
          case Kind::routine:
            return response.mutable_routine_remove()->mutable_verdict();
          case Kind::precondition:
            break;
        }
        return response.mutable_precondition_remove()->mutable_verdict();
      },
      std::move(reply));
}

void AdminCatalog::set_routine_enabled(const proto::RoutineEnableRequest& request, Reply reply) {
  proto::CatalogChange change;
  change.mutable_set_routine_enabled()->set_id(request.id());
  change.mutable_set_routine_enabled()->set_enabled(request.enabled());
  submit_one(
      request.id(), std::move(change), request.timeout_ms(),
      [](proto::AdminResponse& response) { return response.mutable_routine_enable()->mutable_verdict(); },
      std::move(reply));
}

void AdminCatalog::submit_one(const std::string& id, proto::CatalogChange change, uint32_t timeout_ms,
                              std::function<proto::CatalogVerdict*(proto::AdminResponse&)> verdict_in, Reply reply) {
  node_.devices().change_catalog(
      std::move(change), timeout_of(timeout_ms),
      [alive = alive_, id, verdict_in = std::move(verdict_in), reply = std::move(reply)](const auto& result) {
        if (!*alive) return;
        // A change of one entry that was never decided is an error of the
        // command as a whole, not a verdict.
        if (!result) {
          reply(error_response(result.error()));
          return;
        }
        proto::AdminResponse response;
        *verdict_in(response) = verdict_of(id, result);
        reply(std::move(response));
      });
}

}  // namespace mesh::agent
