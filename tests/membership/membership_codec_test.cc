// The membership codec round-trips records and rejects malformed bodies with
// an error, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "membership/membership_codec.h"

namespace mesh::membership {
namespace {

MemberRecord alive_record() {
  MemberRecord r;
  r.member.id = core::NodeId::from_octets(10, 0, 0, 7);
  r.member.name = "kitchen";
  r.member.incarnation = 12;
  r.member.location = {1.5, -2.0, 3.25};
  r.member.metadata = {{"role", "smart"}, {"devices", "lamp:ok"}};
  r.has_info = true;
  return r;
}

std::string body_with(const proto::MemberRecord& record) {
  proto::MembershipBody body;
  body.mutable_ping()->set_seq(1);
  body.mutable_ping()->set_target(5);
  *body.mutable_ping()->add_updates() = record;
  return body.SerializeAsString();
}

TEST(MembershipCodec, RoundTrip) {
  const MemberRecord r = alive_record();
  proto::MemberRecord wire;
  to_wire(r, &wire);
  auto back = from_wire(wire, CodecLimits{});
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, r);
  EXPECT_EQ(wire_size(r), wire.ByteSizeLong() + 2);

  MemberRecord suspect;
  suspect.member.id = r.member.id;
  suspect.member.state = MemberState::suspect;
  suspect.member.incarnation = 3;
  suspect.accuser = core::NodeId::from_octets(10, 0, 0, 9);
  to_wire(suspect, &wire);
  back = from_wire(wire, CodecLimits{});
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, suspect);
}

TEST(MembershipCodec, RejectsBadRecords) {
  const CodecLimits limits;
  proto::MemberRecord good;
  to_wire(alive_record(), &good);
  ASSERT_TRUE(decode_body(body_with(good), limits));

  auto rejects = [&](const proto::MemberRecord& bad, const char* why) {
    EXPECT_FALSE(decode_body(body_with(bad), limits)) << why;
  };
  proto::MemberRecord r = good;
  r.set_id(0);
  rejects(r, "no id");
  r = good;
  r.set_state(proto::MEMBER_STATE_UNSPECIFIED);
  rejects(r, "no state");
  r = good;
  r.set_state(static_cast<proto::MemberStateWire>(42));
  rejects(r, "unknown state");
  r = good;
  r.clear_info();
  rejects(r, "alive without info");
  r = good;
  r.mutable_info()->set_name(std::string(limits.max_name_bytes + 1, 'n'));
  rejects(r, "long name");
  r = good;
  r.mutable_info()->set_x(std::numeric_limits<double>::quiet_NaN());
  rejects(r, "NaN location");
  r = good;
  *r.mutable_info()->add_metadata() = r.info().metadata(0);
  rejects(r, "duplicate key");
  r = good;
  r.mutable_info()->add_metadata()->set_value("v");
  rejects(r, "empty key");
  r = good;
  r.mutable_info()->mutable_metadata(0)->set_value(std::string(limits.max_metadata_bytes, 'v'));
  rejects(r, "metadata too large");
}

TEST(MembershipCodec, RejectsBadBodies) {
  const CodecLimits limits;
  EXPECT_FALSE(decode_body("", limits)) << "no kind";
  EXPECT_FALSE(decode_body("\xff\xff\xff", limits)) << "garbage";
  proto::MembershipBody body;
  body.mutable_ping()->set_seq(1);
  EXPECT_FALSE(decode_body(body.SerializeAsString(), limits)) << "ping without target";
  body.Clear();
  body.mutable_sync_request()->set_after(0);
  EXPECT_FALSE(decode_body(body.SerializeAsString(), limits)) << "sync without sender";
  body.Clear();
  proto::MemberRecord suspect;
  suspect.set_id(3);
  suspect.set_state(proto::MEMBER_SUSPECT);
  *body.mutable_sync_response()->add_members() = suspect;
  EXPECT_FALSE(decode_body(body.SerializeAsString(), limits)) << "sync record without info";
  body.Clear();
  proto::MemberRecord good;
  to_wire(alive_record(), &good);
  for (size_t i = 0; i <= limits.max_records; ++i) *body.mutable_gossip()->add_updates() = good;
  EXPECT_FALSE(decode_body(body.SerializeAsString(), limits)) << "too many records";
}

// A digest-based sync request: bounded by max_digest_buckets, which keeps the
// request within a datagram.
TEST(MembershipCodec, SyncRequestDigestIsBounded) {
  const CodecLimits limits;
  proto::MembershipBody body;
  to_wire(alive_record(), body.mutable_sync_request()->mutable_sender());
  for (size_t i = 0; i < limits.max_digest_buckets; ++i) body.mutable_sync_request()->add_bucket_digests(0x9e3779b9u);
  const std::string at_limit = body.SerializeAsString();
  auto decoded = decode_body(at_limit, limits);
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(static_cast<size_t>(decoded->sync_request().bucket_digests_size()), limits.max_digest_buckets);
  EXPECT_LT(at_limit.size(), 1200u);
  body.mutable_sync_request()->add_bucket_digests(1);
  EXPECT_FALSE(decode_body(body.SerializeAsString(), limits)) << "too many digest buckets";
}

TEST(MembershipCodec, RandomBytesNeverCrash) {
  core::Rng rng(7);
  proto::MemberRecord good;
  to_wire(alive_record(), &good);
  const std::string valid = body_with(good);
  size_t accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = valid;
    // Flip, truncate or append random bytes.
    const uint64_t mode = rng.below(3);
    if (mode == 0) {
      for (int k = 0; k < 3; ++k) bytes[rng.below(bytes.size())] = static_cast<char>(rng.below(256));
    } else if (mode == 1) {
      bytes.resize(rng.below(bytes.size()));
    } else {
      for (uint64_t k = rng.below(16); k > 0; --k) bytes.push_back(static_cast<char>(rng.below(256)));
    }
    auto decoded = decode_body(bytes, CodecLimits{});
    if (decoded) {
      ++accepted;
      // Whatever is accepted is well-formed.
      EXPECT_NE(decoded->kind_case(), proto::MembershipBody::KIND_NOT_SET);
    }
  }
  EXPECT_LT(accepted, 20000u);
}

}  // namespace
}  // namespace mesh::membership
