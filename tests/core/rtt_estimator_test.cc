#include "core/rtt_estimator.h"

#include <gtest/gtest.h>

namespace mesh::core {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

const NodeId kPeer = NodeId::from_octets(10, 0, 0, 2);
const NodeId kOther = NodeId::from_octets(10, 0, 0, 3);

RttEstimator::Options wide_bounds() {
  RttEstimator::Options o;
  o.floor = milliseconds(1);
  o.cap = seconds(60);
  o.granularity = milliseconds(1);
  return o;
}

TimePoint at(Duration d) { return TimePoint{} + d; }

TEST(RttEstimator, NoRtoBeforeAnySample) {
  RttEstimator est(wide_bounds());
  EXPECT_FALSE(est.rto(kPeer, at(seconds(1))).has_value());
  EXPECT_EQ(est.size(), 0u);
}

TEST(RttEstimator, FirstSampleSetsSrttAndHalfVariance) {
  RttEstimator est(wide_bounds());
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(1)));
  const auto s = est.state(kPeer);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->srtt, milliseconds(100));
  EXPECT_EQ(s->rttvar, milliseconds(50));
  // RTO = SRTT + max(G, 4 RTTVAR) = 100 + 200.
  EXPECT_EQ(est.rto(kPeer, at(seconds(1))), milliseconds(300));
}

TEST(RttEstimator, LaterSamplesFollowRfc6298Weights) {
  RttEstimator est(wide_bounds());
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(1)));
  est.on_answer(kPeer, milliseconds(180), 1, at(seconds(2)));
  // RTTVAR = 3/4 * 50 + 1/4 * |100 - 180| = 57.5; SRTT = 7/8 * 100 + 1/8 * 180 = 110.
  auto s = est.state(kPeer);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rttvar, std::chrono::microseconds(57500));
  EXPECT_EQ(s->srtt, milliseconds(110));
  EXPECT_EQ(s->rto, milliseconds(110 + 230));
  est.on_answer(kPeer, milliseconds(110), 1, at(seconds(3)));
  // RTTVAR = 3/4 * 57.5 + 0 = 43.125; SRTT unchanged.
  s = est.state(kPeer);
  EXPECT_EQ(s->rttvar, std::chrono::microseconds(43125));
  EXPECT_EQ(s->srtt, milliseconds(110));
  EXPECT_EQ(s->rto, milliseconds(110) + std::chrono::microseconds(172500));
}

TEST(RttEstimator, SteadyPathConvergesToSrttPlusGranularity) {
  RttEstimator est(wide_bounds());
  for (int i = 0; i < 100; ++i) est.on_answer(kPeer, milliseconds(20), 1, at(milliseconds(100 * i)));
  EXPECT_EQ(est.state(kPeer)->srtt, milliseconds(20));
  // The variance decays towards zero; G is the least margin left.
  EXPECT_EQ(est.rto(kPeer, at(seconds(10))), milliseconds(21));
}

TEST(RttEstimator, KarnIgnoresAnswersToRetransmittedRequests) {
  RttEstimator est(wide_bounds());
  est.on_answer(kPeer, milliseconds(5), 2, at(seconds(1)));
  EXPECT_FALSE(est.state(kPeer).has_value());
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(1)));
  est.on_answer(kPeer, milliseconds(1), 3, at(seconds(2)));
  EXPECT_EQ(est.state(kPeer)->srtt, milliseconds(100));
  EXPECT_EQ(est.state(kPeer)->rttvar, milliseconds(50));
}

TEST(RttEstimator, FloorAndCapBoundTheRto) {
  RttEstimator::Options o = wide_bounds();
  o.floor = milliseconds(10);
  o.cap = milliseconds(500);
  RttEstimator est(o);
  est.on_answer(kPeer, milliseconds(1), 1, at(seconds(1)));  // 1 + 2 = 3 ms computed
  EXPECT_EQ(est.rto(kPeer, at(seconds(1))), milliseconds(10));
  est.on_answer(kOther, seconds(1), 1, at(seconds(1)));  // 3 s computed
  EXPECT_EQ(est.rto(kOther, at(seconds(1))), milliseconds(500));
}

