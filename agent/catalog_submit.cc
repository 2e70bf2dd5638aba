#include "agent/catalog_submit.h"

#include <memory>

namespace mesh::agent {

proto::CatalogVerdict verdict_of(const std::string& id, const core::Expected<proto::CatalogEntry, std::string>& result) {
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

void submit_all(DeviceService& service, std::vector<CatalogSubmission> submissions, core::Duration timeout,
                std::function<void(std::vector<proto::CatalogVerdict>)> done) {
  struct Gather {
    std::vector<proto::CatalogVerdict> verdicts;
    size_t awaiting = 0;
    std::function<void(std::vector<proto::CatalogVerdict>)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->verdicts.resize(submissions.size());
  gather->awaiting = submissions.size();
  gather->done = std::move(done);
  if (submissions.empty()) {
    gather->done({});
    return;
  }
  for (size_t i = 0; i < submissions.size(); ++i) {
    service.change_catalog(std::move(submissions[i].change), timeout,
                           [gather, i, id = submissions[i].id](const auto& result) {
                             gather->verdicts[i] = verdict_of(id, result);
                             if (--gather->awaiting == 0) gather->done(std::move(gather->verdicts));
                           });
  }
}

}  // namespace mesh::agent
