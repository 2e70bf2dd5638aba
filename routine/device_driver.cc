#include "routine/device_driver.h"

namespace mesh::routine {

std::string_view to_string(DriverFailure failure) {
  switch (failure) {
    case DriverFailure::unreachable:
      return "unreachable";
    case DriverFailure::timeout:
      return "timeout";
    case DriverFailure::protocol:
      return "protocol";
    case DriverFailure::refused:
      return "refused";
  }
  return "unknown";
}

}  // namespace mesh::routine
