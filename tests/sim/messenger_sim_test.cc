// Reliable request/response end to end through real Nodes (authenticated
// link, one-hop transport, Messenger) over a lossy, reordering simulated
// radio: every request runs its handler at most once, every caller gets
// exactly one result, and an ok result means the handler ran exactly once.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "core/log.h"
#include "proto/wire.pb.h"
#include "sim/mesh_sim.h"

namespace mesh::sim {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uint32_t kBodyType = proto::Envelope::kEchoFieldNumber;
constexpr int kSeeds = 200;
constexpr int kRequestsPerNode = 4;

// Neighbour churn under 30 % loss logs at info on every node; only warnings
// and above are worth reading here.
class QuietLogs : public testing::Environment {
 public:
  void SetUp() override { core::set_log_level("warn"); }
};
const testing::Environment* const kQuietLogs = testing::AddGlobalTestEnvironment(new QuietLogs);

Scenario lossy_grid() {
  Scenario s;
  s.source = "lossy-grid";
  s.topology.kind = "grid";
  s.topology.width = 3;
  s.topology.height = 3;
  s.topology.nodes = 9;
  s.link.delay_ms = 5;
  // Far above the first retransmission timeout below, so retransmissions
  // and answers overtake each other.
  s.link.jitter_ms = 60;
  s.link.loss = 0.3;
  s.run.duration_s = 40;
  return s;
}

struct Outcome {
  int handler_runs = 0;
  int results = 0;
  core::RequestStatus status = core::RequestStatus::cancelled;
  std::string response;
};

TEST(MessengerSim, EachRequestHandledAtMostOnceAndEveryCallerAnswered) {
  uint64_t total = 0;
  uint64_t ok = 0;
  uint64_t retransmits = 0;
  uint64_t duplicates = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    MeshSim::Options options;
    options.configure = [](agent::NodeConfig& config) {
      config.messaging.retry.first_timeout = milliseconds(40);
      config.messaging.retry.max_interval = milliseconds(400);
      config.messaging.retry.deadline = seconds(8);
    };
    // Before the simulation, so it outlives every callback that refers to it.
    std::map<std::string, Outcome> outcomes;  // by payload
    MeshSim sim(lossy_grid(), seed, options);
    sim.run_until(core::TimePoint(seconds(2)));  // every node has booted

    for (size_t i = 0; i < sim.size(); ++i) {
      ASSERT_NE(sim.node(i), nullptr);
      sim.node(i)->messenger().serve(kBodyType, [&outcomes](const core::Message& request, core::Responder responder) {
        proto::EchoBody body;
        ASSERT_TRUE(body.ParseFromString(request.body));
        ++outcomes[body.request().payload()].handler_runs;
        proto::EchoBody reply;
        reply.mutable_reply()->set_payload(body.request().payload());
        responder.respond(reply.SerializeAsString());
      });
    }
    auto& rng = sim.simulator().rng();
    for (size_t i = 0; i < sim.size(); ++i) {
      const auto neighbours = sim.topology().neighbours(static_cast<int>(i));
      for (int k = 0; k < kRequestsPerNode; ++k) {
        const size_t to = static_cast<size_t>(neighbours[rng.below(neighbours.size())]);
        const std::string payload = "n" + std::to_string(i) + "-" + std::to_string(k);
        const auto at = core::TimePoint(seconds(3)) + milliseconds(rng.between(0, 5000));
        outcomes[payload];
        sim.simulator().at(at, [&sim, &outcomes, i, to, payload] {
          proto::EchoBody body;
          body.mutable_request()->set_payload(payload);
          sim.node(i)->messenger().request(sim.id_of(to), kBodyType, body.SerializeAsString(),
                                           [&outcomes, payload](const core::RequestResult& r) {
                                             Outcome& o = outcomes[payload];
                                             ++o.results;
                                             o.status = r.status;
                                             proto::EchoBody reply;
                                             if (reply.ParseFromString(r.response.body)) o.response = reply.reply().payload();
                                           });
        });
      }
    }
    sim.run();

    for (const auto& [payload, o] : outcomes) {
      SCOPED_TRACE("request=" + payload);
      EXPECT_EQ(o.results, 1) << "every caller gets exactly one result";
      EXPECT_LE(o.handler_runs, 1) << "a retransmission ran the handler again";
      if (o.status == core::RequestStatus::ok) {
        EXPECT_EQ(o.handler_runs, 1);
        EXPECT_EQ(o.response, payload);
        ++ok;
      } else {
        EXPECT_EQ(o.status, core::RequestStatus::timeout);
      }
      ++total;
    }
    for (size_t i = 0; i < sim.size(); ++i) {
      retransmits += sim.node(i)->metrics().total("request_retransmits_total");
      duplicates += sim.node(i)->metrics().total("request_duplicates_total");
    }
    if (HasFailure()) break;
  }
  ASSERT_EQ(total, static_cast<uint64_t>(kSeeds) * 9 * kRequestsPerNode);
  std::printf("requests=%llu ok=%llu retransmits=%llu duplicates_at_receivers=%llu\n",
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(ok),
              static_cast<unsigned long long>(retransmits), static_cast<unsigned long long>(duplicates));
  // The loss really bit (retransmissions, duplicates reaching receivers) and
  // retransmission still got nearly everything through.
  EXPECT_GT(retransmits, total);
  EXPECT_GT(duplicates, 0u);
  EXPECT_GT(static_cast<double>(ok) / static_cast<double>(total), 0.95) << ok << " of " << total << " ok";
}

}  // namespace
}  // namespace mesh::sim
