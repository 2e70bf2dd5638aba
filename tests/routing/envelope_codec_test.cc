#include "routing/envelope_codec.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/rng.h"
#include "proto/wire.pb.h"

namespace mesh::routing {
namespace {

core::ByteSpan span_of(const std::string& s) {
  return core::ByteSpan(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::string echo_request_body(std::string payload) {
  proto::EchoBody body;
  body.mutable_request()->set_payload(std::move(payload));
  return body.SerializeAsString();
}

core::Message sample(core::MessageKind kind) {
  core::Message m;
  m.src = core::Ipv4Address::from_octets(10, 0, 0, 1);
  m.dst = core::Ipv4Address::from_octets(10, 0, 0, 2);
  m.kind = kind;
  m.msg_id = 0x1234567890abcdefULL;
  m.body_type = proto::Envelope::kEchoFieldNumber;
  m.body = echo_request_body("hello");
  m.ttl = 7;
  m.hops = 3;
  return m;
}

void expect_same(const core::Message& a, const core::Message& b) {
  EXPECT_EQ(a.src, b.src);
  EXPECT_EQ(a.dst, b.dst);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.msg_id, b.msg_id);
  EXPECT_EQ(a.body_type, b.body_type);
  EXPECT_EQ(a.body, b.body);
  EXPECT_EQ(a.ttl, b.ttl);
  EXPECT_EQ(a.hops, b.hops);
}

TEST(EnvelopeCodec, RoundTripsEveryKind) {
  for (auto kind : {core::MessageKind::datagram, core::MessageKind::request, core::MessageKind::response,
                    core::MessageKind::rejection}) {
    SCOPED_TRACE(static_cast<int>(kind));
    core::Message m = sample(kind);
    if (kind == core::MessageKind::rejection) m.body = "no handler for body type 16";
    const std::string bytes = encode_envelope(m);
    auto decoded = decode_envelope(span_of(bytes));
    ASSERT_TRUE(decoded) << to_string(decoded.error());
    expect_same(*decoded, m);
  }
}

TEST(EnvelopeCodec, WireMatchesSettingTheOneof) {
  const core::Message m = sample(core::MessageKind::request);
  proto::Envelope envelope;
  ASSERT_TRUE(envelope.ParseFromString(encode_envelope(m)));
  EXPECT_EQ(envelope.version(), kEnvelopeVersion);
  EXPECT_EQ(envelope.src(), m.src.value());
  EXPECT_EQ(envelope.dst(), m.dst.value());
  EXPECT_EQ(envelope.kind(), proto::REQUEST);
  ASSERT_EQ(envelope.body_case(), proto::Envelope::kEcho);
  EXPECT_EQ(envelope.echo().request().payload(), "hello");
  EXPECT_EQ(envelope.SerializeAsString(), encode_envelope(m));
}

TEST(EnvelopeCodec, BodyPreservedByteExact) {
  core::Rng rng(42);
  for (int i = 0; i < 200; ++i) {
    std::string payload(rng.below(300), '\0');
    for (auto& c : payload) c = static_cast<char>(rng.below(256));
    core::Message m = sample(core::MessageKind::datagram);
    m.body = echo_request_body(payload);
    auto decoded = decode_envelope(span_of(encode_envelope(m)));
    ASSERT_TRUE(decoded);
    EXPECT_EQ(decoded->body, m.body);
  }
  // An empty body member is still a body.
  core::Message empty = sample(core::MessageKind::datagram);
  empty.body_type = proto::Envelope::kEchoFieldNumber;
  empty.body.clear();
  auto decoded = decode_envelope(span_of(encode_envelope(empty)));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->body_type, empty.body_type);
  EXPECT_EQ(decoded->body, "");
}

TEST(EnvelopeCodec, UnknownBodyFieldNumberIsUnknownBody) {
  for (uint32_t body_type : {0u, 15u, 99u, 1000u, 1u, 3u, 8u}) {
    SCOPED_TRACE(body_type);
    core::Message m = sample(core::MessageKind::datagram);
    m.body_type = body_type;
    m.body = "\x0a\x01x";
    auto decoded = decode_envelope(span_of(encode_envelope(m)));
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), EnvelopeError::unknown_body);
  }
}

