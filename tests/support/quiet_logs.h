#pragma once

#include <gtest/gtest.h>

#include "core/log.h"

namespace mesh::test_support {

// Sweeps run thousands of agents over many seeds: their logs are off unless
// a replay (the *_SEED variables) turns a layer back on. Including this
// header registers the environment once per test binary.
class QuietLogs : public ::testing::Environment {
 public:
  void SetUp() override { core::set_log_level("off"); }
};
inline const ::testing::Environment* const kQuietLogs = ::testing::AddGlobalTestEnvironment(new QuietLogs);

}  // namespace mesh::test_support
