// SimDisk (sim/sim_disk.h) and the OutputCommitTransport that holds a node's
// messages until the changes before them are durable on it.
#include "core/output_commit_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/metrics.h"
#include "core/rng.h"
#include "sim/sim_disk.h"
#include "tests/support/manual_env.h"

namespace mesh::sim {
namespace {

using std::chrono::milliseconds;

constexpr uint32_t kMembership = 19;
constexpr uint32_t kKgroup = 20;

class RecordingTransport final : public core::Transport {
 public:
  core::NodeId self() const override { return core::NodeId{1}; }
  core::SendStatus send(core::Message message) override {
    sent.push_back(message.body);
    return status;
  }
  core::SendStatus flood(core::Message message) override {
    sent.push_back("flood:" + message.body);
    return status;
  }
  void set_receiver(Receiver) override {}

  std::vector<std::string> sent;
  core::SendStatus status = core::SendStatus::sent;
};

core::Message message(uint32_t body_type, std::string body) {
  core::Message m;
  m.dst = core::NodeId{2};
  m.body_type = body_type;
  m.body = std::move(body);
  return m;
}

SimDisk::Options slow_disk() {
  SimDisk::Options options;
  options.min_commit = milliseconds(10);
  options.max_commit = milliseconds(10);
  return options;
}

TEST(SimDisk, ChangesAreVisibleAtOnceAndDurableAfterTheCommit) {
  test_support::ManualEnv env;
  SimDisk disk(slow_disk());
  disk.attach(env);
  ASSERT_TRUE(disk.put("a", "1"));
  ASSERT_TRUE(disk.put("b/x", "2"));
  ASSERT_TRUE(disk.remove("a"));
  EXPECT_FALSE(disk.get("a").has_value());
  EXPECT_EQ(disk.get("b/x"), "2");
  EXPECT_EQ(disk.keys("b/"), std::vector<std::string>{"b/x"});
  EXPECT_FALSE(disk.platter().get("b/x").has_value());
  // The first commit took what was queued when it began, "a" alone; the
  // changes made meanwhile go in the next one.
  env.advance(milliseconds(10));
  EXPECT_EQ(disk.platter().get("a"), "1");
  EXPECT_FALSE(disk.platter().get("b/x").has_value());
  env.advance(milliseconds(10));
  EXPECT_EQ(disk.platter().get("b/x"), "2");
  EXPECT_FALSE(disk.platter().get("a").has_value());
}

TEST(SimDisk, APowerCutLosesWhatWasNotDurableAndDropsWaitingActions) {
  test_support::ManualEnv env;
  SimDisk disk(slow_disk());
  disk.attach(env);
  ASSERT_TRUE(disk.put("kept", "1"));
  env.advance(milliseconds(10));
  ASSERT_TRUE(disk.put("lost", "2"));
  bool ran = false;
  disk.after_durable([&] { ran = true; });
  core::Rng rng(7);
  disk.power_cut(rng);
  EXPECT_EQ(disk.get("kept"), "1");
  // The commit of "lost" was in flight: it landed or not, as the cut fell.
  EXPECT_LE(disk.lost_changes(), 1u);
  EXPECT_EQ(disk.get("lost").has_value(), disk.lost_changes() == 0);
  env.advance(milliseconds(100));
  EXPECT_FALSE(ran);
}

// Over many cuts, what lands of a commit in flight is a prefix of it: a later
// change never survives an earlier one of the same commit.
TEST(SimDisk, APowerCutLandsAPrefixOfTheCommitInFlight) {
  size_t partial = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    test_support::ManualEnv env(seed);
    SimDisk disk(slow_disk());
    disk.attach(env);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(disk.put("k" + std::to_string(i), "v"));
    core::Rng rng(seed);
    disk.power_cut(rng);
    bool gap = false;
    size_t landed = 0;
    for (int i = 0; i < 5; ++i) {
      const bool present = disk.get("k" + std::to_string(i)).has_value();
      if (present && gap) FAIL() << "seed " << seed << ": k" << i << " landed after a lost change";
      if (!present) gap = true;
      landed += present ? 1 : 0;
    }
    partial += landed > 0 && landed < 5 ? 1 : 0;
  }
  EXPECT_GT(partial, 0u);
}

TEST(SimDisk, ZeroCommitTimeIsSynchronous) {
  test_support::ManualEnv env;
  SimDisk disk;
  disk.attach(env);
  ASSERT_TRUE(disk.put("a", "1"));
  EXPECT_EQ(disk.platter().get("a"), "1");
  bool ran = false;
  disk.after_durable([&] { ran = true; });
  EXPECT_TRUE(ran);
}

// A node's transport over a disk whose commits take 10 ms.
class OutputCommitTest : public ::testing::Test {
 protected:
  void SetUp() override { disk.attach(env); }

