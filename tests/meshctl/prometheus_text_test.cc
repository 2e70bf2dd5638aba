#include "meshctl/prometheus_text.h"

#include <string>

#include <gtest/gtest.h>

#include "proto/admin.pb.h"

namespace mesh::meshctl {
namespace {

proto::MetricsReply sample_reply() {
  proto::MetricsReply reply;
  auto* a = reply.add_counters();
  a->set_name("messages_total");
  (*a->mutable_labels())["layer"] = "echo";
  (*a->mutable_labels())["direction"] = "sent";
  a->set_value(12);
  auto* b = reply.add_counters();
  b->set_name("messages_total");
  (*b->mutable_labels())["layer"] = "routing";
  (*b->mutable_labels())["direction"] = "sent";
  b->set_value(7);
  auto* c = reply.add_counters();
  c->set_name("auth_dropped");
  c->set_value(3);
  auto* h = reply.add_histograms();
  h->set_name("rtt_ms");
  (*h->mutable_labels())["layer"] = "echo";
  h->set_count(4);
  h->set_mean(2.5);
  h->set_p50(2);
  h->set_p99(4.5);
  h->set_max(4.5);
  return reply;
}

TEST(PrometheusTextTest, WritesTheExpositionFormat) {
  const std::string text = to_prometheus_text(sample_reply());
  const std::string expected =
      "# HELP meshagent_auth_dropped_total meshagent counter auth_dropped\n"
      "# TYPE meshagent_auth_dropped_total counter\n"
      "meshagent_auth_dropped_total 3\n"
      "# HELP meshagent_messages_total meshagent counter messages_total\n"
      "# TYPE meshagent_messages_total counter\n"
      "meshagent_messages_total{direction=\"sent\",layer=\"echo\"} 12\n"
      "meshagent_messages_total{direction=\"sent\",layer=\"routing\"} 7\n"
      "# HELP meshagent_rtt_ms meshagent histogram rtt_ms (log-bucketed, about 4 % relative error on quantiles)\n"
      "# TYPE meshagent_rtt_ms summary\n"
      "meshagent_rtt_ms{layer=\"echo\",quantile=\"0.5\"} 2\n"
      "meshagent_rtt_ms{layer=\"echo\",quantile=\"0.99\"} 4.5\n"
      "meshagent_rtt_ms_sum{layer=\"echo\"} 10\n"
      "meshagent_rtt_ms_count{layer=\"echo\"} 4\n"
      "# HELP meshagent_rtt_ms_max meshagent histogram rtt_ms: largest value recorded\n"
      "# TYPE meshagent_rtt_ms_max gauge\n"
      "meshagent_rtt_ms_max{layer=\"echo\"} 4.5\n"
      "# HELP meshagent_up 1 when the agent answered meshctl\n"
      "# TYPE meshagent_up gauge\n"
      "meshagent_up 1\n";
  EXPECT_EQ(text, expected);
}

TEST(PrometheusTextTest, EmptyReplyStillSaysUp) {
  EXPECT_EQ(to_prometheus_text(proto::MetricsReply()),
            "# HELP meshagent_up 1 when the agent answered meshctl\n# TYPE meshagent_up gauge\nmeshagent_up 1\n");
}

TEST(PrometheusTextTest, SanitisesNamesAndEscapesLabelValues) {
  EXPECT_EQ(prometheus_name("bytes.sent-e2e"), "bytes_sent_e2e");
  EXPECT_EQ(prometheus_name("9lives"), "_9lives");
  EXPECT_EQ(prometheus_label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(prometheus_number(0.25), "0.25");
  EXPECT_EQ(prometheus_number(1e300 * 1e300), "+Inf");

  proto::MetricsReply reply;
  auto* c = reply.add_counters();
  c->set_name("drops");
  (*c->mutable_labels())["reason"] = "bad \"tag\"";
  c->set_value(1);
  EXPECT_NE(to_prometheus_text(reply).find("meshagent_drops_total{reason=\"bad \\\"tag\\\"\"} 1\n"), std::string::npos);
}

TEST(PrometheusTextTest, SeriesOfOneFamilyStayTogether) {
  // "a" and "a_b" sort between "a" and "a{...}" as series keys; the families
  // must still be contiguous with one TYPE line each.
  proto::MetricsReply reply;
  auto* a1 = reply.add_counters();
  a1->set_name("a");
  a1->set_value(1);
  auto* ab = reply.add_counters();
  ab->set_name("a_b");
  ab->set_value(2);
  auto* a2 = reply.add_counters();
  a2->set_name("a");
  (*a2->mutable_labels())["x"] = "1";
  a2->set_value(3);
  const std::string text = to_prometheus_text(reply);
  const size_t type_a = text.find("# TYPE meshagent_a_total counter\n");
  ASSERT_NE(type_a, std::string::npos);
  EXPECT_EQ(text.find("# TYPE meshagent_a_total", type_a + 1), std::string::npos);
  EXPECT_NE(text.find("meshagent_a_total 1\nmeshagent_a_total{x=\"1\"} 3\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace mesh::meshctl