TEST(RttEstimator, TimeoutBacksOffUntilAValidSample) {
  RttEstimator est(wide_bounds());
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(1)));
  ASSERT_EQ(est.rto(kPeer, at(seconds(1))), milliseconds(300));
  est.on_timeout(kPeer, milliseconds(300));
  EXPECT_EQ(est.rto(kPeer, at(seconds(2))), milliseconds(600));
  // A second request timing out after the same wait proves nothing more.
  est.on_timeout(kPeer, milliseconds(300));
  EXPECT_EQ(est.rto(kPeer, at(seconds(2))), milliseconds(600));
  // A longer wait that expired doubles again.
  est.on_timeout(kPeer, milliseconds(600));
  EXPECT_EQ(est.rto(kPeer, at(seconds(2))), milliseconds(1200));
  // Karn: an answer after retransmissions keeps the backoff.
  est.on_answer(kPeer, milliseconds(100), 2, at(seconds(3)));
  EXPECT_EQ(est.rto(kPeer, at(seconds(3))), milliseconds(1200));
  // A first transmission's answer ends it and the computed RTO returns.
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(4)));
  EXPECT_EQ(est.state(kPeer)->backoff, Duration::zero());
  EXPECT_EQ(est.rto(kPeer, at(seconds(4))), milliseconds(100 + 150));
}

TEST(RttEstimator, BackoffStopsAtTheCap) {
  RttEstimator::Options o = wide_bounds();
  o.cap = seconds(2);
  RttEstimator est(o);
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(1)));
  for (int i = 0; i < 10; ++i) est.on_timeout(kPeer, seconds(1 << i));
  EXPECT_EQ(est.rto(kPeer, at(seconds(1))), seconds(2));
}

TEST(RttEstimator, TimeoutOfAnUnmeasuredPeerKeepsNoState) {
  RttEstimator est(wide_bounds());
  est.on_timeout(kPeer, milliseconds(250));
  EXPECT_FALSE(est.rto(kPeer, at(seconds(1))).has_value());
  EXPECT_EQ(est.size(), 0u);
}

TEST(RttEstimator, PeerNotHeardFromIsForgotten) {
  RttEstimator::Options o = wide_bounds();
  o.forget_after = minutes(1);
  RttEstimator est(o);
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(0)));
  EXPECT_TRUE(est.rto(kPeer, at(seconds(59))).has_value());
  EXPECT_FALSE(est.rto(kPeer, at(seconds(60))).has_value());
  EXPECT_EQ(est.size(), 0u);
  // Measured afresh: the old SRTT plays no part.
  est.on_answer(kPeer, milliseconds(10), 1, at(seconds(61)));
  EXPECT_EQ(est.state(kPeer)->srtt, milliseconds(10));
  EXPECT_EQ(est.state(kPeer)->rttvar, milliseconds(5));
}

TEST(RttEstimator, StaleSampleRestartsTheEstimate) {
  RttEstimator::Options o = wide_bounds();
  o.forget_after = minutes(1);
  RttEstimator est(o);
  est.on_answer(kPeer, milliseconds(100), 1, at(seconds(0)));
  est.on_answer(kPeer, milliseconds(10), 1, at(minutes(2)));
  EXPECT_EQ(est.state(kPeer)->srtt, milliseconds(10));
}

TEST(RttEstimator, FullTableEvictsTheLeastRecentlyHeard) {
  RttEstimator::Options o = wide_bounds();
  o.capacity = 3;
  RttEstimator est(o);
  const NodeId a = NodeId::from_octets(10, 0, 1, 1);
  const NodeId b = NodeId::from_octets(10, 0, 1, 2);
  const NodeId c = NodeId::from_octets(10, 0, 1, 3);
  const NodeId d = NodeId::from_octets(10, 0, 1, 4);
  est.on_answer(a, milliseconds(10), 1, at(seconds(1)));
  est.on_answer(b, milliseconds(10), 1, at(seconds(2)));
  est.on_answer(c, milliseconds(10), 1, at(seconds(3)));
  est.on_answer(a, milliseconds(10), 1, at(seconds(4)));  // a heard again: b is now the oldest
  est.on_answer(d, milliseconds(10), 1, at(seconds(5)));
  EXPECT_EQ(est.size(), 3u);
  EXPECT_TRUE(est.state(a).has_value());
  EXPECT_FALSE(est.state(b).has_value());
  EXPECT_TRUE(est.state(c).has_value());
  EXPECT_TRUE(est.state(d).has_value());
}

}  // namespace
}  // namespace mesh::core
