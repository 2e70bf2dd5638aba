// Unit tests of mutex/: request order, the codec, the slow-path tree
// bookkeeping, the size estimator, persistence, and Camera's API, OK-set
// handling, restarts and the one-datagram OK on small simulated meshes.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/log.h"
#include "core/memory_storage.h"
#include "core/rng.h"
#include "mutex/camera_store.h"
#include "mutex/mutex_codec.h"
#include "mutex/network_size_estimator.h"
#include "mutex/request_id.h"
#include "mutex/slow_path.h"
#include "tests/mutex/camera_world.h"

namespace mesh::mutex {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

core::NodeId node(uint8_t last) { return core::NodeId::from_octets(10, 0, 0, last); }

TEST(RequestOrder, SequenceFirstThenNodeThenNonce) {
  const RequestId a{1, node(9), 7};
  const RequestId b{2, node(1), 0};
  const RequestId c{2, node(2), 0};
  const RequestId d{2, node(2), 1};
  EXPECT_LT(a, b);  // lower sequence number wins whatever the node
  EXPECT_LT(b, c);  // tie on sequence: lower node id
  EXPECT_LT(c, d);  // same node and sequence, another life: the nonce decides
  EXPECT_FALSE(d < c);
  EXPECT_EQ(c, (RequestId{2, node(2), 0}));
}

TEST(RequestOrder, IsATotalOrderOnRandomRequests) {
  core::Rng rng(5);
  std::vector<RequestId> ids;
  for (int i = 0; i < 200; ++i) {
    ids.push_back(
        RequestId{rng.below(5), node(static_cast<uint8_t>(rng.below(4))), static_cast<uint32_t>(rng.below(3))});
  }
  for (const auto& x : ids) {
    for (const auto& y : ids) {
      const int relations = (x < y) + (y < x) + (x == y);
      ASSERT_EQ(relations, 1) << x.to_string() << " vs " << y.to_string();
      for (const auto& z : ids) {
        if (x < y && y < z) {
          ASSERT_LT(x, z);
        }
      }
    }
  }
}

proto::MutexBody request_body(const std::string& resource, uint64_t seq, uint32_t who) {
  proto::MutexBody body;
  auto* req = body.mutable_request();
  req->set_resource(resource);
  req->mutable_id()->set_seq(seq);
  req->mutable_id()->set_node(who);
  return body;
}

TEST(MutexCodec, AcceptsWellFormedBodies) {
  auto decoded = decode_mutex_body(request_body("pump", 3, 0x0a000001).SerializeAsString());
  ASSERT_TRUE(decoded) << to_string(decoded.error());
  EXPECT_EQ(from_proto(decoded->request().id()), (RequestId{3, node(1), 0}));

  proto::MutexBody ack;
  ack.mutable_ack();
  EXPECT_TRUE(decode_mutex_body(ack.SerializeAsString()));
}

TEST(MutexCodec, RejectsGarbageAndMalformedBodies) {
  EXPECT_EQ(decode_mutex_body("\xff\xff\xff\xff").error(), MutexCodecError::malformed);
  EXPECT_EQ(decode_mutex_body("").error(), MutexCodecError::empty);
  EXPECT_EQ(decode_mutex_body(request_body("", 1, 1).SerializeAsString()).error(), MutexCodecError::bad_resource);
  EXPECT_EQ(decode_mutex_body(request_body(std::string(kMaxResourceName + 1, 'x'), 1, 1).SerializeAsString()).error(),
            MutexCodecError::bad_resource);
  EXPECT_EQ(decode_mutex_body(request_body("pump", 0, 1).SerializeAsString()).error(), MutexCodecError::bad_request);
  EXPECT_EQ(decode_mutex_body(request_body("pump", 1, 0).SerializeAsString()).error(), MutexCodecError::bad_request);

  proto::MutexBody no_id;
  no_id.mutable_release()->set_resource("pump");
  EXPECT_EQ(decode_mutex_body(no_id.SerializeAsString()).error(), MutexCodecError::bad_request);

  proto::MutexBody huge;
  auto* ok = huge.mutable_ok();
  ok->set_resource("pump");
  ok->mutable_id()->set_seq(1);
  ok->mutable_id()->set_node(1);
  for (int i = 0; i <= kMaxListEntries; ++i) ok->add_recently_oked(static_cast<uint32_t>(i + 1));
  EXPECT_EQ(decode_mutex_body(huge.SerializeAsString()).error(), MutexCodecError::too_many);

  // Random bytes never crash the decoder.
  core::Rng rng(11);
  for (int i = 0; i < 5000; ++i) {
    std::string bytes(rng.below(64), '\0');
    for (auto& c : bytes) c = static_cast<char>(rng.below(256));
    (void)decode_mutex_body(bytes);
  }
}

// Root 1 with children 2 and 3; 2 has children 4 and 5; 4 has child 6.
SlowTree sample_tree() {
  SlowTree t;
  t.is_root = true;
  t.own_ok = true;
  t.children = {node(2), node(3)};
  t.awaiting = {node(2), node(3)};
  t.reported[node(2)] = SlowTree::Report{{{node(4), node(2)}, {node(5), node(2)}, {node(6), node(4)}}, 2};
  t.reported[node(3)] = SlowTree::Report{{}, 2};
  return t;
}

TEST(SlowTree, LimitDepthKeepsLevelsAndSurvivesCycles) {
  std::vector<TreeEdge> edges{{node(2), node(1)}, {node(3), node(2)}, {node(4), node(3)}, {node(1), node(4)}};
  auto two = limit_depth(node(1), edges, 2);
  EXPECT_EQ(two.size(), 2u);
  auto all = limit_depth(node(1), edges, 10);
  EXPECT_EQ(all.size(), 3u);  // the edge back to the root is dropped
}

TEST(SlowTree, FailedChildIsReplacedByItsChildren) {
  SlowTree t = sample_tree();
  auto adopted = t.adopt(node(2), [](core::NodeId) { return false; });
  ASSERT_TRUE(adopted);
  std::sort(adopted->begin(), adopted->end());
  EXPECT_EQ(*adopted, (std::vector<core::NodeId>{node(4), node(5)}));
  EXPECT_EQ(t.awaiting, (std::set<core::NodeId>{node(3), node(4), node(5)}));
  EXPECT_FALSE(t.subtree_ok());
  t.ok_from = {node(3), node(4), node(5)};
  EXPECT_TRUE(t.subtree_ok());
  // What is known below an adopted node lets a later failure be adopted too.
  auto again = t.adopt(node(4), [](core::NodeId) { return false; });
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->empty());  // 4 had already said OK for its subtree
}

