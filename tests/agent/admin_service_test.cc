#include "agent/admin_service.h"

#include <memory>
#include <optional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/log.h"
#include "core/version.h"
#include "tests/agent/test_world.h"

namespace mesh::agent {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::Contains;
using ::testing::HasSubstr;
using testing::ip;
using testing::LinkGraph;
using testing::ManualEnv;
using testing::test_config;

class AdminServiceTest : public ::testing::Test {
 protected:
  AdminServiceTest() : graph_(env_) {
    graph_.connect(ip(1), ip(2), milliseconds(4), milliseconds(6));
    for (uint8_t last : {1, 2}) {
      core::Link& link = graph_.add(ip(last));
      nodes_[last] = std::make_unique<Node>(test_config(last),
                                            NodeContext{env_, link, graph_.add_routing(ip(last)), storage_[last]});
      nodes_[last]->start();
    }
    service_ = std::make_unique<AdminService>(*nodes_[1]);
    env_.advance(seconds(5));
  }
  ~AdminServiceTest() override { core::set_log_level("info"); }

  // Handles a request and runs the world until it is answered (or `run` passes).
  std::optional<proto::AdminResponse> ask(const proto::AdminRequest& request, core::Duration run = seconds(10)) {
    std::optional<proto::AdminResponse> response;
    int replies = 0;
    service_->handle(request, [&](proto::AdminResponse r) {
      response = std::move(r);
      ++replies;
    });
    env_.advance(run);
    EXPECT_LE(replies, 1) << "answered twice";
    return response;
  }

  ManualEnv env_;
  LinkGraph graph_;
  std::map<uint8_t, core::MemoryStorage> storage_;
  std::map<uint8_t, std::unique_ptr<Node>> nodes_;
  std::unique_ptr<AdminService> service_;
};

TEST_F(AdminServiceTest, StatusDescribesTheNodeItsLayersAndNeighbours) {
  proto::AdminRequest request;
  request.mutable_status();
  const auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->error(), "");
  ASSERT_TRUE(response->has_status());
  const proto::StatusReply& status = response->status();
  EXPECT_EQ(status.node_id(), "10.0.0.1");
  EXPECT_EQ(status.name(), "node1");
  EXPECT_EQ(status.version(), kVersion);
  EXPECT_DOUBLE_EQ(status.uptime_s(), 5.0);
  ASSERT_GE(status.layers_size(), 3);
  EXPECT_EQ(status.layers(0).layer(), "core");
  EXPECT_THAT(status.layers(0).summary(), HasSubstr("boot 1"));
  EXPECT_EQ(status.layers(1).layer(), "routing");
  EXPECT_EQ(status.layers(2).layer(), "messenger");
  ASSERT_EQ(status.neighbours_size(), 1);
  EXPECT_EQ(status.neighbours(0).id(), "10.0.0.2");
  EXPECT_GE(status.neighbours(0).last_heard_s(), 0.0);
  EXPECT_LE(status.neighbours(0).last_heard_s(), core::to_seconds(nodes_[1]->config().routing.hello_interval));
}

TEST_F(AdminServiceTest, NeighborsRoutesAndTopologyShowOlsrState) {
  proto::AdminRequest request;
  request.mutable_neighbors();
  auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_neighbors()) << response->error();
  ASSERT_EQ(response->neighbors().neighbors_size(), 1);
  const proto::OlsrNeighbor& n = response->neighbors().neighbors(0);
  EXPECT_EQ(n.id(), "10.0.0.2");
  EXPECT_EQ(n.link_address(), "10.0.0.2");
  EXPECT_EQ(n.status(), "symmetric");
  EXPECT_EQ(n.willingness(), 3u);
  // Neither needs the other to reach a third node.
  EXPECT_FALSE(n.mpr());
  EXPECT_FALSE(n.mpr_selector());
  EXPECT_EQ(response->neighbors().two_hop_size(), 0);

  request.mutable_routes();
  response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_routes()) << response->error();
  ASSERT_EQ(response->routes().routes_size(), 1);
  EXPECT_EQ(response->routes().routes(0).destination(), "10.0.0.2");
  EXPECT_EQ(response->routes().routes(0).next_hop(), "10.0.0.2");
  EXPECT_EQ(response->routes().routes(0).hops(), 1u);

  request.mutable_topology();
  response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_topology()) << response->error();
  // Two nodes need no MPRs, so nobody sends a TC.
  EXPECT_EQ(response->topology().entries_size(), 0);
}

