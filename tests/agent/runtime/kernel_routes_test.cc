// Kernel routes over rtnetlink. Built twice (tests/agent/runtime/kernel_routes.cmake):
// without KERNEL_ROUTES_NETNS_TESTS the decoders and the sync planner on
// hand-built input (label unit, no privileges); with it the real kernel in a
// network namespace the test creates and drops (label testbed, root).
#include "agent/runtime/kernel_routes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agent/runtime/netlink_socket.h"

namespace mesh::agent {
namespace {

using core::Ipv4Address;
using Bytes = std::vector<uint8_t>;

Ipv4Address ip(const char* text) { return *Ipv4Address::parse(text); }

KernelRoute via(const char* dst, uint8_t length, const char* gateway, int ifindex, uint32_t metric) {
  return KernelRoute{ip(dst), length, ip(gateway), ifindex, metric};
}
KernelRoute on_link(const char* dst, int ifindex, uint32_t metric) {
  return KernelRoute{ip(dst), 32, Ipv4Address(), ifindex, metric};
}

#ifndef KERNEL_ROUTES_NETNS_TESTS

// ---------------------------------------------------------------- buffers

void put_header(Bytes& out, uint32_t length, uint16_t type, uint16_t flags, uint32_t sequence) {
  nlmsghdr header{};
  header.nlmsg_len = length;
  header.nlmsg_type = type;
  header.nlmsg_flags = flags;
  header.nlmsg_seq = sequence;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&header);
  out.insert(out.end(), bytes, bytes + sizeof header);
}

// One whole message: header with the right length, the payload, padding.
Bytes message(uint16_t type, uint16_t flags, uint32_t sequence, const Bytes& payload) {
  Bytes out;
  put_header(out, static_cast<uint32_t>(sizeof(nlmsghdr) + payload.size()), type, flags, sequence);
  out.insert(out.end(), payload.begin(), payload.end());
  out.resize((out.size() + 3) & ~size_t{3}, 0);
  return out;
}

void append(Bytes& out, const Bytes& more) { out.insert(out.end(), more.begin(), more.end()); }

void put_attribute(Bytes& out, uint16_t type, const Bytes& value) {
  rtattr header{};
  header.rta_len = static_cast<uint16_t>(sizeof header + value.size());
  header.rta_type = type;
  const auto* bytes = reinterpret_cast<const uint8_t*>(&header);
  out.insert(out.end(), bytes, bytes + sizeof header);
  out.insert(out.end(), value.begin(), value.end());
  out.resize((out.size() + 3) & ~size_t{3}, 0);
}

Bytes u32_bytes(uint32_t value) {
  Bytes out(4);
  std::memcpy(out.data(), &value, 4);
  return out;
}

Bytes rtmsg_bytes(uint8_t family, uint8_t dst_len, uint8_t table, uint8_t protocol) {
  rtmsg header{};
  header.rtm_family = family;
  header.rtm_dst_len = dst_len;
  header.rtm_table = table;
  header.rtm_protocol = protocol;
  header.rtm_type = RTN_UNICAST;
  Bytes out(sizeof header);
  std::memcpy(out.data(), &header, sizeof header);
  return out;
}

// The payload (after the netlink header) of an encoded request.
Bytes payload_of(const netlink::RequestBuilder& builder) {
  Bytes datagram = builder.finish(1);
  return Bytes(datagram.begin() + sizeof(nlmsghdr), datagram.end());
}

netlink::RouteMessage sample_route() {
  netlink::RouteMessage route;
  route.family = AF_INET;
  route.dst_len = 24;
  route.table = RT_TABLE_MAIN;
  route.protocol = 158;
  route.scope = RT_SCOPE_UNIVERSE;
  route.type = RTN_UNICAST;
  route.destination = ip("10.1.2.0");
  route.gateway = ip("10.0.0.2");
  route.oif = 7;
  route.priority = 3;
  return route;
}

Bytes error_payload(int32_t code) { return u32_bytes(static_cast<uint32_t>(code)); }

// ---------------------------------------------------------------- framing

TEST(NetlinkFraming, SplitsMessagesAndSkipsPadding) {
  Bytes datagram = message(RTM_NEWROUTE, NLM_F_MULTI, 9, Bytes{1, 2, 3, 4, 5});  // padded to 24 bytes
  ASSERT_EQ(datagram.size(), 24U);
  // The last message without its padding is still whole.
  Bytes last;
  put_header(last, 17, NLMSG_DONE, NLM_F_MULTI, 9);
  last.push_back(0xaa);
  append(datagram, last);
  auto messages = netlink::split_messages(datagram);
  ASSERT_TRUE(messages) << messages.error();
  ASSERT_EQ(messages->size(), 2U);
  EXPECT_EQ((*messages)[0].type, RTM_NEWROUTE);
  EXPECT_EQ((*messages)[0].sequence, 9U);
  EXPECT_EQ((*messages)[0].payload.size(), 5U);
  EXPECT_EQ((*messages)[0].payload[4], 5);
  EXPECT_EQ((*messages)[1].type, NLMSG_DONE);
  EXPECT_EQ((*messages)[1].payload.size(), 1U);
  EXPECT_EQ((*messages)[1].payload[0], 0xaa);
}

TEST(NetlinkFraming, RejectsTruncatedHeader) {
  const Bytes whole = message(RTM_NEWROUTE, 0, 1, Bytes(8, 0));
  for (size_t size = 1; size < sizeof(nlmsghdr); ++size) {
    SCOPED_TRACE(size);
    auto messages = netlink::split_messages(core::ByteSpan(whole.data(), size));
    EXPECT_FALSE(messages);
  }
  EXPECT_TRUE(netlink::split_messages(core::ByteSpan()));  // nothing is no message, not an error
}

TEST(NetlinkFraming, RejectsLengthsThatDisagreeWithTheBuffer) {
  for (uint32_t claimed : {0U, 1U, 15U}) {
    Bytes datagram;
    put_header(datagram, claimed, RTM_NEWROUTE, 0, 1);
    auto messages = netlink::split_messages(datagram);
    EXPECT_FALSE(messages) << "claimed " << claimed;
  }
  Bytes longer;
  put_header(longer, 64, RTM_NEWROUTE, 0, 1);
  longer.resize(40);
  auto messages = netlink::split_messages(longer);
  ASSERT_FALSE(messages);
  EXPECT_NE(messages.error().find("only 40 left"), std::string::npos) << messages.error();
  // A valid message followed by a truncated one fails as a whole.
  Bytes two = message(RTM_NEWROUTE, 0, 1, Bytes(4, 0));
  put_header(two, 32, RTM_NEWROUTE, 0, 1);
  EXPECT_FALSE(netlink::split_messages(two));
}

TEST(NetlinkFraming, SplitsAttributesAndRejectsBadLengths) {
  Bytes bytes;
  put_attribute(bytes, RTA_OIF, u32_bytes(3));
  put_attribute(bytes, RTA_MULTIPATH | NLA_F_NESTED, {});
  put_attribute(bytes, RTA_DST, Bytes{10, 0, 0});  // padded
  auto attributes = netlink::split_attributes(bytes);
  ASSERT_TRUE(attributes) << attributes.error();
  ASSERT_EQ(attributes->size(), 3U);
  EXPECT_EQ((*attributes)[1].type, RTA_MULTIPATH);  // flag bits stripped
  EXPECT_EQ((*attributes)[1].value.size(), 0U);
  EXPECT_EQ((*attributes)[2].value.size(), 3U);

  for (size_t size = 1; size < sizeof(rtattr); ++size) {
    EXPECT_FALSE(netlink::split_attributes(core::ByteSpan(bytes.data(), size))) << size;
  }
  Bytes short_length = bytes;
  short_length[0] = 3;  // rta_len below its own header
  short_length[1] = 0;
  EXPECT_FALSE(netlink::split_attributes(short_length));
  Bytes long_length = bytes;
  long_length[0] = 200;
  EXPECT_FALSE(netlink::split_attributes(long_length));
}

// ---------------------------------------------------------------- acks

TEST(NetlinkAck, PlainAckAndPlainError) {
  Bytes datagram = message(NLMSG_ERROR, 0, 4, error_payload(0));
  auto messages = netlink::split_messages(datagram);
  ASSERT_TRUE(messages);
  auto ack = netlink::parse_ack((*messages)[0]);
  ASSERT_TRUE(ack) << ack.error();
  EXPECT_EQ(ack->error, 0);

  datagram = message(NLMSG_ERROR, 0, 4, error_payload(-ENETUNREACH));
  messages = netlink::split_messages(datagram);
  ack = netlink::parse_ack((*messages)[0]);
  ASSERT_TRUE(ack) << ack.error();
  EXPECT_EQ(ack->error, ENETUNREACH);
  EXPECT_EQ(ack->message, "");
}

TEST(NetlinkAck, ExtendedAckTextCappedAndUncapped) {
  const Bytes request = message(RTM_NEWROUTE, NLM_F_REQUEST, 4, Bytes(12, 0));
  Bytes text{'N', 'e', 'x', 't', 'h', 'o', 'p', 0};
  // Capped: the request's header only.
  Bytes capped = error_payload(-EINVAL);
  capped.insert(capped.end(), request.begin(), request.begin() + sizeof(nlmsghdr));
  put_attribute(capped, NLMSGERR_ATTR_MSG, text);
  // Uncapped: the whole request.
  Bytes uncapped = error_payload(-EINVAL);
  append(uncapped, request);
  put_attribute(uncapped, NLMSGERR_ATTR_MSG, Bytes{'N', 'o', 'N', 'u', 'l'});  // unterminated text
  struct Case {
    Bytes payload;
    uint16_t flags;
    std::string text;
  };
  for (const Case& c :
       {Case{capped, NLM_F_CAPPED | NLM_F_ACK_TLVS, "Nexthop"}, Case{uncapped, NLM_F_ACK_TLVS, "NoNul"}}) {
    Bytes datagram = message(NLMSG_ERROR, c.flags, 4, c.payload);
    auto messages = netlink::split_messages(datagram);
    ASSERT_TRUE(messages);
    auto ack = netlink::parse_ack((*messages)[0]);
    ASSERT_TRUE(ack) << ack.error();
    EXPECT_EQ(ack->error, EINVAL);
    EXPECT_EQ(ack->message, c.text);
  }
}

TEST(NetlinkAck, RejectsMalformedErrorMessages) {
  std::vector<std::pair<Bytes, uint16_t>> bad;
  bad.emplace_back(Bytes{0, 0}, 0);                                         // shorter than the code
  bad.emplace_back(error_payload(5), 0);                                    // positive code
  bad.emplace_back(error_payload(-EINVAL), NLM_F_ACK_TLVS | NLM_F_CAPPED);  // TLVs announced, no header
  Bytes short_echo = error_payload(-EINVAL);
  put_header(short_echo, 64, RTM_NEWROUTE, 0, 4);  // uncapped echo claims 64 bytes, has 16
  bad.emplace_back(short_echo, NLM_F_ACK_TLVS);
  Bytes bad_attribute = error_payload(-EINVAL);
  put_header(bad_attribute, 16, RTM_NEWROUTE, 0, 4);
  append(bad_attribute, Bytes{40, 0, 1, 0});  // attribute claims 40 bytes
  bad.emplace_back(bad_attribute, NLM_F_ACK_TLVS | NLM_F_CAPPED);
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    Bytes datagram = message(NLMSG_ERROR, bad[i].second, 4, bad[i].first);
    auto messages = netlink::split_messages(datagram);
    ASSERT_TRUE(messages);
    EXPECT_FALSE(netlink::parse_ack((*messages)[0]));
  }
}

