#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "core/time.h"
#include "proto/admin.pb.h"

namespace mesh::agent {

// Shared by the admin command families (AdminService, AdminDevices,
// AdminRoutines, AdminCatalog).

// The answer to a command that failed as a whole: meshctl prints `text`.
inline proto::AdminResponse error_response(std::string text) {
  proto::AdminResponse response;
  response.set_error(std::move(text));
  return response;
}

// A request's timeout_ms field (0: the service's own default).
inline core::Duration timeout_of(uint32_t timeout_ms) { return std::chrono::milliseconds(timeout_ms); }

}  // namespace mesh::agent
