// HeartbeatCoalescer against a scripted follower node: what goes on the wire
// (one carrier per destination, a lone heartbeat as a plain append), which
// answer reaches which group, cancellation, and the fall-back to plain
// appends for a node that does not understand carriers.
#include "kgroup/heartbeat_coalescer.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/messenger.h"
#include "core/metrics.h"
#include "kgroup/kgroup_codec.h"
#include "proto/wire.pb.h"
#include "sim/sim_env.h"
#include "sim/simulator.h"

namespace mesh::kgroup {
namespace {

using std::chrono::milliseconds;

constexpr size_t kCarrierBytes = 900;

// Two nodes one millisecond apart, nothing lost.
class PairTransport final : public core::Transport {
 public:
  PairTransport(sim::Simulator& simulator, core::NodeId self) : simulator_(simulator), self_(self) {}
  void connect(PairTransport* peer) { peer_ = peer; }
  core::NodeId self() const override { return self_; }
  core::SendStatus send(core::Message message) override {
    message.src = self_;
    simulator_.after(milliseconds(1), [peer = peer_, message] {
      if (peer->receiver_) peer->receiver_(message);
    });
    return core::SendStatus::sent;
  }
  core::SendStatus flood(core::Message message) override { return send(std::move(message)); }
  void set_receiver(Receiver receiver) override { receiver_ = std::move(receiver); }

 private:
  sim::Simulator& simulator_;
  core::NodeId self_;
  PairTransport* peer_ = nullptr;
  Receiver receiver_;
};

proto::KgroupAppend heartbeat(const std::string& target) {
  proto::KgroupAppend append;
  append.mutable_group()->set_target(target);
  append.set_term(1);
  return append;
}

// Answers each carried heartbeat with match = the index of its group's
// target ("device:g<N>" -> N), so a mixed-up answer shows.
std::string answer_in_order(const proto::KgroupHeartbeats& heartbeats) {
  proto::KgroupBody body;
  for (const proto::KgroupAppend& append : heartbeats.appends()) {
    proto::KgroupAppendReply* reply = body.mutable_heartbeat_answers()->add_answers()->mutable_reply();
    reply->set_ok(true);
    reply->set_term(1);
    reply->set_match(std::stoull(append.group().target().substr(8)));
  }
  return encode_body(body);
}

class HeartbeatCoalescerTest : public ::testing::Test {
 protected:
  HeartbeatCoalescerTest()
      : leader_transport_(simulator_, leader_id_),
        follower_transport_(simulator_, follower_id_),
        leader_env_(simulator_, 1, 0, 0),
        follower_env_(simulator_, 2, 1, 0),
        leader_(leader_env_, leader_transport_, leader_metrics_, {}),
        follower_(follower_env_, follower_transport_, follower_metrics_, {}),
        coalescer_(leader_env_, leader_, leader_metrics_, kCarrierBytes) {
    leader_transport_.connect(&follower_transport_);
    follower_transport_.connect(&leader_transport_);
    follower_.serve(proto::Envelope::kKgroupFieldNumber, [this](const core::Message& request, core::Responder r) {
      const auto body = decode_body(request.body);
      ASSERT_TRUE(body) << body.error();
      received_.push_back(*body);
      if (refuse_carriers_ && body->has_heartbeats()) {
        r.reject("malformed");  // what a node without coalescing answers
      } else if (body->has_heartbeats()) {
        r.respond(answer_override_ ? *answer_override_ : answer_in_order(body->heartbeats()));
      } else {
        proto::KgroupBody reply;
        reply.mutable_append_reply()->set_ok(true);
        reply.mutable_append_reply()->set_match(std::stoull(body->append().group().target().substr(8)));
        r.respond(encode_body(reply));
      }
    });
  }

  // Queues a heartbeat of group "device:g<index>"; its result lands in results_[index].
  HeartbeatCoalescer::Token queue(int index) {
    return coalescer_.send(
        follower_id_, heartbeat("device:g" + std::to_string(index)),
        [this, index](const core::RequestResult& result) { results_[index].push_back(result); }, policy_);
  }

  std::optional<uint64_t> match_of(int index, size_t nth = 0) const {
    const auto it = results_.find(index);
    if (it == results_.end() || it->second.size() <= nth || it->second[nth].status != core::RequestStatus::ok) {
      return std::nullopt;
    }
    const auto body = decode_body(it->second[nth].response.body);
    if (!body || !body->has_append_reply()) return std::nullopt;
    return body->append_reply().match();
  }