// ---------------------------------------------------------------- collector

TEST(NetlinkReply, AckSkipsOtherSequencesAndReportsErrors) {
  netlink::ReplyCollector collector(netlink::ReplyCollector::Kind::ack, 7);
  // An answer to an earlier request that timed out is not ours.
  EXPECT_EQ(collector.feed(message(NLMSG_ERROR, 0, 6, error_payload(-EEXIST))),
            netlink::ReplyCollector::State::waiting);
  EXPECT_EQ(collector.feed(message(NLMSG_ERROR, 0, 7, error_payload(0))), netlink::ReplyCollector::State::done);

  netlink::ReplyCollector failing(netlink::ReplyCollector::Kind::ack, 8);
  EXPECT_EQ(failing.feed(message(NLMSG_ERROR, 0, 8, error_payload(-EEXIST))), netlink::ReplyCollector::State::failed);
  EXPECT_EQ(failing.error().code, EEXIST);
  // Once decided, later datagrams change nothing.
  EXPECT_EQ(failing.feed(message(NLMSG_ERROR, 0, 8, error_payload(0))), netlink::ReplyCollector::State::failed);
}

TEST(NetlinkReply, DumpCollectsUntilDoneAcrossDatagrams) {
  netlink::ReplyCollector collector(netlink::ReplyCollector::Kind::dump, 3);
  const Bytes route = payload_of(netlink::encode_route(RTM_NEWROUTE, 0, sample_route()));
  Bytes first = message(RTM_NEWROUTE, NLM_F_MULTI, 3, route);
  append(first, message(RTM_NEWROUTE, NLM_F_MULTI, 3, route));
  EXPECT_EQ(collector.feed(first), netlink::ReplyCollector::State::waiting);
  Bytes second = message(RTM_NEWROUTE, NLM_F_MULTI, 3, route);
  append(second, message(NLMSG_DONE, NLM_F_MULTI, 3, error_payload(0)));
  EXPECT_EQ(collector.feed(second), netlink::ReplyCollector::State::done);
  EXPECT_FALSE(collector.interrupted());
  auto messages = collector.take_messages();
  ASSERT_EQ(messages.size(), 3U);
  EXPECT_EQ(messages[2].payload, route);
}