TEST(SlowTree, FailedGrandchildIsSkippedWhenKnown) {
  SlowTree t = sample_tree();
  auto adopted = t.adopt(node(2), [](core::NodeId n) { return n == node(4); });
  ASSERT_TRUE(adopted);
  std::sort(adopted->begin(), adopted->end());
  EXPECT_EQ(*adopted, (std::vector<core::NodeId>{node(5), node(6)}));
}

TEST(SlowTree, UnknownSubtreeNeedsARebuild) {
  SlowTree t = sample_tree();
  t.reported.erase(node(3));
  EXPECT_FALSE(t.adopt(node(3), [](core::NodeId) { return false; }));
  SlowTree u = sample_tree();
  u.joins_pending.insert(node(7));
  EXPECT_FALSE(u.adopt(node(7), [](core::NodeId) { return false; }));
  // Failed nodes at the deepest reported level hide their children.
  SlowTree v = sample_tree();
  EXPECT_FALSE(v.adopt(node(2), [](core::NodeId n) { return n == node(6) || n == node(4); }));
}

TEST(SlowTree, ParentFailureMovesToTheNextAncestor) {
  SlowTree t;
  t.ancestors = {node(2), node(1)};
  t.tree_sent = true;
  t.ok_sent = true;
  EXPECT_TRUE(t.drop_ancestor(node(2)));
  EXPECT_EQ(t.parent(), node(1));
  EXPECT_FALSE(t.tree_sent);  // owed again to the new parent
  EXPECT_FALSE(t.ok_sent);
  EXPECT_FALSE(t.drop_ancestor(node(9)));
}