TEST_F(AdminServiceTest, MembersListsMedleysViewAndGoneMembersOnRequest) {
  env_.advance(seconds(20));
  proto::AdminRequest request;
  request.mutable_members();
  auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_members()) << response->error();
  const proto::MembersReply& reply = response->members();
  ASSERT_EQ(reply.members_size(), 2);
  EXPECT_EQ(reply.version(), nodes_[1]->medley().version());
  const proto::MemberEntry& self = reply.members(0);
  EXPECT_EQ(self.id(), "10.0.0.1");
  EXPECT_EQ(self.name(), "node1");
  EXPECT_EQ(self.state(), "alive");
  EXPECT_EQ(self.incarnation(), nodes_[1]->medley().incarnation());
  EXPECT_EQ(self.hops(), 0);
  const proto::MemberEntry& other = reply.members(1);
  EXPECT_EQ(other.id(), "10.0.0.2");
  EXPECT_EQ(other.name(), "node2");
  EXPECT_EQ(other.state(), "alive");
  EXPECT_EQ(other.hops(), 1);
  EXPECT_GE(other.last_heard_s_ago(), 0.0);
  EXPECT_LE(other.last_heard_s_ago(), 20.0);

  nodes_[2]->leave();
  env_.advance(seconds(3));
  response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value() && response->has_members()) << response->error();
  ASSERT_EQ(response->members().members_size(), 1);
  EXPECT_EQ(response->members().members(0).id(), "10.0.0.1");

  request.mutable_members()->set_all(true);
  response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value() && response->has_members()) << response->error();
  ASSERT_EQ(response->members().members_size(), 2);
  EXPECT_EQ(response->members().members(1).id(), "10.0.0.2");
  EXPECT_EQ(response->members().members(1).state(), "left");
}

proto::AdminRequest lock_request(const std::string& resource, uint32_t timeout_ms = 0) {
  proto::AdminRequest request;
  request.mutable_lock()->set_resource(resource);
  request.mutable_lock()->set_timeout_ms(timeout_ms);
  return request;
}

