#include "routing/agent_presence.h"

#include <gtest/gtest.h>

#include <vector>

namespace mesh::routing {
namespace {

const std::vector<uint8_t> kKey(32, 0x5a);
const std::vector<uint8_t> kOtherKey(32, 0x5b);
const core::NodeId kAgent = core::NodeId::from_octets(10, 0, 0, 7);

TEST(AgentPresenceTest, RoundTripsAndKeepsOlsrAlignment) {
  const auto body = encode_agent_presence(kKey, kAgent, AgentPresence{0x0102030405060708ULL});
  ASSERT_EQ(body.size(), kAgentPresenceSize);
  EXPECT_EQ(body.size() % 4, 0u);
  const auto decoded = decode_agent_presence(kKey, kAgent, body);
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->counter, 0x0102030405060708ULL);
}

TEST(AgentPresenceTest, RefusesAnotherKeyOrOriginatorAndAnyChangedByte) {
  const auto body = encode_agent_presence(kKey, kAgent, AgentPresence{9});
  EXPECT_EQ(decode_agent_presence(kOtherKey, kAgent, body).error(), PresenceError::bad_tag);
  // Replayed under another originator's OLSR header.
  EXPECT_EQ(decode_agent_presence(kKey, core::NodeId::from_octets(10, 0, 0, 8), body).error(),
            PresenceError::bad_tag);
  for (size_t i = 3; i < body.size(); ++i) {
    auto changed = body;
    changed[i] ^= 0x10;
    EXPECT_EQ(decode_agent_presence(kKey, kAgent, changed).error(), PresenceError::bad_tag) << "byte " << i;
  }
}

TEST(AgentPresenceTest, RefusesWrongSizeMagicAndVersion) {
  auto body = encode_agent_presence(kKey, kAgent, AgentPresence{1});
  auto shorter = body;
  shorter.pop_back();
  EXPECT_EQ(decode_agent_presence(kKey, kAgent, shorter).error(), PresenceError::bad_size);
  EXPECT_EQ(decode_agent_presence(kKey, kAgent, {}).error(), PresenceError::bad_size);
  auto longer = body;
  longer.push_back(0);
  EXPECT_EQ(decode_agent_presence(kKey, kAgent, longer).error(), PresenceError::bad_size);
  auto magic = body;
  magic[1] = 'b';
  EXPECT_EQ(decode_agent_presence(kKey, kAgent, magic).error(), PresenceError::bad_magic);
  auto version = body;
  version[2] = kAgentPresenceVersion + 1;
  EXPECT_EQ(decode_agent_presence(kKey, kAgent, version).error(), PresenceError::bad_version);
}

}  // namespace
}  // namespace mesh::routing