TEST(EnvelopeCodec, WrongVersionRefused) {
  proto::Envelope envelope;
  ASSERT_TRUE(envelope.ParseFromString(encode_envelope(sample(core::MessageKind::request))));
  for (uint32_t version : {0u, 2u, 255u}) {
    envelope.set_version(version);
    auto decoded = decode_envelope(span_of(envelope.SerializeAsString()));
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), EnvelopeError::bad_version);
  }
}

TEST(EnvelopeCodec, UnknownKindRefused) {
  proto::Envelope envelope;
  ASSERT_TRUE(envelope.ParseFromString(encode_envelope(sample(core::MessageKind::request))));
  envelope.set_kind(static_cast<proto::MessageKind>(9));
  auto decoded = decode_envelope(span_of(envelope.SerializeAsString()));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error(), EnvelopeError::bad_kind);
}

TEST(EnvelopeCodec, GarbageAndTruncationAreMalformedNeverACrash) {
  const std::string good = encode_envelope(sample(core::MessageKind::request));
  // Every strict prefix either fails or decodes (a prefix ending on a field
  // boundary is a valid Envelope missing fields); none may crash.
  size_t refused = 0;
  for (size_t n = 0; n < good.size(); ++n) {
    auto decoded = decode_envelope(span_of(good.substr(0, n)));
    if (!decoded) ++refused;
  }
  EXPECT_GT(refused, good.size() / 2);
  // Cutting into the body member's bytes is malformed.
  auto cut = decode_envelope(span_of(good.substr(0, good.size() - 1)));
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error(), EnvelopeError::malformed);

  for (const std::string& garbage : {std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),
                                     std::string("\x0f", 1), std::string("\x82\x01\x10xx", 5)}) {
    auto decoded = decode_envelope(span_of(garbage));
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), EnvelopeError::malformed);
  }
  core::Rng rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng.below(64), '\0');
    for (auto& c : bytes) c = static_cast<char>(rng.below(256));
    (void)decode_envelope(span_of(bytes));
  }
}

TEST(EnvelopeCodec, RejectionReasonTravels) {
  core::Message m = sample(core::MessageKind::rejection);
  m.body = "no handler for echo";
  proto::Envelope envelope;
  ASSERT_TRUE(envelope.ParseFromString(encode_envelope(m)));
  EXPECT_EQ(envelope.rejection_reason(), "no handler for echo");
  auto decoded = decode_envelope(span_of(encode_envelope(m)));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->kind, core::MessageKind::rejection);
  EXPECT_EQ(decoded->body, "no handler for echo");
  EXPECT_EQ(decoded->body_type, m.body_type);

  // A rejection of a body type the receiver does not know still decodes.
  m.body_type = 99;
  decoded = decode_envelope(span_of(encode_envelope(m)));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->body, "no handler for echo");
  EXPECT_EQ(decoded->body_type, 0u);
}

TEST(EnvelopeCodec, BodyTypeNames) {
  EXPECT_EQ(body_type_name(proto::Envelope::kEchoFieldNumber), "echo");
  EXPECT_EQ(body_type_name(proto::Envelope::kMembershipFieldNumber), "membership");
  EXPECT_EQ(body_type_name(17), "unknown");  // the retired beacon
  EXPECT_EQ(body_type_name(0), "unknown");
  EXPECT_EQ(body_type_name(1), "unknown");  // a header field, not a body
  EXPECT_EQ(body_type_name(99), "unknown");
  EXPECT_EQ(body_type_name(0xffffffffu), "unknown");
}

TEST(EnvelopeCodec, ErrorNames) {
  EXPECT_EQ(to_string(EnvelopeError::malformed), "malformed");
  EXPECT_EQ(to_string(EnvelopeError::bad_version), "bad_version");
  EXPECT_EQ(to_string(EnvelopeError::unknown_body), "unknown_body");
  EXPECT_EQ(to_string(EnvelopeError::bad_kind), "bad_kind");
  EXPECT_EQ(to_string(EnvelopeError::bad_hop_fields), "bad_hop_fields");
}