TEST(NetworkSizeEstimator, CountsRecentIdsWithMarginAndFloor) {
  NetworkSizeOptions o;
  o.window = seconds(10);
  o.margin = 0.5;
  o.floor = 0;
  NetworkSizeEstimator e(o);
  core::TimePoint t0{};
  for (uint8_t i = 1; i <= 4; ++i) e.observe(node(i), t0);
  EXPECT_EQ(e.upper(t0), 6u);
  e.observe(node(1), t0 + seconds(8));
  EXPECT_EQ(e.upper(t0 + seconds(12)), 2u);  // three ids aged out
  o.floor = 20;
  NetworkSizeEstimator f(o);
  f.observe(node(1), t0);
  EXPECT_EQ(f.upper(t0), 20u);
}

// Camera on a three-node line 0 - 1 - 2.
struct Tiny {
  explicit Tiny(uint64_t seed, Algorithm algorithm = Algorithm::camera) : world(seed, options(algorithm)) {
    for (size_t i = 0; i < 3; ++i) world.set_list(i, {0, 1, 2});
  }
  static testing::WorldOptions options(Algorithm algorithm) {
    testing::WorldOptions o;
    o.nodes = 3;
    o.topology = "line";
    o.link.delay = milliseconds(5);
    o.camera.algorithm = algorithm;
    o.camera.slow_path_enabled = false;
    return o;
  }
  void run_for(core::Duration d) { world.simulator().run_for(d); }
  testing::CameraWorld world;
};

TEST(CameraApi, LoneRequesterIsGrantedAndTokensGrow) {
  Tiny t(1);
  std::vector<uint64_t> tokens;
  for (int round = 0; round < 3; ++round) {
    bool granted = false;
    t.world.camera(0).acquire("pump", seconds(5), [&](const AcquireResult& r) {
      ASSERT_TRUE(r);
      granted = true;
      tokens.push_back(r->fencing_token);
    });
    t.run_for(milliseconds(100));
    ASSERT_TRUE(granted);
    ASSERT_TRUE(t.world.camera(0).held("pump"));
    EXPECT_TRUE(t.world.camera(0).release("pump"));
    EXPECT_FALSE(t.world.camera(0).release("pump"));
    t.run_for(milliseconds(100));
  }
  EXPECT_LT(tokens[0], tokens[1]);
  EXPECT_LT(tokens[1], tokens[2]);
}

TEST(CameraApi, SameNodeRequestsAreServedInTurn) {
  Tiny t(2);
  std::vector<int> order;
  t.world.camera(1).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) {
    ASSERT_TRUE(r);
    order.push_back(1);
  });
  t.world.camera(1).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) {
    ASSERT_TRUE(r);
    order.push_back(2);
  });
  t.run_for(milliseconds(200));
  ASSERT_EQ(order, std::vector<int>{1});
  auto status = t.world.camera(1).status();
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(status[0].queued_locally, 1u);
  t.world.camera(1).release("pump");
  t.run_for(milliseconds(200));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(CameraApi, TimeoutWhileAnotherNodeHolds) {
  Tiny t(3);
  t.world.camera(0).acquire("pump", Camera::kNoTimeout, [](const AcquireResult& r) { ASSERT_TRUE(r); });
  t.run_for(milliseconds(100));
  std::optional<AcquireError> error;
  t.world.camera(2).acquire("pump", milliseconds(300), [&](const AcquireResult& r) {
    ASSERT_FALSE(r);
    error = r.error();
  });
  t.run_for(seconds(1));
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, AcquireError::timeout);
  // The abandoned request holds nobody back: node 1 gets it after node 0.
  bool granted = false;
  t.world.camera(1).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { granted = r.has_value(); });
  t.run_for(milliseconds(200));
  EXPECT_FALSE(granted);
  t.world.camera(0).release("pump");
  t.run_for(milliseconds(200));
  EXPECT_TRUE(granted);
}

TEST(CameraApi, CancelWithdrawsAndBadNamesAreRefused) {
  Tiny t(4);
  t.world.camera(0).acquire("pump", Camera::kNoTimeout, [](const AcquireResult&) {});
  t.run_for(milliseconds(100));
  bool called = false;
  AcquireHandle h = t.world.camera(2).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult&) { called = true; });
  t.run_for(milliseconds(100));
  EXPECT_TRUE(t.world.camera(2).cancel(h));
  EXPECT_FALSE(t.world.camera(2).cancel(h));
  t.world.camera(0).release("pump");
  t.run_for(milliseconds(200));
  EXPECT_FALSE(called);
  EXPECT_FALSE(t.world.camera(2).held("pump"));

  std::optional<AcquireError> error;
  t.world.camera(0).acquire("", seconds(1), [&](const AcquireResult& r) { error = r.error(); });
  ASSERT_TRUE(error);
  EXPECT_EQ(*error, AcquireError::bad_resource);
}

