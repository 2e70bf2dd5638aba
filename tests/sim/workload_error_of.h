// The message a workload file's text is refused with, or "" when it
// parses: what the workload format tests compare against.
#pragma once

#include <string>

#include "sim/routine_workload.h"

namespace mesh::sim {

inline std::string workload_error_of(const std::string& text) {
  try {
    parse_workload(text, "w.toml");
  } catch (const WorkloadError& e) {
    return e.what();
  }
  return "";
}

}  // namespace mesh::sim