TEST(EnvelopeCodec, HopSeqTravelsWithTheMessage) {
  const core::Message m = sample(core::MessageKind::request);
  const std::string bytes = encode_envelope(m, 0xfedcba9876543210ULL);
  auto decoded = decode_hop_datagram(span_of(bytes));
  ASSERT_TRUE(decoded) << to_string(decoded.error());
  EXPECT_EQ(decoded->hop_seq, 0xfedcba9876543210ULL);
  EXPECT_EQ(decoded->hop_ack, 0u);
  ASSERT_TRUE(decoded->message);
  expect_same(*decoded->message, m);
  // Without a hop_seq the bytes are those of the plain encoder, so a node
  // with the ARQ off sends what older builds send.
  EXPECT_EQ(encode_envelope(m, 0), encode_envelope(m));
  auto plain = decode_hop_datagram(span_of(encode_envelope(m)));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->hop_seq, 0u);
  // The message decoder ignores the hop field.
  auto message = decode_envelope(span_of(bytes));
  ASSERT_TRUE(message);
  expect_same(*message, m);
}

TEST(EnvelopeCodec, HopAckAloneDecodesAsAnAck) {
  const std::string bytes = encode_hop_ack(42);
  auto decoded = decode_hop_datagram(span_of(bytes));
  ASSERT_TRUE(decoded) << to_string(decoded.error());
  EXPECT_EQ(decoded->hop_ack, 42u);
  EXPECT_FALSE(decoded->message);
  // Small: the version and the ack.
  EXPECT_LE(bytes.size(), 4u);
  // It carries no message, so the message decoder refuses it.
  auto message = decode_envelope(span_of(bytes));
  ASSERT_FALSE(message);
  EXPECT_EQ(message.error(), EnvelopeError::unknown_body);
}

TEST(EnvelopeCodec, HopAckWithAnythingElseIsRefused) {
  std::vector<std::pair<std::string, proto::Envelope>> cases;
  auto with = [&](std::string name, auto set) {
    proto::Envelope envelope;
    envelope.set_version(kEnvelopeVersion);
    envelope.set_hop_ack(7);
    set(envelope);
    cases.emplace_back(std::move(name), std::move(envelope));
  };
  with("src", [](proto::Envelope& e) { e.set_src(1); });
  with("dst", [](proto::Envelope& e) { e.set_dst(1); });
  with("ttl", [](proto::Envelope& e) { e.set_ttl(1); });
  with("kind", [](proto::Envelope& e) { e.set_kind(proto::REQUEST); });
  with("msg_id", [](proto::Envelope& e) { e.set_msg_id(1); });
  with("hops", [](proto::Envelope& e) { e.set_hops(1); });
  with("rejection_reason", [](proto::Envelope& e) { e.set_rejection_reason("x"); });
  with("hop_seq", [](proto::Envelope& e) { e.set_hop_seq(1); });
  with("body", [](proto::Envelope& e) { e.mutable_echo()->mutable_request()->set_payload("x"); });
  for (const auto& [name, envelope] : cases) {
    SCOPED_TRACE(name);
    auto decoded = decode_hop_datagram(span_of(envelope.SerializeAsString()));
    ASSERT_FALSE(decoded);
    EXPECT_EQ(decoded.error(), EnvelopeError::bad_hop_fields);
  }
  // A body of a number this build does not know is something else, too.
  std::string unknown_body = encode_hop_ack(7);
  unknown_body += std::string("\xfa\x06\x01x", 4);  // field 111, length-delimited, "x"
  auto decoded = decode_hop_datagram(span_of(unknown_body));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error(), EnvelopeError::bad_hop_fields);
}

TEST(EnvelopeCodec, FloodAskingForAHopAckIsRefused) {
  core::Message m = sample(core::MessageKind::datagram);
  m.dst = core::Ipv4Address(0xffffffffu);
  ASSERT_TRUE(decode_hop_datagram(span_of(encode_envelope(m, 0))));
  auto decoded = decode_hop_datagram(span_of(encode_envelope(m, 5)));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error(), EnvelopeError::bad_hop_fields);
}

