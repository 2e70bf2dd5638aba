#include "agent/node.h"

#include <memory>
#include <optional>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/agent/test_world.h"

namespace mesh::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::ip;
using testing::LinkGraph;
using testing::ManualEnv;
using testing::test_config;

// Symmetric OLSR neighbours: the ones messages can be sent to.
std::vector<core::NodeId> neighbour_ids(const Node& node) {
  std::vector<core::NodeId> ids;
  for (const auto& n : node.olsr().neighbours()) {
    if (n.status == routing::olsr::LinkStatus::symmetric) ids.push_back(n.main);
  }
  return ids;
}

// Nodes 1 - 2 - 3 in a line (1 and 3 out of each other's range), with
// different delays in each direction so the RTT checks both.
class NodeTest : public ::testing::Test {
 protected:
  static constexpr milliseconds kOneToTwo{3};
  static constexpr milliseconds kTwoToOne{5};

  NodeTest() : graph_(env_) {
    graph_.connect(ip(1), ip(2), kOneToTwo, kTwoToOne);
    graph_.connect(ip(2), ip(3), milliseconds(2), milliseconds(2));
  }

  Node& add(uint8_t last, char key_digit = 'a') {
    core::Link& link = graph_.add(ip(last));
    auto& storage = storage_[last];
    nodes_[last] = std::make_unique<Node>(test_config(last, key_digit),
                                          NodeContext{env_, link, graph_.add_routing(ip(last)), storage});
    nodes_[last]->start();
    return *nodes_[last];
  }

  std::optional<EchoService::Result> ping(Node& from, core::NodeId to, core::Duration timeout, core::Duration run) {
    std::optional<EchoService::Result> result;
    from.ping(to, timeout, [&](const EchoService::Result& r) { result = r; });
    env_.advance(run);
    return result;
  }

  ManualEnv env_;
  LinkGraph graph_;
  std::map<uint8_t, core::MemoryStorage> storage_;
  std::map<uint8_t, std::unique_ptr<Node>> nodes_;
};

TEST_F(NodeTest, DiscoversExactlyItsOneHopNeighbours) {
  Node& a = add(1);
  Node& b = add(2);
  Node& c = add(3);
  env_.advance(seconds(5));
  EXPECT_THAT(neighbour_ids(a), ::testing::ElementsAre(ip(2)));
  EXPECT_THAT(neighbour_ids(b), ::testing::ElementsAre(ip(1), ip(3)));
  EXPECT_THAT(neighbour_ids(c), ::testing::ElementsAre(ip(2)));
  // 1 reaches 3 through 2, its MPR.
  const auto route = a.olsr().route_to(ip(3));
  ASSERT_TRUE(route.has_value());
  EXPECT_EQ(route->next_hop, ip(2));
  EXPECT_EQ(route->hops, 2u);
  EXPECT_THAT(a.olsr().mprs(), ::testing::ElementsAre(ip(2)));
}

TEST_F(NodeTest, PingToNeighbourReportsOneHopAndTheLinkRoundTrip) {
  Node& a = add(1);
  add(2);
  env_.advance(seconds(5));
  const auto result = ping(a, ip(2), seconds(5), seconds(1));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, core::RequestStatus::ok) << result->error;
  EXPECT_EQ(result->hops, 1u);
  EXPECT_DOUBLE_EQ(result->rtt_ms, core::to_millis(kOneToTwo + kTwoToOne));
  EXPECT_EQ(result->attempts, 1u);
  EXPECT_TRUE(result->error.empty());
}

TEST_F(NodeTest, PingAcrossTwoHopsReportsBothHops) {
  Node& a = add(1);
  add(2);
  Node& c = add(3);
  env_.advance(seconds(5));
  const uint64_t forwarded_before = nodes_[2]->metrics().total("transport_forwarded_total");
  auto result = ping(a, ip(3), seconds(5), seconds(1));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, core::RequestStatus::ok) << result->error;
  EXPECT_EQ(result->hops, 2u);
  EXPECT_EQ(result->attempts, 1u);
  EXPECT_DOUBLE_EQ(result->rtt_ms, core::to_millis(kOneToTwo + milliseconds(2) + milliseconds(2) + kTwoToOne));
  // Request and reply, besides Medley's probes that also cross node 2.
  EXPECT_GE(nodes_[2]->metrics().total("transport_forwarded_total") - forwarded_before, 2u);
  result = ping(c, ip(1), seconds(5), seconds(1));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, core::RequestStatus::ok) << result->error;
  EXPECT_EQ(result->hops, 2u);
}

