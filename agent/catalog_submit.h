#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "agent/device_service.h"
#include "core/expected.h"
#include "proto/admin.pb.h"
#include "proto/routine.pb.h"

namespace mesh::agent {

// How meshctl's catalog verbs (device add/remove, routine add/remove/
// enable/disable) hear what became of their changes.

// The verdict on the change of `id`: the version it got and whether the
// catalog group refused it, or, if it was never decided (refused by this
// node's check, or no answer in time), refused with the reason.
proto::CatalogVerdict verdict_of(const std::string& id, const core::Expected<proto::CatalogEntry, std::string>& result);

struct CatalogSubmission {
  std::string id;  // the device or routine the change is about
  proto::CatalogChange change;
};

// Submits every change at once and calls `done` with their verdicts, in the
// order given, when the last is decided.
void submit_all(DeviceService& service, std::vector<CatalogSubmission> submissions, core::Duration timeout,
                std::function<void(std::vector<proto::CatalogVerdict>)> done);

}  // namespace mesh::agent