TEST(EnvelopeCodec, HopDatagramDecoderRefusesWhatTheMessageDecoderRefuses) {
  const std::string good = encode_envelope(sample(core::MessageKind::request), 3);
  for (size_t cut = 1; cut < good.size(); ++cut) {
    auto decoded = decode_hop_datagram(span_of(good.substr(0, cut)));
    auto message = decode_envelope(span_of(good.substr(0, cut)));
    ASSERT_EQ(static_cast<bool>(decoded), static_cast<bool>(message)) << cut;
    if (!decoded) {
      EXPECT_EQ(decoded.error(), message.error()) << cut;
    }
  }
  proto::Envelope envelope;
  envelope.set_version(2);
  envelope.set_hop_ack(1);
  auto decoded = decode_hop_datagram(span_of(envelope.SerializeAsString()));
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.error(), EnvelopeError::bad_version);
}

// The fuzz seeds are hand-encoded protobuf; this pins what each one is, so
// the corpus keeps covering every outcome of the decoder.
TEST(EnvelopeCodec, FuzzSeedsDecodeAsNamed) {
  auto decode_file = [](const std::string& name) {
    std::ifstream in(std::string(ENVELOPE_CORPUS_DIR) + "/" + name, std::ios::binary);
    EXPECT_TRUE(in) << name;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return decode_envelope(span_of(bytes));
  };
  auto request = decode_file("echo_request.bin");
  ASSERT_TRUE(request);
  EXPECT_EQ(request->kind, core::MessageKind::request);
  EXPECT_EQ(request->body_type, static_cast<uint32_t>(proto::Envelope::kEchoFieldNumber));
  EXPECT_EQ(request->src, core::Ipv4Address::from_octets(10, 0, 0, 1));
  // A body number retired from the oneof (the one-hop beacon, 17) is
  // refused like any body this build does not know.
  auto retired = decode_file("retired_beacon.bin");
  ASSERT_FALSE(retired);
  EXPECT_EQ(retired.error(), EnvelopeError::unknown_body);
  auto rejection = decode_file("rejection.bin");
  ASSERT_TRUE(rejection);
  EXPECT_EQ(rejection->body, "no handler for body type 16");
  ASSERT_TRUE(decode_file("echo_reply.bin"));
  ASSERT_TRUE(decode_file("empty_echo_datagram.bin"));
  EXPECT_EQ(decode_file("unknown_body.bin").error(), EnvelopeError::unknown_body);
  EXPECT_EQ(decode_file("bad_version.bin").error(), EnvelopeError::bad_version);
  EXPECT_EQ(decode_file("bad_kind.bin").error(), EnvelopeError::bad_kind);
  EXPECT_EQ(decode_file("truncated.bin").error(), EnvelopeError::malformed);
  auto decode_hop_file = [](const std::string& name) {
    std::ifstream in(std::string(ENVELOPE_CORPUS_DIR) + "/" + name, std::ios::binary);
    EXPECT_TRUE(in) << name;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return decode_hop_datagram(span_of(bytes));
  };
  auto acked = decode_hop_file("hop_seq_request.bin");
  ASSERT_TRUE(acked);
  EXPECT_EQ(acked->hop_seq, 300u);
  ASSERT_TRUE(acked->message);
  EXPECT_EQ(acked->message->kind, core::MessageKind::request);
  auto ack = decode_hop_file("hop_ack.bin");
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->hop_ack, 300u);
  EXPECT_EQ(decode_hop_file("hop_ack_with_body.bin").error(), EnvelopeError::bad_hop_fields);
  EXPECT_EQ(decode_hop_file("flood_with_hop_seq.bin").error(), EnvelopeError::bad_hop_fields);
  // The codec writes the same bytes the seed holds.
  std::ifstream in(std::string(ENVELOPE_CORPUS_DIR) + "/echo_request.bin", std::ios::binary);
  const std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(encode_envelope(*request), seed);
}

}  // namespace
}  // namespace mesh::routing