// Symmetric ignorance, hand-checked: 0 and 2 know only 1. While 0 holds,
// 1's OK to 2 names 0, so 2 asks 0 and waits for it.
TEST(CameraOkSets, RequesterLearnsTheHolderFromItsFriendsOk) {
  Tiny t(5);
  t.world.set_list(0, {1});
  t.world.set_list(2, {1});
  t.world.set_list(1, {0, 2});
  t.world.camera(0).acquire("pump", Camera::kNoTimeout, [](const AcquireResult&) {});
  t.run_for(milliseconds(100));
  auto friend_status = t.world.camera(1).status();
  ASSERT_EQ(friend_status.size(), 1u);
  EXPECT_EQ(friend_status[0].recently_oked, 1u);
  bool granted = false;
  t.world.camera(2).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { granted = r.has_value(); });
  t.run_for(milliseconds(300));
  EXPECT_FALSE(granted);
  EXPECT_EQ(t.world.camera(2).learned_nodes(), 1u);
  EXPECT_EQ(t.world.camera(0).status()[0].deferred, 1u);
  t.world.camera(0).release("pump");
  t.run_for(milliseconds(300));
  EXPECT_TRUE(granted);
  // RELEASE reached the friend: 0 is out of its set; 2 is in it now.
  EXPECT_EQ(t.world.camera(1).status()[0].recently_oked, 1u);
  EXPECT_TRUE(t.world.violations().empty());
}

// A requester whose list shrinks to half the mesh while it waits moves to
// the slow path and is still served once the holder leaves.
TEST(CameraSlowPath, ShrinkingListSwitchesAWaitingRequest) {
  testing::WorldOptions o;
  o.nodes = 4;
  o.topology = "line";
  o.link.delay = milliseconds(5);
  o.camera.network_size.floor = 4;
  o.camera.network_size.margin = 0.0;
  testing::CameraWorld world(7, o);
  for (size_t i = 0; i < 4; ++i) world.set_list(i, {0, 1, 2, 3});
  world.camera(1).acquire("pump", Camera::kNoTimeout, [](const AcquireResult&) {});
  world.simulator().run_for(milliseconds(100));
  std::optional<Grant> grant;
  world.camera(0).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) {
    if (r) grant = *r;
  });
  world.simulator().run_for(milliseconds(100));
  ASSERT_FALSE(grant);
  EXPECT_FALSE(world.camera(0).status()[0].slow_path);
  world.view(0).mark_failed(world.id(2));
  world.view(0).mark_failed(world.id(3));
  EXPECT_TRUE(world.camera(0).status()[0].slow_path);
  world.simulator().run_for(milliseconds(200));
  EXPECT_FALSE(grant);  // node 1 still holds
  world.camera(1).release("pump");
  world.simulator().run_for(seconds(2));
  ASSERT_TRUE(grant);
  EXPECT_TRUE(grant->slow_path);
}

TEST(CameraState, AtMostOneRecentlyOkedRequestPerNode) {
  Tiny t(6);
  for (int i = 0; i < 20; ++i) {
    t.world.camera(0).acquire("pump", Camera::kNoTimeout, [](const AcquireResult&) {});
    t.run_for(milliseconds(50));
    t.world.camera(0).release("pump");
  }
  // Even with every RELEASE lost the set stays bounded by the node count;
  // here they arrive, so it ends empty.
  t.run_for(milliseconds(200));
  EXPECT_LE(t.world.camera(1).status()[0].recently_oked, 1u);
  EXPECT_EQ(t.world.camera(1).status()[0].recently_oked, 0u);
}