  test_support::ManualEnv env;
  SimDisk disk{slow_disk()};
  RecordingTransport inner;
  core::Metrics metrics;
};

TEST_F(OutputCommitTest, HoldsMessagesUntilTheChangesBeforeThemAreDurable) {
  core::OutputCommitTransport transport(env, inner, disk, metrics, {kMembership});

  // Nothing pending: straight through, with the real status.
  inner.status = core::SendStatus::no_route;
  EXPECT_EQ(transport.send(message(kKgroup, "before")), core::SendStatus::no_route);
  inner.status = core::SendStatus::sent;

  ASSERT_TRUE(disk.put("promise", "term 3"));
  EXPECT_EQ(transport.send(message(kKgroup, "vote")), core::SendStatus::sent);
  EXPECT_EQ(transport.flood(message(kKgroup, "announce")), core::SendStatus::sent);
  EXPECT_EQ(transport.send(message(kMembership, "ping ack")), core::SendStatus::sent);
  // Only the exempt Medley message has left.
  EXPECT_EQ(inner.sent, (std::vector<std::string>{"before", "ping ack"}));
  EXPECT_EQ(transport.held(), 2u);

  env.advance(milliseconds(10));
  EXPECT_EQ(inner.sent, (std::vector<std::string>{"before", "ping ack", "vote", "flood:announce"}));
  EXPECT_EQ(transport.held(), 0u);
  EXPECT_EQ(metrics.total("output_commit_held_total"), 2u);
}

TEST_F(OutputCommitTest, HeldMessagesLeaveInOrderAcrossCommits) {
  core::OutputCommitTransport transport(env, inner, disk, metrics, {});
  ASSERT_TRUE(disk.put("a", "1"));
  transport.send(message(kKgroup, "m1"));
  env.advance(milliseconds(5));
  ASSERT_TRUE(disk.put("b", "2"));  // queued behind the commit in flight
  transport.send(message(kKgroup, "m2"));
  env.advance(milliseconds(5));  // a's commit: m1 may go, m2 waits for b
  EXPECT_EQ(inner.sent, std::vector<std::string>{"m1"});
  transport.send(message(kKgroup, "m3"));
  env.advance(milliseconds(10));
  EXPECT_EQ(inner.sent, (std::vector<std::string>{"m1", "m2", "m3"}));
}

TEST_F(OutputCommitTest, AHeldMessageThatFindsNoRouteIsCounted) {
  core::OutputCommitTransport transport(env, inner, disk, metrics, {});
  ASSERT_TRUE(disk.put("a", "1"));
  EXPECT_EQ(transport.send(message(kKgroup, "m")), core::SendStatus::sent);
  inner.status = core::SendStatus::no_route;
  env.advance(milliseconds(10));
  EXPECT_EQ(metrics.total("output_commit_dropped_total"), 1u);
}

TEST_F(OutputCommitTest, MessagesHeldWhenItIsDestroyedAreNeverSent) {
  {
    core::OutputCommitTransport transport(env, inner, disk, metrics, {});
    ASSERT_TRUE(disk.put("a", "1"));
    transport.send(message(kKgroup, "m"));
  }
  env.advance(milliseconds(10));
  EXPECT_TRUE(inner.sent.empty());
}

}  // namespace
}  // namespace mesh::sim
