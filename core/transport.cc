#include "core/transport.h"

namespace mesh::core {

std::string_view to_string(SendStatus status) {
  switch (status) {
    case SendStatus::sent:
      return "sent";
    case SendStatus::no_route:
      return "no_route";
    case SendStatus::too_large:
      return "too_large";
  }
  return "unknown";
}

}  // namespace mesh::core