TEST(CameraStore, ReservationRunsAheadAndSurvivesARestart) {
  core::MemoryStorage storage;
  core::Metrics metrics;
  {
    CameraStore store(storage, metrics, 100, 16);
    EXPECT_EQ(store.restore_high_water("pump", 7), 0u);
    store.cover("pump", 1);
    store.cover("pump", 50);  // within the block: no write
    EXPECT_EQ(storage.writes(), 1u);
    store.cover("pump", 102);
    EXPECT_EQ(storage.writes(), 2u);
    store.cover("other/resource with spaces", 3);
  }
  CameraStore again(storage, metrics, 100, 16);
  // Whatever the previous life used or showed is below the reservation.
  EXPECT_EQ(again.restore_high_water("pump", 7), 202u);
  EXPECT_EQ(again.restore_high_water("other/resource with spaces", 7), 103u);
  EXPECT_EQ(again.restore_high_water("never", 7), 0u);
  // A damaged value resumes at the fallback rather than at zero.
  ASSERT_TRUE(storage.put(CameraStore::token_key("pump"), "12x"));
  EXPECT_EQ(again.restore_high_water("pump", 7), 7u);
  EXPECT_EQ(metrics.total("mutex_storage_unreadable_total"), 1u);
}

TEST(CameraStore, RemembersNodeIdsBoundedAndSkipsBadOnes) {
  core::MemoryStorage storage;
  core::Metrics metrics;
  {
    CameraStore store(storage, metrics, 10, 3);
    for (uint8_t i = 1; i <= 5; ++i) store.remember(node(i));
    store.remember(node(1));
    EXPECT_EQ(store.nodes().size(), 3u);
    store.forget(node(2));
  }
  CameraStore again(storage, metrics, 10, 3);
  EXPECT_EQ(again.nodes(), (std::vector<core::NodeId>{node(1), node(3)}));
  ASSERT_TRUE(storage.put(CameraStore::kNodesKey, "10.0.0.9,garbage,,10.0.0.8"));
  CameraStore damaged(storage, metrics, 10, 3);
  EXPECT_EQ(damaged.nodes(), (std::vector<core::NodeId>{node(8), node(9)}));
}

// The testbed bug: a node restarted with an empty member list (membership
// has not joined it yet) while the others had declared its old life failed.
// It used to grant itself at once (nobody to ask) with a token from zero.
TEST(CameraRestart, RestartedNodeWithEmptyListAsksTheNodesItRemembers) {
  testing::WorldOptions o;
  o.nodes = 4;
  o.topology = "line";
  o.link.delay = milliseconds(5);
  testing::CameraWorld world(11, o);
  for (size_t i = 0; i < 4; ++i) world.set_list(i, {0, 1, 2, 3});
  uint64_t first = 0;
  world.camera(2).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { first = r->fencing_token; });
  world.simulator().run_for(milliseconds(100));
  world.camera(2).release("pump");
  uint64_t holder_token = 0;
  world.camera(0).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { holder_token = r->fencing_token; });
  world.simulator().run_for(milliseconds(100));
  ASSERT_GT(holder_token, first);
  world.crash(2);
  for (size_t i : {0, 1, 3}) world.view(i).mark_failed(world.id(2));
  world.simulator().run_for(seconds(40));  // the probes confirm the failure
  world.restart(2, {});
  std::optional<Grant> grant;
  world.camera(2).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { grant = *r; });
  world.simulator().run_for(seconds(2));
  EXPECT_FALSE(grant) << "granted while node 0 holds";
  world.camera(0).release("pump");
  world.simulator().run_for(seconds(2));
  ASSERT_TRUE(grant);
  EXPECT_GT(grant->fencing_token, holder_token);
  EXPECT_TRUE(world.violations().empty());
}

// A membership verdict about a node that answers is not trusted: the
// requester keeps waiting for the holder's OK.
TEST(CameraRestart, FalseFailureOfTheHolderDoesNotLetAnotherIn) {
  testing::WorldOptions o;
  o.nodes = 3;
  o.topology = "line";
  o.link.delay = milliseconds(5);
  o.camera.slow_path_enabled = false;
  testing::CameraWorld world(12, o);
  for (size_t i = 0; i < 3; ++i) world.set_list(i, {0, 1, 2});
  world.camera(0).acquire("pump", Camera::kNoTimeout, [](const AcquireResult&) {});
  world.simulator().run_for(milliseconds(100));
  bool granted = false;
  world.camera(2).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { granted = r.has_value(); });
  world.simulator().run_for(milliseconds(100));
  world.view(2).mark_failed(world.id(0));
  world.view(1).mark_failed(world.id(0));
  world.simulator().run_for(seconds(40));
  EXPECT_FALSE(granted);
  world.camera(0).release("pump");
  world.simulator().run_for(seconds(2));
  EXPECT_TRUE(granted);
  EXPECT_TRUE(world.violations().empty());
}