TEST_F(NodeTest, RoutesListenersSeeEveryChangeAndPingsFollowAFailure) {
  // A ring 1-2-3-4-1: when 1-2 fails, 1 reaches 2 through 4 and 3.
  graph_.connect(ip(3), ip(4), milliseconds(1), milliseconds(1));
  graph_.connect(ip(4), ip(1), milliseconds(1), milliseconds(1));
  Node& a = add(1);
  std::vector<std::vector<routing::olsr::Route>> tables;
  a.add_routes_listener([&](const std::vector<routing::olsr::Route>& routes) { tables.push_back(routes); });
  add(2);
  add(3);
  add(4);
  env_.advance(seconds(20));
  ASSERT_FALSE(tables.empty());
  EXPECT_EQ(tables.back(), a.olsr().routes());
  ASSERT_EQ(a.olsr().routes().size(), 3u);
  EXPECT_EQ(a.olsr().route_to(ip(2))->hops, 1u);

  graph_.disconnect(ip(1), ip(2));
  env_.advance(seconds(20));
  EXPECT_EQ(tables.back(), a.olsr().routes());
  ASSERT_TRUE(a.olsr().route_to(ip(2)));
  EXPECT_EQ(a.olsr().route_to(ip(2))->hops, 3u);
  EXPECT_EQ(a.olsr().route_to(ip(2))->next_hop, ip(4));
  const auto result = ping(a, ip(2), seconds(5), seconds(1));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, core::RequestStatus::ok) << result->error;
  EXPECT_EQ(result->hops, 3u);
}

std::map<core::NodeId, membership::MemberState> states(const Node& node, bool include_gone) {
  std::map<core::NodeId, membership::MemberState> out;
  for (const auto& status : node.medley().status(include_gone)) out[status.member.id] = status.member.state;
  return out;
}

TEST_F(NodeTest, MedleyJoinsThroughOlsrNeighboursAndDetectsACrashTwoHopsAway) {
  Node& a = add(1);
  Node& b = add(2);
  Node& c = add(3);
  env_.advance(seconds(30));
  for (const Node* node : {&a, &b, &c}) {
    const auto live = node->medley().live_members();
    ASSERT_EQ(live.size(), 3u) << node->name();
    for (const auto& member : live) {
      EXPECT_EQ(member.state, membership::MemberState::alive) << node->name() << " sees " << member.id.to_string();
      EXPECT_EQ(member.name, "node" + std::to_string(member.id.value() & 0xff));
    }
  }
  // Hop counts come from OLSR's routes.
  for (const auto& status : a.medley().status(false)) {
    ASSERT_TRUE(status.hops.has_value()) << status.member.id.to_string();
    EXPECT_EQ(*status.hops, status.member.id == ip(1) ? 0u : status.member.id == ip(2) ? 1u : 2u);
  }
  EXPECT_EQ(&a.members(), static_cast<membership::MemberView*>(&a.medley()));

  // 3 drops off the mesh: 1 and 2 declare it failed, and 3 the two of them.
  graph_.disconnect(ip(2), ip(3));
  env_.advance(seconds(120));
  EXPECT_EQ(states(a, true)[ip(3)], membership::MemberState::failed);
  EXPECT_EQ(states(b, true)[ip(3)], membership::MemberState::failed);
  EXPECT_EQ(states(c, true)[ip(1)], membership::MemberState::failed);
  EXPECT_EQ(states(a, false).count(ip(3)), 0u);
  EXPECT_EQ(states(a, false)[ip(2)], membership::MemberState::alive);
}

TEST_F(NodeTest, LeaveIsSeenAsLeftAndShowsInStatus) {
  Node& a = add(1);
  add(2);
  Node& c = add(3);
  env_.advance(seconds(30));
  ASSERT_EQ(a.medley().live_members().size(), 3u);
  c.leave();
  c.leave();  // harmless twice
  env_.advance(seconds(3));
  EXPECT_EQ(states(a, true)[ip(3)], membership::MemberState::left);
  EXPECT_EQ(states(*nodes_[2], true)[ip(3)], membership::MemberState::left);
  bool found = false;
  for (const auto& line : c.status()) {
    if (line.layer != "membership") continue;
    found = true;
    EXPECT_THAT(line.summary, HasSubstr("left"));
  }
  EXPECT_TRUE(found) << "no membership line in status()";
  for (const auto& line : a.status()) {
    if (line.layer == "membership") {
      EXPECT_THAT(line.summary, HasSubstr("2 live members"));
    }
  }
}

