#include "agent/text_log_reader.h"

#include <memory>
#include <utility>

#include <fmt/format.h>

#include "proto/kgroup_client.pb.h"

namespace mesh::agent {
namespace {

struct Reading {
  KgroupService& kgroups;
  kgroup::GroupTarget target;
  core::TimePoint deadline;
  size_t page_bytes = 0;
  LeaderLogCallback callback;
  LeaderLog log;
};

void read_page(const std::shared_ptr<Reading>& reading) {
  const core::Duration left = reading->deadline - reading->kgroups.env().now();
  if (left <= core::Duration::zero()) {
    reading->callback(core::Unexpected(fmt::format("the log had {} entries read in {} pages when the time ran out",
                                                   reading->log.records.size(), reading->log.pages)));
    return;
  }
  proto::TextLogQuery query;
  query.set_from(reading->log.records.size() + 1);
  query.set_max_bytes(static_cast<uint32_t>(reading->page_bytes));
  reading->kgroups.read(reading->target, query.SerializeAsString(), left, [reading](const auto& result) {
    if (!result) {
      reading->callback(core::Unexpected(result.error()));
      return;
    }
    proto::TextLogPage page;
    if (result->answer.size() > static_cast<size_t>(INT32_MAX) ||
        !page.ParseFromArray(result->answer.data(), static_cast<int>(result->answer.size())) ||
        page.first() != reading->log.records.size() + 1 || page.total() + 1 < page.first() ||
        (page.entries().empty() && page.total() >= page.first())) {
      reading->callback(core::Unexpected(
          fmt::format("{} answered page {} with something that is not the text log page asked for (from position {})",
                      result->leader.to_string(), reading->log.pages + 1, reading->log.records.size() + 1)));
      return;
    }
    LeaderLog& log = reading->log;
    ++log.pages;
    log.leader = result->leader;
    log.term = result->term;
    log.epoch = result->epoch;
    log.generation = result->generation;
    for (const proto::TextLogEntry& entry : page.entries()) {
      log.records.push_back({log.records.size() + 1, entry.write_id(), entry.text()});
    }
    if (log.records.size() >= page.total()) {
      reading->callback(std::move(log));
      return;
    }
    read_page(reading);
  });
}

}  // namespace

void read_leader_log(KgroupService& kgroups, const kgroup::GroupTarget& target, core::Duration timeout,
                     size_t page_bytes, LeaderLogCallback callback) {
  if (timeout <= core::Duration::zero()) timeout = kgroups.config().write_timeout;
  auto reading = std::make_shared<Reading>(
      Reading{kgroups, target, kgroups.env().now() + timeout, page_bytes, std::move(callback), {}});
  read_page(reading);
}

}  // namespace mesh::agent