TEST(CameraRestart, NodeKnowingNobodyWaitsForMembershipThenGrantsAlone) {
  testing::WorldOptions o;
  o.nodes = 2;
  o.topology = "line";
  o.link.delay = milliseconds(5);
  o.camera.boot_grace = seconds(3);
  testing::CameraWorld world(13, o);
  world.set_list(0, {});
  world.set_list(1, {0});
  bool granted = false;
  world.camera(0).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { granted = r.has_value(); });
  world.simulator().run_for(seconds(1));
  EXPECT_FALSE(granted);
  EXPECT_EQ(world.camera(0).status()[0].phase, Camera::Phase::waiting);
  // Node 1's request tells node 0 it is not alone: node 0 (the older
  // request, so the priority) asks it at once rather than after the grace.
  bool second = false;
  world.camera(1).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { second = r.has_value(); });
  world.simulator().run_for(milliseconds(500));
  EXPECT_TRUE(granted);
  EXPECT_FALSE(second);
  world.camera(0).release("pump");
  world.simulator().run_for(milliseconds(500));
  EXPECT_TRUE(second);
  EXPECT_TRUE(world.violations().empty());

  // Really alone: granted once the grace is over.
  testing::CameraWorld lone(14, o);
  lone.set_list(0, {});
  lone.set_list(1, {});
  bool alone_granted = false;
  lone.camera(0).acquire("pump", Camera::kNoTimeout, [&](const AcquireResult& r) { alone_granted = r.has_value(); });
  lone.simulator().run_for(seconds(2));
  EXPECT_FALSE(alone_granted);
  lone.simulator().run_for(seconds(2));
  EXPECT_TRUE(alone_granted);
}

// Every OK fits max_ok_bytes: with a budget of a few entries and 24
// requesters at once, OKs whose set does not fit are relayed (never
// truncated) and everyone is still served, one at a time.
TEST(CameraOkSize, OkNeverExceedsTheBudgetAndLargeSetsAreRelayed) {
  testing::WorldOptions o;
  o.nodes = 24;
  o.topology = "grid";
  o.link.delay = milliseconds(3);
  o.camera.max_ok_bytes = 80;
  o.camera.slow_path_enabled = false;
  testing::CameraWorld world(15, o);
  if (std::getenv("CAMERA_DEBUG")) core::set_log_level("debug", "mutex");
  std::vector<size_t> all;
  for (size_t i = 0; i < o.nodes; ++i) all.push_back(i);
  for (size_t i = 0; i < o.nodes; ++i) world.set_list(i, all);
  size_t done = 0;
  for (size_t i = 0; i < o.nodes; ++i) {
    testing::CameraWorld::Section s;
    s.node = i;
    s.resource = "pump";
    s.hold = milliseconds(20);
    world.run_section(s, [&](bool granted) { done += granted ? 1 : 0; });
  }
  world.simulator().run_for(seconds(120));
  EXPECT_EQ(done, o.nodes) << [&] {
    std::string text;
    for (const auto& u : world.unfinished_descriptions()) text += u + "\n";
    return text;
  }();
  EXPECT_TRUE(world.violations().empty()) << world.violations().front();
  uint64_t relays = 0;
  for (size_t i = 0; i < o.nodes; ++i) {
    relays += world.metrics(i).total("mutex_ok_relays_total");
    const core::Histogram& bytes = world.metrics(i).histogram("mutex_ok_bytes");
    if (bytes.count() > 0) {
      EXPECT_LE(bytes.max(), 80.0) << "node " << i;
    }
  }
  EXPECT_GT(relays, 0u) << "the budget never bound: the test proves nothing";
}

// `nodes` Camera nodes on a line of 5 ms links, fast path only; the tests
// fill the member lists.
testing::WorldOptions line_of(size_t nodes) {
  testing::WorldOptions o;
  o.nodes = nodes;
  o.topology = "line";
  o.link.delay = milliseconds(5);
  o.camera.slow_path_enabled = false;
  return o;
}

// The holder lease (camera.h): node 0 holds, then is cut off from the rest of
// a five-node line, which declares it failed and, after retry.deadline of its
// silence, lets node 2 in.
struct CutOffHolder {
  std::optional<core::TimePoint> lapsed_at;   // node 0's held() stopped showing the grant
  std::optional<core::TimePoint> granted_at;  // node 2's held() showed its grant
  bool held_after_heal = false;
  uint64_t lapses = 0;
  uint64_t superseded_lapsed = 0;
  std::vector<std::string> violations;
};