TEST(NetlinkReply, DumpFailuresAndInterruptions) {
  {
    netlink::ReplyCollector collector(netlink::ReplyCollector::Kind::dump, 3);
    EXPECT_EQ(collector.feed(message(NLMSG_DONE, NLM_F_MULTI, 3, error_payload(-ENOMEM))),
              netlink::ReplyCollector::State::failed);
    EXPECT_EQ(collector.error().code, ENOMEM);
  }
  {
    netlink::ReplyCollector collector(netlink::ReplyCollector::Kind::dump, 3);
    EXPECT_EQ(collector.feed(message(NLMSG_DONE, NLM_F_MULTI, 3, Bytes{0, 0})), netlink::ReplyCollector::State::failed);
    EXPECT_EQ(collector.error().code, 0);
  }
  {
    netlink::ReplyCollector collector(netlink::ReplyCollector::Kind::dump, 3);
    Bytes datagram = message(RTM_NEWROUTE, NLM_F_MULTI | NLM_F_DUMP_INTR, 3, rtmsg_bytes(AF_INET, 32, 254, 158));
    append(datagram, message(NLMSG_DONE, NLM_F_MULTI | NLM_F_DUMP_INTR, 3, error_payload(0)));
    EXPECT_EQ(collector.feed(datagram), netlink::ReplyCollector::State::done);
    EXPECT_TRUE(collector.interrupted());
  }
  {
    netlink::ReplyCollector collector(netlink::ReplyCollector::Kind::dump, 3);
    Bytes datagram = message(RTM_NEWROUTE, NLM_F_MULTI, 3, Bytes(12, 0));
    datagram.resize(datagram.size() - 6);  // cut inside the message
    EXPECT_EQ(collector.feed(datagram), netlink::ReplyCollector::State::failed);
    EXPECT_NE(collector.error().message.find("malformed"), std::string::npos);
  }
}

// ---------------------------------------------------------------- routes

TEST(RouteCodec, EncodesAndDecodesEveryField) {
  for (uint32_t table : {uint32_t{RT_TABLE_MAIN}, uint32_t{100}, uint32_t{1000}}) {
    SCOPED_TRACE(table);
    netlink::RouteMessage route = sample_route();
    route.table = table;
    const Bytes payload = payload_of(netlink::encode_route(RTM_NEWROUTE, 0, route));
    rtmsg header{};
    std::memcpy(&header, payload.data(), sizeof header);
    EXPECT_EQ(header.rtm_table, table < 256 ? table : RT_TABLE_UNSPEC);
    auto decoded = netlink::decode_route(payload);
    ASSERT_TRUE(decoded) << decoded.error();
    EXPECT_EQ(decoded->family, AF_INET);
    EXPECT_EQ(decoded->dst_len, 24);
    EXPECT_EQ(decoded->table, table);
    EXPECT_EQ(decoded->protocol, 158);
    EXPECT_EQ(decoded->type, RTN_UNICAST);
    EXPECT_EQ(decoded->destination, ip("10.1.2.0"));
    EXPECT_EQ(decoded->gateway, ip("10.0.0.2"));
    EXPECT_EQ(decoded->oif, 7U);
    EXPECT_EQ(decoded->priority, 3U);
    EXPECT_FALSE(decoded->multipath);
  }
  // Addresses travel in network byte order.
  const Bytes payload = payload_of(netlink::encode_route(RTM_NEWROUTE, 0, sample_route()));
  const Bytes dst{10, 1, 2, 0};
  EXPECT_NE(std::search(payload.begin(), payload.end(), dst.begin(), dst.end()), payload.end());
}

TEST(RouteCodec, RejectsAttributesOfTheWrongSize) {
  struct Case {
    uint16_t type;
    Bytes value;
  };
  for (const Case& c : {Case{RTA_DST, Bytes{10, 0}}, Case{RTA_GATEWAY, Bytes{10, 0, 0, 1, 0}},
                        Case{RTA_OIF, Bytes{1, 0}}, Case{RTA_PRIORITY, Bytes(8, 0)}, Case{RTA_TABLE, Bytes{1, 0, 0}}}) {
    SCOPED_TRACE(c.type);
    Bytes payload = rtmsg_bytes(AF_INET, 32, 254, 158);
    put_attribute(payload, c.type, c.value);
    EXPECT_FALSE(netlink::decode_route(payload));
  }
  EXPECT_FALSE(netlink::decode_route(rtmsg_bytes(AF_INET, 33, 254, 158)));
  const Bytes header = rtmsg_bytes(AF_INET, 32, 254, 158);
  EXPECT_FALSE(netlink::decode_route(core::ByteSpan(header.data(), header.size() - 1)));
}

