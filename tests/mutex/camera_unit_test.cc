// Unit tests of mutex/: request order, the codec, the slow-path tree
// bookkeeping, the size estimator, and Camera's API and OK-set handling on a
// tiny simulated mesh.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/rng.h"
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

}  // namespace
}  // namespace mesh::mutex