// All three ask for one resource at once: each is granted exactly once,
// never two at a time, with fencing tokens rising in grant order.
TEST_F(NodeTest, CameraGrantsOneHolderAtATimeOverMedleysMembers) {
  add(1);
  add(2);
  add(3);
  env_.advance(seconds(30));
  ASSERT_EQ(nodes_[1]->members().live_members().size(), 3u);
  std::optional<uint8_t> holder;
  std::vector<uint64_t> tokens;
  size_t errors = 0;
  for (uint8_t last : {1, 2, 3}) {
    nodes_[last]->camera().acquire("pump", seconds(60), [&, last](const mutex::AcquireResult& result) {
      if (!result) {
        ++errors;
        return;
      }
      EXPECT_FALSE(holder.has_value()) << "node" << int(last) << " granted while node" << int(*holder) << " holds";
      holder = last;
      tokens.push_back(result->fencing_token);
      env_.start_timer(milliseconds(200), [&, last] {
        holder.reset();
        EXPECT_TRUE(nodes_[last]->camera().release("pump"));
      });
    });
  }
  bool waiting_shown = false;
  for (const auto& line : nodes_[2]->status()) {
    if (line.layer == "mutex") waiting_shown = line.summary.find("1 resources") != std::string::npos;
  }
  EXPECT_TRUE(waiting_shown);
  env_.advance(seconds(30));
  EXPECT_EQ(errors, 0u);
  ASSERT_EQ(tokens.size(), 3u);
  EXPECT_LT(tokens[0], tokens[1]);
  EXPECT_LT(tokens[1], tokens[2]);
}

TEST_F(NodeTest, PingToUnknownNodeTimesOutSayingThereIsNoRoute) {
  Node& a = add(1);
  add(2);
  env_.advance(seconds(5));
  std::optional<EchoService::Result> result;
  a.ping(ip(9), seconds(2), [&](const EchoService::Result& r) { result = r; });
  env_.advance(milliseconds(1999));
  EXPECT_FALSE(result.has_value()) << "gave up before its deadline";
  env_.advance(seconds(1));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, core::RequestStatus::timeout);
  EXPECT_GE(result->attempts, 1u);
  EXPECT_THAT(result->error, HasSubstr("no reply from 10.0.0.9 within 2.0 s ("));
  EXPECT_THAT(result->error, HasSubstr("no route to 10.0.0.9"));
}

TEST_F(NodeTest, ZeroTimeoutMeansTheConfiguredPingTimeout) {
  Node& a = add(1);
  env_.advance(seconds(1));
  std::optional<EchoService::Result> result;
  a.ping(ip(9), core::Duration::zero(), [&](const EchoService::Result& r) { result = r; });
  env_.advance(a.config().ping_timeout - milliseconds(1));
  EXPECT_FALSE(result.has_value());
  env_.advance(seconds(1));
  ASSERT_TRUE(result.has_value());
  EXPECT_THAT(result->error, HasSubstr("within 5.0 s"));
}

TEST_F(NodeTest, BootCountIncrementsAcrossRestartsWithTheSameStorage) {
  core::MemoryStorage storage;
  core::Link& link = graph_.add(ip(1));
  {
    Node node(test_config(1), NodeContext{env_, link, graph_.add_routing(ip(1)), storage});
    EXPECT_EQ(node.boot_count(), 1u);
    EXPECT_EQ(core::ChecksummedStorage::unframe("auth/boot", *storage.get("auth/boot")).value, "1");
  }
  {
    Node node(test_config(1), NodeContext{env_, link, graph_.add_routing(ip(1)), storage});
    EXPECT_EQ(node.boot_count(), 2u);
    EXPECT_EQ(core::ChecksummedStorage::unframe("auth/boot", *storage.get("auth/boot")).value, "2");
    ASSERT_FALSE(node.status().empty());
    EXPECT_EQ(node.status()[0].layer, "core");
    EXPECT_THAT(node.status()[0].summary, HasSubstr("boot 2"));
    EXPECT_THAT(node.status()[0].summary, HasSubstr(std::to_string(uint64_t{2} << 32)));
  }
}