TEST(RouteCodec, OtherFamiliesKeepTheirHeader) {
  Bytes payload = rtmsg_bytes(AF_INET6, 128, 254, 158);
  put_attribute(payload, RTA_DST, Bytes(16, 0xfe));
  put_attribute(payload, RTA_MULTIPATH, Bytes(8, 0));
  auto decoded = netlink::decode_route(payload);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(decoded->family, AF_INET6);
  EXPECT_EQ(decoded->dst_len, 128);
  EXPECT_FALSE(decoded->destination);
  EXPECT_TRUE(decoded->multipath);
}

// Cut a valid route message at every length: it decodes exactly when the cut
// falls on an attribute boundary (the message then just lacks attributes).
TEST(RouteCodec, EveryTruncationIsRejectedUnlessOnABoundary) {
  const Bytes payload = payload_of(netlink::encode_route(RTM_NEWROUTE, 0, sample_route()));
  std::vector<size_t> boundaries{sizeof(rtmsg)};
  auto attributes = netlink::split_attributes(core::ByteSpan(payload).subspan(sizeof(rtmsg)));
  ASSERT_TRUE(attributes);
  for (const auto& attribute : *attributes) {
    boundaries.push_back(static_cast<size_t>(attribute.value.data() + attribute.value.size() - payload.data()));
  }
  for (size_t size = 0; size <= payload.size(); ++size) {
    SCOPED_TRACE(size);
    const bool on_boundary = std::find(boundaries.begin(), boundaries.end(), size) != boundaries.end();
    EXPECT_EQ(static_cast<bool>(netlink::decode_route(core::ByteSpan(payload.data(), size))), on_boundary);
  }
}

// Random corruption of a whole dump datagram: every decoder either rejects
// it or returns views that lie inside the datagram; nothing reads outside.
TEST(RouteCodec, CorruptedDumpsNeverReadOutsideTheBuffer) {
  Bytes clean;
  for (uint32_t i = 0; i < 4; ++i) {
    netlink::RouteMessage route = sample_route();
    route.oif = i + 1;
    append(clean, message(RTM_NEWROUTE, NLM_F_MULTI, 5, payload_of(netlink::encode_route(RTM_NEWROUTE, 0, route))));
  }
  append(clean, message(NLMSG_DONE, NLM_F_MULTI, 5, error_payload(0)));
  constexpr uint32_t kSeeds = 3000;
  size_t accepted = 0;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937 rng(seed);
    Bytes datagram = clean;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) datagram[rng() % datagram.size()] = static_cast<uint8_t>(rng());
    if (rng() % 3 == 0) datagram.resize(rng() % datagram.size());
    const uint8_t* begin = datagram.data();
    const uint8_t* end = begin + datagram.size();
    auto inside = [&](core::ByteSpan span) {
      return span.empty() || (span.data() >= begin && span.data() + span.size() <= end);
    };
    auto messages = netlink::split_messages(datagram);
    if (messages) {
      for (const netlink::Message& m : *messages) {
        ASSERT_TRUE(inside(m.payload)) << "seed " << seed;
        auto attributes = netlink::split_attributes(m.payload.size() >= sizeof(rtmsg) ? m.payload.subspan(sizeof(rtmsg))
                                                                                      : core::ByteSpan());
        if (attributes) {
          for (const auto& a : *attributes) ASSERT_TRUE(inside(a.value)) << "seed " << seed;
        }
        if (netlink::decode_route(m.payload)) ++accepted;
        (void)netlink::parse_ack(m);
      }
    }
    netlink::ReplyCollector collector(netlink::ReplyCollector::Kind::dump, 5);
    collector.feed(datagram);
    for (const auto& owned : collector.take_messages()) (void)netlink::decode_route(owned.payload);
  }
  // Most corruptions hit addresses or values, not lengths: the sweep must
  // have exercised the accepting paths too, not only the rejections.
  EXPECT_GT(accepted, kSeeds);
}

// ---------------------------------------------------------------- routes and plans

TEST(KernelRoute, ValidatesAndPrints) {
  EXPECT_FALSE(validate(via("10.1.0.0", 16, "10.0.0.2", 0, 1)));
  EXPECT_FALSE(validate(on_link("10.1.0.5", 3, 0)));
  EXPECT_FALSE(validate(via("0.0.0.0", 0, "10.0.0.2", 2, 1)));
  EXPECT_TRUE(validate(via("10.1.0.1", 16, "10.0.0.2", 0, 1)));  // host bits beyond the prefix
  EXPECT_TRUE(validate(via("10.1.0.0", 33, "10.0.0.2", 0, 1)));
  EXPECT_TRUE(validate(on_link("10.1.0.5", 0, 0)));  // on-link needs an interface
  EXPECT_TRUE(validate(on_link("10.1.0.5", -1, 0)));
  EXPECT_EQ(via("10.1.0.0", 16, "10.0.0.2", 3, 5).to_string(), "10.1.0.0/16 via 10.0.0.2 dev 3 metric 5");
  EXPECT_EQ(on_link("10.1.0.5", 2, 0).to_string(), "10.1.0.5/32 dev 2 metric 0");
}

TEST(KernelRoutesOpen, RefusesReservedProtocolsAndTables) {
  for (uint8_t protocol = 0; protocol <= RTPROT_STATIC; ++protocol) {
    KernelRoutes::Options options;
    options.protocol = protocol;
    auto routes = KernelRoutes::open(options);
    ASSERT_FALSE(routes) << "protocol " << int{protocol};
    EXPECT_NE(routes.error().find("choose an unused number"), std::string::npos) << routes.error();
  }
  for (uint32_t table : {uint32_t{RT_TABLE_UNSPEC}, uint32_t{RT_TABLE_LOCAL}}) {
    KernelRoutes::Options options;
    options.table = table;
    auto routes = KernelRoutes::open(options);
    ASSERT_FALSE(routes) << "table " << table;
    EXPECT_NE(routes.error().find("not usable"), std::string::npos) << routes.error();
  }
}

