#pragma once

#include <string>

#include "routine/device_model.h"

namespace mesh::test_support {

// A catalog device for tests that need only its id and kind.
inline routine::DeviceSpec device_spec(const std::string& id, routine::DeviceKind kind) {
  routine::DeviceSpec spec;
  spec.id = id;
  spec.kind = kind;
  spec.location = {1, 2, 0};
  spec.driver = "emulated://" + id;
  return spec;
}

}  // namespace mesh::test_support