TEST_F(AdminServiceTest, LocksBelongToTheirConnectionAndGoWhenItCloses) {
  env_.advance(seconds(20));
  std::map<int, std::vector<proto::AdminResponse>> answers;
  const auto collect = [&](int connection) {
    return [&answers, connection](proto::AdminResponse r) { answers[connection].push_back(std::move(r)); };
  };
  service_->handle(lock_request("pump"), collect(7), 7);
  env_.advance(seconds(2));
  ASSERT_EQ(answers[7].size(), 1u);
  ASSERT_TRUE(answers[7][0].has_lock()) << answers[7][0].error();
  EXPECT_EQ(answers[7][0].lock().resource(), "pump");
  const uint64_t first_token = answers[7][0].lock().fencing_token();

  // Connection 8 waits behind 7; 9 gives up after its timeout.
  service_->handle(lock_request("pump"), collect(8), 8);
  service_->handle(lock_request("pump", 500), collect(9), 9);
  env_.advance(seconds(2));
  EXPECT_TRUE(answers[8].empty());
  ASSERT_EQ(answers[9].size(), 1u);
  EXPECT_THAT(answers[9][0].error(), HasSubstr("not granted within the timeout"));

  proto::AdminRequest locks;
  locks.mutable_locks();
  auto response = ask(locks, core::Duration::zero());
  ASSERT_TRUE(response.has_value() && response->has_locks()) << response->error();
  ASSERT_EQ(response->locks().locks_size(), 1);
  EXPECT_EQ(response->locks().locks(0).resource(), "pump");
  EXPECT_EQ(response->locks().locks(0).phase(), "held");
  EXPECT_EQ(response->locks().locks(0).fencing_token(), first_token);
  EXPECT_EQ(response->locks().locks(0).queued_locally(), 1u);

  // Another connection cannot unlock it; closing the holder's hands it on.
  proto::AdminRequest unlock;
  unlock.mutable_unlock()->set_resource("pump");
  std::optional<proto::AdminResponse> unlocked;
  service_->handle(
      unlock, [&](proto::AdminResponse r) { unlocked = std::move(r); }, 8);
  ASSERT_TRUE(unlocked && unlocked->has_unlock());
  EXPECT_FALSE(unlocked->unlock().released());
  service_->connection_closed(7);
  env_.advance(seconds(2));
  ASSERT_EQ(answers[8].size(), 1u);
  ASSERT_TRUE(answers[8][0].has_lock()) << answers[8][0].error();
  EXPECT_GT(answers[8][0].lock().fencing_token(), first_token);

  unlocked.reset();
  service_->handle(
      unlock, [&](proto::AdminResponse r) { unlocked = std::move(r); }, 8);
  ASSERT_TRUE(unlocked && unlocked->has_unlock());
  EXPECT_TRUE(unlocked->unlock().released());
  EXPECT_FALSE(nodes_[1]->camera().held("pump").has_value());

  response = ask(lock_request(""), core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("cannot lock ''"));
  EXPECT_EQ(answers[7].size(), 1u) << "the closed connection got a second answer";
}

TEST_F(AdminServiceTest, MetricsCarryCountersHistogramsAndLabels) {
  proto::AdminRequest ping;
  ping.mutable_ping()->set_node("10.0.0.2");
  ASSERT_TRUE(ask(ping).has_value());

  proto::AdminRequest request;
  request.mutable_metrics();
  const auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  ASSERT_TRUE(response->has_metrics());
  const proto::MetricsReply& metrics = response->metrics();
  ASSERT_GT(metrics.counters_size(), 0);
  bool labelled = false;
  for (const auto& counter : metrics.counters()) {
    EXPECT_FALSE(counter.name().empty());
    EXPECT_THAT(counter.series(), ::testing::StartsWith(counter.name()));
    if (!counter.labels().empty()) labelled = true;
  }
  EXPECT_TRUE(labelled) << "no counter carried its labels";
  const auto& source = nodes_[1]->metrics().counters();
  EXPECT_EQ(static_cast<size_t>(metrics.counters_size()), source.size());
  bool saw_rtt = false;
  for (const auto& histogram : metrics.histograms()) {
    if (histogram.count() == 0) continue;
    EXPECT_LE(histogram.p50(), histogram.p99() + 1e-9);
    EXPECT_LE(histogram.p99(), histogram.max() * 1.05 + 1e-9);
    uint64_t in_buckets = 0;
    for (const auto& bucket : histogram.buckets()) {
      EXPECT_GT(bucket.count(), 0u);
      EXPECT_LE(bucket.value(), histogram.max() * 1.04 + 1e-9) << "a bucket beyond the largest value";
      in_buckets += bucket.count();
    }
    EXPECT_EQ(in_buckets, histogram.count()) << histogram.series() << ": the buckets do not add up to the count";
    if (histogram.name() == "request_rtt_ms") saw_rtt = true;
  }
  EXPECT_TRUE(saw_rtt) << "the echo's round trip is not in the histograms";
}

TEST_F(AdminServiceTest, LogLevelForOneLayer) {
  proto::AdminRequest request;
  request.mutable_log_level()->set_level("debug");
  request.mutable_log_level()->set_layer("routing");
  const auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->error(), "");
  ASSERT_TRUE(response->has_log_level());
  EXPECT_EQ(response->log_level().level(), "debug");
  EXPECT_THAT(response->log_level().layers(), ::testing::ElementsAre("routing"));
  EXPECT_EQ(core::log("routing").level(), spdlog::level::debug);
}