TEST(SyncPlan, AddsOnLinkRoutesBeforeGatewayRoutes) {
  const std::vector<KernelRoute> wanted{via("10.9.0.3", 32, "10.9.0.2", 1, 2), on_link("10.9.0.2", 1, 1),
                                        via("10.9.0.4", 32, "10.9.0.2", 0, 2)};
  SyncPlan plan = plan_sync({}, wanted);
  ASSERT_EQ(plan.changes.size(), 3U);
  EXPECT_EQ(plan.changes[0].route, wanted[1]);
  EXPECT_EQ(plan.changes[1].route, wanted[0]);
  EXPECT_EQ(plan.changes[2].route, wanted[2]);
  for (const auto& change : plan.changes) EXPECT_EQ(change.kind, RouteChange::Kind::add);
  EXPECT_TRUE(plan.errors.empty());
}

TEST(SyncPlan, UnchangedReplacedAndStale) {
  const std::vector<KernelRoute> current{
      via("10.9.0.3", 32, "10.9.0.2", 4, 2),  // kernel-chosen interface 4
      via("10.9.0.5", 32, "10.9.0.2", 1, 2),  // gateway changes
      via("10.9.0.6", 32, "10.9.0.2", 1, 2),  // metric changes
      on_link("10.9.0.2", 1, 1),              // stale
      via("10.9.0.7", 32, "10.9.0.2", 1, 2),  // stale
  };
  const std::vector<KernelRoute> wanted{
      via("10.9.0.3", 32, "10.9.0.2", 0, 2),  // any interface is fine
      via("10.9.0.5", 32, "10.9.0.8", 1, 2),
      via("10.9.0.6", 32, "10.9.0.2", 1, 3),
  };
  SyncPlan plan = plan_sync(current, wanted);
  EXPECT_EQ(plan.unchanged, 1U);
  ASSERT_EQ(plan.changes.size(), 4U);
  EXPECT_EQ(plan.changes[0].kind, RouteChange::Kind::replace);
  EXPECT_EQ(plan.changes[0].route, wanted[1]);
  EXPECT_EQ(plan.changes[0].old, current[1]);
  EXPECT_EQ(plan.changes[1].kind, RouteChange::Kind::replace);
  EXPECT_EQ(plan.changes[1].old, current[2]);
  // Removals: the route through a gateway before the on-link one.
  EXPECT_EQ(plan.changes[2].kind, RouteChange::Kind::remove);
  EXPECT_EQ(plan.changes[2].route, current[4]);
  EXPECT_EQ(plan.changes[3].kind, RouteChange::Kind::remove);
  EXPECT_EQ(plan.changes[3].route, current[3]);
}

TEST(SyncPlan, InvalidAndDuplicateRoutesAreErrors) {
  const std::vector<KernelRoute> current{via("10.9.1.0", 24, "10.9.0.2", 1, 2)};
  const std::vector<KernelRoute> wanted{
      via("10.9.1.1", 24, "10.9.0.2", 1, 2),  // host bits: refused, so the current /24 goes
      on_link("10.9.0.2", 0, 1),              // no interface
      via("10.9.0.3", 32, "10.9.0.2", 1, 2), via("10.9.0.3", 32, "10.9.0.4", 1, 2),  // duplicate destination
  };
  SyncPlan plan = plan_sync(current, wanted);
  ASSERT_EQ(plan.errors.size(), 3U);
  EXPECT_EQ(plan.errors[0].route, wanted[0]);
  EXPECT_EQ(plan.errors[1].route, wanted[1]);
  EXPECT_EQ(plan.errors[2].route, wanted[3]);
  ASSERT_EQ(plan.changes.size(), 2U);
  EXPECT_EQ(plan.changes[0].kind, RouteChange::Kind::add);
  EXPECT_EQ(plan.changes[0].route, wanted[2]);
  EXPECT_EQ(plan.changes[1].kind, RouteChange::Kind::remove);
  EXPECT_EQ(plan.changes[1].route, current[0]);
}

TEST(SyncPlan, SeveralOfOursAtOneDestination) {
  // Leftovers of two metrics: the wanted one stays, the other goes.
  const std::vector<KernelRoute> current{via("10.9.0.3", 32, "10.9.0.2", 1, 2), via("10.9.0.3", 32, "10.9.0.2", 1, 5)};
  SyncPlan plan = plan_sync(current, {via("10.9.0.3", 32, "10.9.0.2", 1, 5)});
  EXPECT_EQ(plan.unchanged, 1U);
  ASSERT_EQ(plan.changes.size(), 1U);
  EXPECT_EQ(plan.changes[0].kind, RouteChange::Kind::remove);
  EXPECT_EQ(plan.changes[0].route, current[0]);
}