CutOffHolder cut_off_holder(core::Duration hold_lease) {
  testing::WorldOptions o = line_of(5);
  o.camera.hold_lease = hold_lease;
  testing::CameraWorld world(21, o);
  for (size_t i = 0; i < 5; ++i) world.set_list(i, {0, 1, 2, 3, 4});
  world.run_section({0, "pump", seconds(120)});
  world.simulator().run_for(milliseconds(200));
  EXPECT_TRUE(world.camera(0).held("pump"));
  world.network().partition({{world.id(0)}});
  // Membership on the other side declares it failed, as Medley would.
  for (size_t i = 1; i < 5; ++i) world.view(i).mark_failed(world.id(0));
  world.run_section({2, "pump", seconds(60)});
  CutOffHolder out;
  while (!out.granted_at && world.now() < core::TimePoint(seconds(60))) {
    world.simulator().run_for(milliseconds(50));
    if (!out.lapsed_at && !world.camera(0).held("pump")) out.lapsed_at = world.now();
    if (world.camera(2).held("pump")) out.granted_at = world.now();
  }
  world.network().heal();
  world.simulator().run_for(seconds(10));
  out.held_after_heal = world.camera(0).held("pump").has_value();
  out.lapses = world.metrics(0).total("mutex_grants_lapsed_total");
  out.superseded_lapsed = world.superseded_lapsed();
  out.violations = world.violations();
  return out;
}

TEST(CameraLease, AHolderCutOffLetsGoBeforeTheOthersTakeItAgain) {
  const CutOffHolder run = cut_off_holder(seconds(5));
  ASSERT_TRUE(run.granted_at) << "the side with the majority never took the resource";
  ASSERT_TRUE(run.lapsed_at) << "the cut-off holder kept showing its grant";
  EXPECT_LT(*run.lapsed_at, *run.granted_at);
  // Contact regained says nothing of the grant made meanwhile.
  EXPECT_FALSE(run.held_after_heal);
  EXPECT_EQ(run.lapses, 1u);
  EXPECT_EQ(run.superseded_lapsed, 1u);
  EXPECT_TRUE(run.violations.empty()) << run.violations.front();
}

TEST(CameraLease, WithoutTheLeaseTheCutOffHolderStillHoldsWhenTheOthersTakeIt) {
  // What the lease is for, and proof that the oracle sees two holders.
  const CutOffHolder run = cut_off_holder(core::Duration::zero());
  ASSERT_TRUE(run.granted_at);
  EXPECT_FALSE(run.lapsed_at);
  EXPECT_EQ(run.lapses, 0u);
  EXPECT_FALSE(run.violations.empty());
}

TEST(CameraLease, AHolderInTouchWithAMajorityKeepsItsGrantUnderLoss) {
  testing::WorldOptions o = line_of(5);
  o.link.loss = 0.1;
  testing::CameraWorld world(22, o);
  for (size_t i = 0; i < 5; ++i) world.set_list(i, {0, 1, 2, 3, 4});
  world.run_section({1, "pump", seconds(40)});
  // Retransmissions under the loss may take a while.
  for (int step = 0; step < 100 && !world.camera(1).held("pump"); ++step) {
    world.simulator().run_for(milliseconds(100));
  }
  ASSERT_TRUE(world.camera(1).held("pump"));
  // Loss of a node that answered: the other three are still a majority.
  world.crash(4);
  for (int step = 0; step < 300; ++step) {
    world.simulator().run_for(milliseconds(100));
    ASSERT_TRUE(world.camera(1).held("pump"))
        << "lapsed at t=" << core::to_millis(world.now().time_since_epoch()) << " ms";
  }
  EXPECT_EQ(world.metrics(1).total("mutex_grants_lapsed_total"), 0u);
  EXPECT_GT(world.metrics(1).counter("mutex_messages_sent_total", {{"type", "lease_probe"}}).value(), 0u)
      << "a 40 s hold renewed its lease without a probe: the test proves nothing";
  EXPECT_TRUE(world.violations().empty());
}

}  // namespace
}  // namespace mesh::mutex