TEST_F(AdminServiceTest, LogLevelForEveryLayer) {
  proto::AdminRequest request;
  request.mutable_log_level()->set_level("warn");
  const auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->error(), "");
  EXPECT_THAT(response->log_level().layers(), Contains("core"));
  EXPECT_THAT(response->log_level().layers(), Contains("agent"));
  EXPECT_EQ(core::log("core").level(), spdlog::level::warn);
  EXPECT_EQ(core::log("agent").level(), spdlog::level::warn);
}

TEST_F(AdminServiceTest, BadLogLevelListsTheValidOnes) {
  const auto before = core::log("core").level();
  proto::AdminRequest request;
  request.mutable_log_level()->set_level("loud");
  const auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("unknown log level 'loud'"));
  EXPECT_THAT(response->error(), HasSubstr("trace, debug, info, warn, error, critical, off"));
  EXPECT_FALSE(response->has_log_level());
  EXPECT_EQ(core::log("core").level(), before);
}

TEST_F(AdminServiceTest, BadLogLayerListsTheValidOnes) {
  proto::AdminRequest request;
  request.mutable_log_level()->set_level("debug");
  request.mutable_log_level()->set_layer("nonsense");
  const auto response = ask(request, core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("unknown layer 'nonsense'"));
  EXPECT_THAT(response->error(), HasSubstr("routing"));
}

TEST_F(AdminServiceTest, PingAnswersWhenTheEchoReturns) {
  proto::AdminRequest request;
  request.mutable_ping()->set_node("10.0.0.2");
  std::optional<proto::AdminResponse> response;
  service_->handle(request, [&](proto::AdminResponse r) { response = std::move(r); });
  EXPECT_FALSE(response.has_value()) << "answered before the echo could travel";
  env_.advance(seconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_EQ(response->error(), "");
  ASSERT_TRUE(response->has_ping());
  EXPECT_EQ(response->ping().node(), "10.0.0.2");
  EXPECT_EQ(response->ping().hops(), 1u);
  EXPECT_DOUBLE_EQ(response->ping().rtt_ms(), 10.0);
  EXPECT_EQ(response->ping().attempts(), 1u);
}

TEST_F(AdminServiceTest, PingToSilentNodeReportsTheTimeout) {
  proto::AdminRequest request;
  request.mutable_ping()->set_node("10.0.0.9");
  request.mutable_ping()->set_timeout_ms(1500);
  const auto response = ask(request, seconds(2));
  ASSERT_TRUE(response.has_value());
  EXPECT_FALSE(response->has_ping());
  EXPECT_THAT(response->error(), HasSubstr("no reply from 10.0.0.9 within 1.5 s"));
  EXPECT_THAT(response->error(), HasSubstr("no route to 10.0.0.9"));
}

TEST_F(AdminServiceTest, PingToBadAddressIsRefusedAtOnce) {
  proto::AdminRequest request;
  request.mutable_ping()->set_node("banana");
  std::optional<proto::AdminResponse> response;
  service_->handle(request, [&](proto::AdminResponse r) { response = std::move(r); });
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("not an IPv4 address: 'banana'"));
}

TEST_F(AdminServiceTest, EmptyCommandExplainsVersionSkew) {
  const auto response = ask(proto::AdminRequest(), core::Duration::zero());
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("unknown command; this agent speaks"));
  EXPECT_THAT(response->error(), HasSubstr(kVersion));
}

TEST_F(AdminServiceTest, KgroupComputesTheGroupFromThisNodesViewAlone) {
  proto::AdminRequest request;
  request.mutable_kgroup()->set_target("device:lamp");
  const auto response = ask(request, milliseconds(1));
  ASSERT_TRUE(response.has_value() && response->has_kgroup()) << (response ? response->error() : "no answer");
  const proto::KgroupReply& reply = response->kgroup();
  EXPECT_EQ(reply.target(), "device:lamp");
  // k = 5 by default, but only two nodes are alive.
  ASSERT_EQ(reply.members_size(), 2);
  EXPECT_EQ(reply.leader(), reply.members(0).id());
  EXPECT_NE(reply.members(0).id(), reply.members(1).id());
  EXPECT_EQ(reply.members(0).score().size(), 16u);
  EXPECT_LT(reply.members(0).score(), reply.members(1).score());
  EXPECT_THAT(reply.selection_json(), HasSubstr("{\"target\": \"device:lamp\", \"epoch\": "));
  EXPECT_THAT(reply.selection_json(), HasSubstr("\"leader\": \"" + reply.leader() + "\""));
  EXPECT_EQ(reply.records_size(), 0);
}