// Random tables: applying the plan to a model of the kernel (keyed like the
// kernel: destination, prefix and metric) yields exactly the wanted routes,
// and no route through a gateway is added before an on-link route.
TEST(SyncPlan, RandomTablesConvergeToWanted) {
  constexpr uint32_t kSeeds = 500;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    std::mt19937 rng(seed);
    auto random_route = [&] {
      KernelRoute route;
      route.prefix_length = rng() % 4 == 0 ? 24 : 32;
      route.destination = Ipv4Address((0x0a090000U + (rng() % 6) * 256U) & (route.prefix_length == 24 ? ~0xffU : ~0U));
      if (route.prefix_length == 32) route.destination = Ipv4Address(route.destination.value() + rng() % 3);
      route.gateway = rng() % 3 == 0 ? Ipv4Address() : Ipv4Address(0x0a000001U + rng() % 3);
      route.ifindex = static_cast<int>(rng() % 3);
      if (route.on_link() && route.ifindex == 0) route.ifindex = 1;
      route.metric = rng() % 3;
      return route;
    };
    std::vector<KernelRoute> current;
    std::vector<KernelRoute> wanted;
    for (uint32_t i = rng() % 8; i > 0; --i) {
      KernelRoute route = random_route();
      if (route.ifindex == 0) route.ifindex = 2;  // the kernel always lists the interface
      current.push_back(route);
    }
    for (uint32_t i = rng() % 8; i > 0; --i) wanted.push_back(random_route());

    // The kernel's key: two current routes never share it.
    auto key = [](const KernelRoute& r) { return std::make_tuple(r.destination, r.prefix_length, r.metric); };
    std::map<std::tuple<Ipv4Address, uint8_t, uint32_t>, KernelRoute> model;
    for (const auto& r : current) model.emplace(key(r), r);
    std::vector<KernelRoute> unique_current;
    unique_current.reserve(model.size());
    for (const auto& [k, r] : model) unique_current.push_back(r);

    SyncPlan plan = plan_sync(unique_current, wanted);
    bool gateway_added = false;
    for (const RouteChange& change : plan.changes) {
      SCOPED_TRACE(testing::Message() << "seed " << seed << " change " << change.route.to_string());
      switch (change.kind) {
        case RouteChange::Kind::add:
          ASSERT_EQ(model.count(key(change.route)), 0U);
          model.emplace(key(change.route), change.route);
          break;
        case RouteChange::Kind::replace:
          ASSERT_TRUE(change.old);
          ASSERT_EQ(model.count(key(*change.old)), 1U);
          model.erase(key(*change.old));
          model.emplace(key(change.route), change.route);
          break;
        case RouteChange::Kind::remove:
          ASSERT_EQ(model.erase(key(change.route)), 1U);
          break;
      }
      if (change.kind != RouteChange::Kind::remove) {
        if (!change.route.on_link()) gateway_added = true;
        ASSERT_FALSE(change.route.on_link() && gateway_added);
      }
    }
    // Expected: the first valid wanted route of each destination.
    std::map<std::pair<Ipv4Address, uint8_t>, KernelRoute> expected;
    for (const auto& r : wanted) {
      if (!validate(r)) expected.emplace(std::make_pair(r.destination, r.prefix_length), r);
    }
    ASSERT_EQ(model.size(), expected.size()) << "seed " << seed;
    for (const auto& [k, r] : model) {
      auto it = expected.find({r.destination, r.prefix_length});
      ASSERT_NE(it, expected.end()) << "seed " << seed << " unexpected " << r.to_string();
      const KernelRoute& w = it->second;
      EXPECT_TRUE(r.gateway == w.gateway && r.metric == w.metric && (w.ifindex == 0 || r.ifindex == w.ifindex))
          << "seed " << seed << " have " << r.to_string() << " want " << w.to_string();
    }
    EXPECT_EQ(plan.errors.size(), wanted.size() - expected.size()) << "seed " << seed;
  }
}

#else  // KERNEL_ROUTES_NETNS_TESTS

// ---------------------------------------------------------------- real kernel

std::vector<KernelRoute> sorted(std::vector<KernelRoute> routes) {
  std::sort(routes.begin(), routes.end(), [](const KernelRoute& a, const KernelRoute& b) {
    return std::tie(a.destination, a.prefix_length, a.metric) < std::tie(b.destination, b.prefix_length, b.metric);
  });
  return routes;
}

struct CommandResult {
  int status = -1;
  std::string output;
};

CommandResult run(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 512> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// `ip -4 route show proto P table T`, parsed back into routes: the second,
// independent view of what the kernel holds (besides our own dump).
std::vector<KernelRoute> ip_routes(uint8_t protocol, uint32_t table = RT_TABLE_MAIN) {
  const CommandResult shown =
      run("ip -4 route show proto " + std::to_string(protocol) + " table " + std::to_string(table));
  EXPECT_EQ(shown.status, 0) << shown.output;
  std::vector<KernelRoute> routes;
  std::istringstream lines(shown.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    KernelRoute route;
    if (word == "default") word = "0.0.0.0/0";
    const size_t slash = word.find('/');
    const auto address = Ipv4Address::parse(word.substr(0, slash));
    EXPECT_TRUE(address) << line;
    if (!address) continue;
    route.destination = *address;
    route.prefix_length = slash == std::string::npos ? 32 : static_cast<uint8_t>(std::stoi(word.substr(slash + 1)));
    while (words >> word) {
      static const std::vector<std::string> kWithValue{"via", "dev", "metric", "scope", "proto", "src", "table"};
      if (std::find(kWithValue.begin(), kWithValue.end(), word) == kWithValue.end()) continue;  // a flag
      std::string value;
      words >> value;
      if (word == "via") route.gateway = *Ipv4Address::parse(value);
      if (word == "dev") route.ifindex = static_cast<int>(::if_nametoindex(value.c_str()));
      if (word == "metric") route.metric = static_cast<uint32_t>(std::stoul(value));
    }
    routes.push_back(route);
  }
  return sorted(routes);
}

// Every IPv4 route of every protocol in every table, as text.
std::string all_routes() { return run("ip -4 route show table all").output; }

bool has_line(const std::string& text, const std::string& line) {
  std::istringstream lines(text);
  std::string l;
  while (std::getline(lines, l)) {
    while (!l.empty() && l.back() == ' ') l.pop_back();
    if (l == line) return true;
  }
  return false;
}

constexpr uint8_t kProtocol = KernelRoutes::kDefaultProtocol;

KernelRoutes::Options options(uint32_t table = RT_TABLE_MAIN) {
  KernelRoutes::Options o;
  o.protocol = kProtocol;
  o.table = table;
  return o;
}

// Each test runs in a fresh network namespace of its own: two veth ends
// kr0 (10.77.0.1/24) and kr1 (10.78.0.1/24). Leaving the namespace drops it
// and everything in it.
class KernelRoutesNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for network namespaces";
    if (run("ip -V").status != 0) GTEST_SKIP() << "needs the ip command (iproute2) to build the namespace";
    original_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(original_, 0) << std::strerror(errno);
    if (::unshare(CLONE_NEWNET) != 0) {
      const int code = errno;
      ::close(original_);
      original_ = -1;
      GTEST_SKIP() << "cannot create a network namespace (unshare: " << std::strerror(code) << ")";
    }
    for (const char* command :
         {"ip link set lo up", "ip link add kr0 type veth peer name kr1", "ip addr add 10.77.0.1/24 dev kr0",
          "ip addr add 10.78.0.1/24 dev kr1", "ip link set kr0 up", "ip link set kr1 up"}) {
      const CommandResult result = run(command);
      ASSERT_EQ(result.status, 0) << command << ": " << result.output;
    }
    kr0_ = static_cast<int>(::if_nametoindex("kr0"));
    kr1_ = static_cast<int>(::if_nametoindex("kr1"));
    ASSERT_GT(kr0_, 0);
    ASSERT_GT(kr1_, 0);
  }

  void TearDown() override {
    if (original_ < 0) return;
    ASSERT_EQ(::setns(original_, CLONE_NEWNET), 0) << std::strerror(errno);
    ::close(original_);
    // Back in the original namespace, none of the test's interfaces exist.
    EXPECT_EQ(::if_nametoindex("kr0"), 0U);
    EXPECT_EQ(::if_nametoindex("kr1"), 0U);
  }

  std::unique_ptr<KernelRoutes> open_routes(uint32_t table = RT_TABLE_MAIN) {
    auto routes = KernelRoutes::open(options(table));
    EXPECT_TRUE(routes) << routes.error();
    return routes ? std::move(*routes) : nullptr;
  }

  static std::vector<KernelRoute> dump(const KernelRoutes& routes) {
    auto installed = routes.installed();
    EXPECT_TRUE(installed) << installed.error().to_string();
    return installed ? sorted(*installed) : std::vector<KernelRoute>{};
  }

  // A few routes of every shape: through a gateway on a named interface,
  // on-link, a /24 with the interface left to the kernel, a gateway that is
  // reachable only through our own on-link route (listed before it, so the
  // order of the adds matters), and metric 0.
  std::vector<KernelRoute> sample() const {
    return {via("10.90.0.1", 32, "10.77.0.2", kr0_, 3), via("10.90.0.3", 32, "10.90.0.2", kr1_, 4),
            on_link("10.90.0.2", kr1_, 1), via("10.91.0.0", 24, "10.78.0.7", 0, 2),
            via("10.90.0.4", 32, "10.77.0.5", kr0_, 0)};
  }
  // `routes` as the kernel lists them: the interface it picked filled in.
  std::vector<KernelRoute> resolved(std::vector<KernelRoute> routes) const {
    for (auto& r : routes) {
      if (r.ifindex == 0 && r.gateway.value() >> 8 == ip("10.78.0.0").value() >> 8) r.ifindex = kr1_;
      if (r.ifindex == 0 && r.gateway.value() >> 8 == ip("10.77.0.0").value() >> 8) r.ifindex = kr0_;
    }
    return sorted(routes);
  }

  int original_ = -1;
  int kr0_ = 0;
  int kr1_ = 0;
};

