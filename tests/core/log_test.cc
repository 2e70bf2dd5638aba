#include "core/log.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mesh::core {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { log_to_null(); }
  void TearDown() override {
    set_log_level("info");
    log_to_stderr();
  }
};

TEST_F(LogTest, RejectsUnknownLevel) {
  set_log_level("info", "core");
  EXPECT_FALSE(set_log_level("verbose", "core"));
  EXPECT_FALSE(set_log_level("", "core"));
  EXPECT_FALSE(set_log_level("INFO2"));
  EXPECT_EQ(log("core").level(), spdlog::level::info);
}

TEST_F(LogTest, RejectsUnknownLayer) {
  EXPECT_FALSE(set_log_level("debug", "no_such_layer"));
  const auto layers = log_layers();
  EXPECT_EQ(std::find(layers.begin(), layers.end(), "no_such_layer"), layers.end());
}

TEST_F(LogTest, SetsOneLayer) {
  EXPECT_TRUE(set_log_level("info"));
  EXPECT_TRUE(set_log_level("debug", "routing"));
  EXPECT_EQ(log("routing").level(), spdlog::level::debug);
  EXPECT_EQ(log("core").level(), spdlog::level::info);
  EXPECT_TRUE(set_log_level("warn", "routing"));
  EXPECT_EQ(log("routing").level(), spdlog::level::warn);
  EXPECT_TRUE(set_log_level("off", "routing"));
  EXPECT_EQ(log("routing").level(), spdlog::level::off);
}

TEST_F(LogTest, SetsEveryLayer) {
  EXPECT_TRUE(set_log_level("trace"));
  for (const auto& layer : log_layers()) EXPECT_EQ(log(layer).level(), spdlog::level::trace) << layer;
  EXPECT_TRUE(set_log_level("error"));
  for (const auto& layer : log_layers()) EXPECT_EQ(log(layer).level(), spdlog::level::err) << layer;
}

TEST_F(LogTest, KnownLayersListedAndLoggersNamed) {
  const auto layers = log_layers();
  for (const char* layer : {"core", "proto", "routing", "membership", "kgroup", "mutex", "routine", "agent", "sim"}) {
    EXPECT_NE(std::find(layers.begin(), layers.end(), layer), layers.end()) << layer;
  }
  EXPECT_EQ(log("membership").name(), "membership");
  EXPECT_EQ(&log("membership"), &log("membership"));
}

TEST_F(LogTest, LayerCreatedOnUseBecomesKnown) {
  log("test_extra").info("created key={}", 1);
  EXPECT_TRUE(set_log_level("debug", "test_extra"));
  EXPECT_EQ(log("test_extra").level(), spdlog::level::debug);
}

}  // namespace
}  // namespace mesh::core