TEST_F(AdminServiceTest, KgroupRejectsWhatIsNoTarget) {
  for (const char* bad : {"lamp", "sensor:x", "device:", ""}) {
    proto::AdminRequest request;
    request.mutable_kgroup()->set_target(bad);
    auto response = ask(request, milliseconds(1));
    ASSERT_TRUE(response.has_value());
    EXPECT_THAT(response->error(), HasSubstr("device:ID, cluster:ID or routine:ID")) << bad;
    proto::AdminRequest write;
    write.mutable_kgroup_write()->set_target(bad);
    write.mutable_kgroup_write()->set_text("x");
    response = ask(write, milliseconds(1));
    ASSERT_TRUE(response.has_value());
    EXPECT_THAT(response->error(), HasSubstr("is not a k-group target")) << bad;
  }
}

TEST_F(AdminServiceTest, KgroupLogOfATargetThisNodeServesNoGroupOf) {
  proto::AdminRequest request;
  request.mutable_kgroup()->set_target("routine:night");
  request.mutable_kgroup()->set_log(true);
  const auto response = ask(request, milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("serves in no group of routine:night"));
}

TEST_F(AdminServiceTest, KgroupWriteCreatesTheGroupCommitsAndTheLogsShowIt) {
  std::vector<uint64_t> seqs;
  for (const char* text : {"on", "off", "on at 18:00"}) {
    proto::AdminRequest request;
    request.mutable_kgroup_write()->set_target("device:lamp");
    request.mutable_kgroup_write()->set_text(text);
    const auto response = ask(request);
    ASSERT_TRUE(response.has_value() && response->has_kgroup_write()) << (response ? response->error() : "none");
    seqs.push_back(response->kgroup_write().seq());
    EXPECT_GE(response->kgroup_write().attempts(), 1u);
  }
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 2, 3}));

  proto::AdminRequest groups;
  groups.mutable_kgroups();
  auto response = ask(groups, milliseconds(1));
  ASSERT_TRUE(response.has_value() && response->has_kgroups()) << response->error();
  ASSERT_EQ(response->kgroups().groups_size(), 1);
  const proto::KgroupEntryStatus& group = response->kgroups().groups(0);
  EXPECT_EQ(group.target(), "device:lamp");
  EXPECT_EQ(group.members_size(), 2);
  EXPECT_GE(group.term(), 1u);
  EXPECT_FALSE(group.leader().empty());
  EXPECT_TRUE(group.role() == "leader" || group.role() == "follower") << group.role();
  EXPECT_EQ(group.log_entries(), 3u);

  // Both members hold the same log (node 2's through its own service).
  for (uint8_t node : {1, 2}) {
    AdminService service(*nodes_[node]);
    proto::AdminRequest log;
    log.mutable_kgroup()->set_target("device:lamp");
    log.mutable_kgroup()->set_log(true);
    std::optional<proto::AdminResponse> answer;
    service.handle(log, [&](proto::AdminResponse r) { answer = std::move(r); });
    ASSERT_TRUE(answer.has_value() && answer->has_kgroup()) << (answer ? answer->error() : "none");
    const proto::KgroupReply& reply = answer->kgroup();
    ASSERT_EQ(reply.records_size(), 3) << "node " << int{node};
    EXPECT_EQ(reply.records(0).seq(), 1u);
    EXPECT_EQ(reply.records(0).text(), "on");
    EXPECT_EQ(reply.records(2).seq(), 3u);
    EXPECT_EQ(reply.records(2).text(), "on at 18:00");
    EXPECT_FALSE(reply.log_sealed());
  }
}