TEST_F(KernelRoutesNetns, SyncAddsRoutes) {
  auto routes = open_routes();
  ASSERT_TRUE(routes);
  EXPECT_TRUE(dump(*routes).empty());
  SyncResult result = routes->sync(sample());
  for (const auto& e : result.errors) ADD_FAILURE() << e.route.to_string() << ": " << e.message;
  EXPECT_EQ(result.added, sample().size());
  EXPECT_EQ(dump(*routes), resolved(sample()));
  EXPECT_EQ(ip_routes(kProtocol), resolved(sample()));
  // Routes carry our protocol and the scope their kind needs.
  const std::string text = all_routes();
  EXPECT_TRUE(has_line(text, "10.90.0.2 dev kr1 proto 158 scope link metric 1")) << text;
  EXPECT_TRUE(has_line(text, "10.91.0.0/24 via 10.78.0.7 dev kr1 proto 158 metric 2")) << text;

  // Syncing the same set again changes nothing.
  result = routes->sync(sample());
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.unchanged, sample().size());
  EXPECT_EQ(result.added + result.replaced + result.removed, 0U);
}

TEST_F(KernelRoutesNetns, SyncReplacesChangedRoutes) {
  auto routes = open_routes();
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->sync(sample()).ok());
  std::vector<KernelRoute> changed = sample();
  changed[0].gateway = ip("10.77.0.9");                     // new gateway, same metric
  changed[2].metric = 7;                                    // new metric
  changed[4] = via("10.90.0.4", 32, "10.78.0.5", kr1_, 0);  // new interface and gateway
  const SyncResult result = routes->sync(changed);
  for (const auto& e : result.errors) ADD_FAILURE() << e.route.to_string() << ": " << e.message;
  EXPECT_EQ(result.replaced, 3U);
  EXPECT_EQ(result.unchanged, 2U);
  EXPECT_EQ(result.added + result.removed, 0U);
  // One route per destination: the old metric's route is gone.
  EXPECT_EQ(dump(*routes), resolved(changed));
  EXPECT_EQ(ip_routes(kProtocol), resolved(changed));
}

TEST_F(KernelRoutesNetns, SyncRemovesStaleRoutes) {
  auto routes = open_routes();
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->sync(sample()).ok());
  // The route through 10.90.0.2 goes before the on-link route that makes
  // 10.90.0.2 reachable.
  std::vector<KernelRoute> fewer{sample()[0], sample()[3]};
  const SyncResult result = routes->sync(fewer);
  for (const auto& e : result.errors) ADD_FAILURE() << e.route.to_string() << ": " << e.message;
  EXPECT_EQ(result.removed, 3U);
  EXPECT_EQ(result.unchanged, 2U);
  EXPECT_EQ(dump(*routes), resolved(fewer));
  EXPECT_EQ(ip_routes(kProtocol), resolved(fewer));
}