// Memory storage that cannot persist the boot count.
class BootCountFailingStorage final : public core::Storage {
 public:
  core::StoredValue read(std::string_view key) const override { return inner.read(key); }
  bool put(std::string_view key, std::string_view value) override {
    return key != "auth/boot" && inner.put(key, value);
  }
  bool remove(std::string_view key) override { return inner.remove(key); }
  std::vector<std::string> keys(std::string_view prefix) const override { return inner.keys(prefix); }
  core::MemoryStorage inner;
};

TEST_F(NodeTest, RefusesToStartWhenTheBootCountCannotBePersisted) {
  BootCountFailingStorage storage;
  core::Link& link = graph_.add(ip(1));
  try {
    Node node(test_config(1), NodeContext{env_, link, graph_.add_routing(ip(1)), storage});
    FAIL() << "constructed a node whose boot count is not durable";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("auth/boot"));
  }
}

TEST_F(NodeTest, RefusesACorruptBootCount) {
  core::MemoryStorage storage;
  ASSERT_TRUE(storage.put("auth/boot", "seven"));  // a legacy bare value, migrated as it is
  core::Link& link = graph_.add(ip(1));
  EXPECT_THROW(Node(test_config(1), NodeContext{env_, link, graph_.add_routing(ip(1)), storage}), std::runtime_error);
}

TEST_F(NodeTest, RefusesADamagedBootCount) {
  core::MemoryStorage storage;
  core::Link& link = graph_.add(ip(1));
  { Node node(test_config(1), NodeContext{env_, link, graph_.add_routing(ip(1)), storage}); }
  std::string& raw = *storage.raw("auth/boot");
  raw.back() = static_cast<char>(raw.back() ^ 0x10);
  try {
    Node node(test_config(1), NodeContext{env_, link, graph_.add_routing(ip(1)), storage});
    FAIL() << "started with a damaged boot count";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("auth/boot is damaged"));
  }
}

// OLSR is plain RFC 3626 (other daemons must understand it), so a node with
// another key is an OLSR neighbour; but every agent message between the two
// fails authentication, so no agent traffic crosses.
TEST_F(NodeTest, NodeWithAnotherMeshKeyExchangesNoAgentMessages) {
  graph_.connect(ip(1), ip(4), milliseconds(1), milliseconds(1));
  Node& a = add(1);
  Node& stranger = add(4, 'b');
  env_.advance(seconds(5));
  EXPECT_THAT(neighbour_ids(a), ::testing::ElementsAre(ip(4)));
  const auto result = ping(a, ip(4), seconds(1), seconds(2));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->status, core::RequestStatus::timeout);
  EXPECT_GT(stranger.metrics().total("auth_dropped_total"), 0u);
  EXPECT_THAT(stranger.status()[0].summary,
              ::testing::EndsWith(std::to_string(stranger.metrics().total("auth_dropped_total")) + " auth drops"));
}

TEST_F(NodeTest, StatusHasOneLinePerLayerBottomUpAndUptime) {
  Node& a = add(1);
  add(2);
  env_.advance(seconds(3));
  const auto lines = a.status();
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[0].layer, "core");
  EXPECT_EQ(lines[1].layer, "routing");
  EXPECT_THAT(lines[1].summary, HasSubstr("olsr: 1 symmetric neighbours"));
  EXPECT_THAT(lines[1].summary, HasSubstr("1 routes"));
  EXPECT_EQ(lines[2].layer, "messenger");
  EXPECT_THAT(lines[2].summary, HasSubstr("0 pending requests"));
  EXPECT_EQ(lines[3].layer, "membership");
  EXPECT_THAT(lines[3].summary, HasSubstr("incarnation 0"));
  EXPECT_EQ(lines[4].layer, "mutex");
  EXPECT_EQ(lines[4].summary, "camera: 0 resources, 0 held, 0 waiting");
  EXPECT_EQ(lines[5].layer, "kgroup");
  EXPECT_EQ(lines[5].summary, "k=5: serving in 0 groups, leading 0; 0 client writes in flight");
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(lines[6].layer, "devices");
  EXPECT_EQ(lines[6].summary,
            "catalog: 0 devices, run-time version 0; leading 0, 0 subscribers, watching 0, 0 client commands done");
  EXPECT_EQ(lines[7].layer, "routines");
  EXPECT_EQ(lines[7].summary, "catalog: 0 routines; leading 0, 0 triggers, 0 invocations ended");
  EXPECT_EQ(a.uptime(), seconds(3));
}

}  // namespace
}  // namespace mesh::agent