TEST_F(AdminServiceTest, KgroupLogThroughTheLeaderNamesTheLeaderAndTermFromEitherNode) {
  for (const char* text : {"on", "off"}) {
    proto::AdminRequest request;
    request.mutable_kgroup_write()->set_target("device:lamp");
    request.mutable_kgroup_write()->set_text(text);
    const auto response = ask(request);
    ASSERT_TRUE(response.has_value() && response->has_kgroup_write()) << (response ? response->error() : "none");
  }
  const kgroup::GroupReplica* replica = nodes_[1]->kgroups().host().latest("device:lamp");
  ASSERT_NE(replica, nullptr);
  const std::string leader = replica->leader().to_string();
  // One node leads and answers itself; the other asks it.
  for (uint8_t node : {1, 2}) {
    AdminService service(*nodes_[node]);
    proto::AdminRequest log;
    log.mutable_kgroup()->set_target("device:lamp");
    log.mutable_kgroup()->set_log(true);
    log.mutable_kgroup()->set_through_leader(true);
    log.mutable_kgroup()->set_timeout_ms(5000);
    std::optional<proto::AdminResponse> answer;
    service.handle(log, [&](proto::AdminResponse r) { answer = std::move(r); });
    env_.advance(seconds(5));
    ASSERT_TRUE(answer.has_value() && answer->has_kgroup()) << (answer ? answer->error() : "none");
    const proto::KgroupReply& reply = answer->kgroup();
    EXPECT_EQ(reply.log_leader(), leader) << "asked at node " << int{node};
    EXPECT_EQ(reply.log_term(), replica->leader_term());
    EXPECT_EQ(reply.log_role(), "leader");
    ASSERT_EQ(reply.records_size(), 2);
    EXPECT_EQ(reply.records(1).seq(), 2u);
    EXPECT_EQ(reply.records(1).text(), "off");
  }
}

TEST_F(AdminServiceTest, KgroupThroughTheLeaderWantsTheLogAndReportsATimeout) {
  proto::AdminRequest request;
  request.mutable_kgroup()->set_target("device:lamp");
  request.mutable_kgroup()->set_through_leader(true);
  auto response = ask(request, milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("set log too"));
  proto::AdminRequest write;
  write.mutable_kgroup_write()->set_target("device:lamp");
  write.mutable_kgroup_write()->set_text("on");
  const auto written = ask(write);
  ASSERT_TRUE(written.has_value() && written->has_kgroup_write()) << (written ? written->error() : "none");
  // Cut in two, neither member has a quorum of the group of two: its leader's
  // lease lapses and no read is answered.
  graph_.disconnect(ip(1), ip(2));
  env_.advance(seconds(2));  // beyond the lease (600 ms): until then the leader may still answer
  request.mutable_kgroup()->set_log(true);
  request.mutable_kgroup()->set_timeout_ms(2000);
  response = ask(request, seconds(5));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("no leader of device:lamp answered a read of its log"));
}

TEST_F(AdminServiceTest, KgroupWriteRefusesTextOverTheLimitAndReportsATimeout) {
  proto::AdminRequest request;
  request.mutable_kgroup_write()->set_target("device:lamp");
  request.mutable_kgroup_write()->set_text(std::string(nodes_[1]->kgroups().config().max_text_bytes + 1, 'x'));
  auto response = ask(request, milliseconds(1));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("a log entry holds at most"));

  // Node 2 gone silent: the group (both nodes) cannot commit.
  graph_.disconnect(ip(1), ip(2));
  request.mutable_kgroup_write()->set_text("unreachable");
  request.mutable_kgroup_write()->set_timeout_ms(3000);
  response = ask(request, seconds(5));
  ASSERT_TRUE(response.has_value());
  EXPECT_THAT(response->error(), HasSubstr("not acknowledged"));
}

}  // namespace
}  // namespace mesh::agent