TEST_F(KernelRoutesNetns, LeavesOtherProtocolsAndTablesAlone) {
  for (const char* command : {
           "ip route add 10.92.0.0/24 via 10.77.0.9 proto static",
           "ip route add 10.90.0.1/32 via 10.77.0.9 metric 50 proto 157",    // our destination, not ours
           "ip route add 10.93.0.1/32 via 10.77.0.9 metric 3 proto static",  // our destination and metric
           "ip route add 10.94.0.1/32 via 10.77.0.9 proto 158 table 100",    // our protocol, other table
           "ip route add 10.95.0.1/32 via 10.77.0.9 metric 1",               // proto boot
       }) {
    const CommandResult result = run(command);
    ASSERT_EQ(result.status, 0) << command << ": " << result.output;
  }
  const std::string before = all_routes();
  {
    auto routes = open_routes();
    ASSERT_TRUE(routes);
    std::vector<KernelRoute> wanted = sample();
    wanted.push_back(via("10.93.0.1", 32, "10.77.0.2", kr0_, 3));
    SyncResult result = routes->sync(wanted);
    EXPECT_EQ(result.added, sample().size());
    // The administrator's route at the same destination and metric stays;
    // ours is reported, not forced in.
    ASSERT_EQ(result.errors.size(), 1U);
    EXPECT_EQ(result.errors[0].route, wanted.back());
    EXPECT_EQ(result.errors[0].code, EEXIST);
    EXPECT_TRUE(has_line(all_routes(), "10.93.0.1 via 10.77.0.9 dev kr0 proto static metric 3")) << all_routes();
    EXPECT_EQ(ip_routes(kProtocol), resolved(sample()));
    result = routes->sync({sample()[2]});
    EXPECT_TRUE(result.ok());
    EXPECT_EQ(routes->withdraw_all().removed, 1U);
    EXPECT_TRUE(ip_routes(kProtocol).empty());
  }
  // Every foreign route is exactly as it was.
  EXPECT_EQ(all_routes(), before);
}

TEST_F(KernelRoutesNetns, WithdrawAllAndDestructorCleanUp) {
  auto routes = open_routes();
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->sync(sample()).ok());
  const SyncResult result = routes->withdraw_all();
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.removed, sample().size());
  EXPECT_TRUE(dump(*routes).empty());
  EXPECT_TRUE(ip_routes(kProtocol).empty());

  ASSERT_TRUE(routes->sync(sample()).ok());
  EXPECT_EQ(ip_routes(kProtocol).size(), sample().size());
  routes.reset();
  EXPECT_TRUE(ip_routes(kProtocol).empty());
}

TEST_F(KernelRoutesNetns, OpenAfterCrashRemovesLeftovers) {
  ASSERT_EQ(run("ip route add 10.92.0.0/24 via 10.77.0.9 proto static").status, 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The crashing agent: installs routes and dies without withdrawing.
    auto routes = KernelRoutes::open(options());
    if (!routes) ::_exit(2);
    if (!(*routes)->sync(sample()).ok()) ::_exit(3);
    ::kill(::getpid(), SIGKILL);
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child exited " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  EXPECT_EQ(ip_routes(kProtocol), resolved(sample()));  // left behind by the crash

  auto routes = open_routes();
  ASSERT_TRUE(routes);
  EXPECT_TRUE(dump(*routes).empty());
  EXPECT_TRUE(ip_routes(kProtocol).empty());
  EXPECT_TRUE(has_line(all_routes(), "10.92.0.0/24 via 10.77.0.9 dev kr0 proto static")) << all_routes();
}

TEST_F(KernelRoutesNetns, OneBadRouteDoesNotStopTheOthers) {
  auto routes = open_routes();
  ASSERT_TRUE(routes);
  const std::vector<KernelRoute> wanted{
      via("10.90.0.1", 32, "10.77.0.2", kr0_, 3),
      on_link("10.90.0.9", 9999, 1),             // no such interface
      via("10.90.0.8", 32, "10.200.0.1", 0, 1),  // gateway unreachable
      via("10.90.0.7", 32, "10.78.0.2", kr1_, 1),
  };
  const SyncResult result = routes->sync(wanted);
  EXPECT_EQ(result.added, 2U);
  ASSERT_EQ(result.errors.size(), 2U);
  for (const RouteError& error : result.errors) {
    EXPECT_EQ(error.operation, RouteError::Operation::add);
    EXPECT_NE(error.code, 0) << error.message;
    EXPECT_FALSE(error.message.empty());
  }
  EXPECT_EQ(ip_routes(kProtocol), sorted({wanted[0], wanted[3]}));
}

TEST_F(KernelRoutesNetns, RoutesTheKernelDroppedComeBack) {
  auto routes = open_routes();
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->sync(sample()).ok());
  // An interface going down takes its routes with it.
  ASSERT_EQ(run("ip link set kr1 down").status, 0);
  ASSERT_EQ(run("ip link set kr1 up").status, 0);
  const std::vector<KernelRoute> expected = resolved(sample());
  const size_t on_kr1 = static_cast<size_t>(
      std::count_if(expected.begin(), expected.end(), [&](const KernelRoute& r) { return r.ifindex == kr1_; }));
  ASSERT_EQ(on_kr1, 3U);
  EXPECT_EQ(ip_routes(kProtocol).size(), sample().size() - on_kr1);
  const SyncResult result = routes->sync(sample());
  EXPECT_TRUE(result.ok());
  EXPECT_EQ(result.added, on_kr1);
  EXPECT_EQ(ip_routes(kProtocol), expected);
}

TEST_F(KernelRoutesNetns, OtherTable) {
  auto routes = open_routes(100);
  ASSERT_TRUE(routes);
  ASSERT_TRUE(routes->sync(sample()).ok());
  EXPECT_EQ(ip_routes(kProtocol, 100), resolved(sample()));
  EXPECT_TRUE(ip_routes(kProtocol, RT_TABLE_MAIN).empty());
  EXPECT_EQ(dump(*routes), resolved(sample()));
  routes.reset();
  EXPECT_TRUE(ip_routes(kProtocol, 100).empty());
}

TEST_F(KernelRoutesNetns, RefusedWithoutNetAdmin) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capget, &header, data) != 0) ::_exit(2);
    data[CAP_TO_INDEX(CAP_NET_ADMIN)].effective &= ~CAP_TO_MASK(CAP_NET_ADMIN);
    if (::syscall(SYS_capset, &header, data) != 0) ::_exit(3);
    auto routes = KernelRoutes::open(options());
    if (routes) ::_exit(4);
    ::_exit(routes.error().find("CAP_NET_ADMIN") != std::string::npos ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2/3: capabilities not changed, 4: opened anyway, 5: wrong message";
}

#endif  // KERNEL_ROUTES_NETNS_TESTS

}  // namespace
}  // namespace mesh::agent