  sim::Simulator simulator_{5};
  core::NodeId leader_id_{0x0a000001};
  core::NodeId follower_id_{0x0a000002};
  PairTransport leader_transport_;
  PairTransport follower_transport_;
  sim::SimEnv leader_env_;
  sim::SimEnv follower_env_;
  core::Metrics leader_metrics_;
  core::Metrics follower_metrics_;
  core::Messenger leader_;
  core::Messenger follower_;
  HeartbeatCoalescer coalescer_;
  core::RetryPolicy policy_;
  std::vector<proto::KgroupBody> received_;
  std::map<int, std::vector<core::RequestResult>> results_;
  bool refuse_carriers_ = false;
  std::optional<std::string> answer_override_;
};

TEST_F(HeartbeatCoalescerTest, HeartbeatsForOneNodeLeaveInOneRequestAndEachGroupGetsItsOwnAnswer) {
  for (int g = 1; g <= 3; ++g) queue(g);
  simulator_.run_for(milliseconds(10));
  ASSERT_EQ(received_.size(), 1u);
  ASSERT_TRUE(received_[0].has_heartbeats());
  EXPECT_EQ(received_[0].heartbeats().appends_size(), 3);
  for (int g = 1; g <= 3; ++g) {
    ASSERT_EQ(results_[g].size(), 1u) << g;
    EXPECT_EQ(match_of(g), std::optional<uint64_t>(g)) << "group " << g << " got another group's answer";
  }
  EXPECT_EQ(leader_metrics_.total("kgroup_heartbeat_carriers_total"), 1u);
  EXPECT_EQ(leader_metrics_.total("kgroup_heartbeats_carried_total"), 3u);
}

TEST_F(HeartbeatCoalescerTest, ALoneHeartbeatIsAPlainAppend) {
  queue(4);
  simulator_.run_for(milliseconds(10));
  ASSERT_EQ(received_.size(), 1u);
  EXPECT_TRUE(received_[0].has_append());
  EXPECT_EQ(match_of(4), std::optional<uint64_t>(4));
}

TEST_F(HeartbeatCoalescerTest, CancelledHeartbeatsAreNotSentOrAnswered) {
  const auto queued_then_cancelled = queue(1);
  queue(2);
  const auto in_flight_then_cancelled = queue(3);
  coalescer_.cancel(queued_then_cancelled);
  coalescer_.flush();
  coalescer_.cancel(in_flight_then_cancelled);
  simulator_.run_for(milliseconds(10));
  ASSERT_EQ(received_.size(), 1u);
  ASSERT_TRUE(received_[0].has_heartbeats());
  EXPECT_EQ(received_[0].heartbeats().appends_size(), 2);  // 2 and 3: 3 was already on its way
  EXPECT_TRUE(results_[1].empty());
  EXPECT_EQ(match_of(2), std::optional<uint64_t>(2));
  EXPECT_TRUE(results_[3].empty());
  EXPECT_EQ(coalescer_.in_flight(), 0u);
}

TEST_F(HeartbeatCoalescerTest, ANodeThatRefusesCarriersGetsPlainAppendsFromThenOn) {
  refuse_carriers_ = true;
  queue(1);
  queue(2);
  simulator_.run_for(milliseconds(10));
  ASSERT_EQ(results_[1].size(), 1u);
  EXPECT_EQ(results_[1][0].status, core::RequestStatus::rejected);
  ASSERT_EQ(results_[2].size(), 1u);
  EXPECT_EQ(results_[2][0].status, core::RequestStatus::rejected);

  queue(1);
  queue(2);
  simulator_.run_for(milliseconds(10));
  ASSERT_EQ(received_.size(), 3u);  // the refused carrier, then one plain append each
  EXPECT_TRUE(received_[1].has_append());
  EXPECT_TRUE(received_[2].has_append());
  EXPECT_EQ(match_of(1, 1), std::optional<uint64_t>(1));
  EXPECT_EQ(match_of(2, 1), std::optional<uint64_t>(2));
}

TEST_F(HeartbeatCoalescerTest, AnAnswerThatDoesNotMatchTheCarrierIsRefusedForEveryGroup) {
  proto::KgroupBody one_answer;
  one_answer.mutable_heartbeat_answers()->add_answers()->mutable_reply()->set_ok(true);
  answer_override_ = encode_body(one_answer);
  queue(1);
  queue(2);
  simulator_.run_for(milliseconds(10));
  for (int g : {1, 2}) {
    ASSERT_EQ(results_[g].size(), 1u);
    EXPECT_EQ(results_[g][0].status, core::RequestStatus::rejected);
    EXPECT_EQ(results_[g][0].response.body, "malformed_answers");
  }
}

TEST_F(HeartbeatCoalescerTest, CarriersStayWithinOneBody) {
  const size_t heartbeats = 3 * kCarrierBytes / heartbeat("device:g100").ByteSizeLong();
  for (size_t g = 100; g < 100 + heartbeats; ++g) queue(static_cast<int>(g));
  simulator_.run_for(milliseconds(10));
  EXPECT_GE(received_.size(), 3u);
  size_t carried = 0;
  for (const proto::KgroupBody& body : received_) {
    EXPECT_LE(body.ByteSizeLong(), kCarrierBytes);
    carried += body.has_heartbeats() ? static_cast<size_t>(body.heartbeats().appends_size()) : 1;
  }
  EXPECT_EQ(carried, heartbeats);
  for (size_t g = 100; g < 100 + heartbeats; ++g) EXPECT_EQ(match_of(static_cast<int>(g)), g);
}

}  // namespace
}  // namespace mesh::kgroup
