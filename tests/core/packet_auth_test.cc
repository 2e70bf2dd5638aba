#include "core/packet_auth.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace mesh::core {
namespace {

const NodeId kAlice = NodeId::from_octets(10, 0, 0, 1);
const NodeId kBob = NodeId::from_octets(10, 0, 0, 2);

MeshKey key_from(std::string_view hex) {
  auto key = MeshKey::from_hex(hex);
  EXPECT_TRUE(key) << (key ? "" : key.error());
  return *key;
}

MeshKey test_key() { return key_from("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"); }

std::vector<uint8_t> bytes_of(std::string_view text) { return {text.begin(), text.end()}; }

TEST(MeshKey, ParsesHexIgnoringSurroundingWhitespace) {
  const std::string hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
  for (const std::string& text : {hex, hex + "\n", "  " + hex + " \r\n", "\t" + hex}) {
    auto key = MeshKey::from_hex(text);
    ASSERT_TRUE(key) << key.error();
    ASSERT_EQ(key->bytes().size(), 32u);
    EXPECT_EQ(key->bytes()[0], 0x00);
    EXPECT_EQ(key->bytes()[1], 0x11);
    EXPECT_EQ(key->bytes()[15], 0xff);
    EXPECT_EQ(key->bytes()[31], 0xff);
  }
}

TEST(MeshKey, RejectsWrongLengthWithHowToFix) {
  const std::string hex(64, 'a');
  for (const std::string& text : {std::string(), hex.substr(1), hex + "a", hex + hex, std::string("   ")}) {
    auto key = MeshKey::from_hex(text);
    ASSERT_FALSE(key) << text;
    EXPECT_NE(key.error().find("expected 64 hex digits (32 bytes)"), std::string::npos) << key.error();
    EXPECT_NE(key.error().find("openssl rand -hex 32"), std::string::npos) << key.error();
  }
  EXPECT_NE(MeshKey::from_hex(hex.substr(1)).error().find("got 63"), std::string::npos);
}

TEST(MeshKey, RejectsNonHexDigits) {
  std::string hex(64, 'a');
  hex[10] = 'g';
  auto key = MeshKey::from_hex(hex);
  ASSERT_FALSE(key);
  EXPECT_NE(key.error().find("position 10"), std::string::npos) << key.error();
  EXPECT_NE(key.error().find("openssl rand -hex 32"), std::string::npos) << key.error();

  std::string inner_space(64, 'b');
  inner_space[32] = ' ';
  EXPECT_FALSE(MeshKey::from_hex(inner_space));
  EXPECT_FALSE(MeshKey::from_hex("0x" + std::string(62, 'c')));
}

TEST(AuthError, Names) {
  EXPECT_EQ(to_string(AuthError::truncated), "truncated");
  EXPECT_EQ(to_string(AuthError::bad_version), "bad_version");
  EXPECT_EQ(to_string(AuthError::bad_tag), "bad_tag");
  EXPECT_EQ(to_string(AuthError::replay), "replay");
  EXPECT_EQ(to_string(AuthError::too_old), "too_old");
}

TEST(PacketAuth, RoundTripAndLayout) {
  PacketAuth alice(test_key(), kAlice, 0x0102030405060708ull);
  PacketAuth bob(test_key(), kBob, 1);
  const auto payload = bytes_of("hello mesh");
  const auto sealed = alice.seal(payload);
  ASSERT_EQ(sealed.size(), payload.size() + PacketAuth::kOverhead);
  EXPECT_EQ(sealed[0], PacketAuth::kVersion);
  EXPECT_EQ((std::vector<uint8_t>(sealed.begin() + 1, sealed.begin() + 5)), (std::vector<uint8_t>{10, 0, 0, 1}));
  EXPECT_EQ((std::vector<uint8_t>(sealed.begin() + 5, sealed.begin() + 13)),
            (std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(alice.next_counter(), 0x0102030405060709ull);

  auto opened = bob.open(sealed);
  ASSERT_TRUE(opened);
  EXPECT_EQ(opened->sender, kAlice);
  EXPECT_EQ(opened->counter, 0x0102030405060708ull);
  EXPECT_EQ(std::vector<uint8_t>(opened->payload.begin(), opened->payload.end()), payload);
  EXPECT_EQ(opened->payload.data(), sealed.data() + PacketAuth::kHeaderSize);
}

TEST(PacketAuth, EmptyPayloadRoundTrips) {
  PacketAuth alice(test_key(), kAlice, 1);
  PacketAuth bob(test_key(), kBob, 1);
  const auto sealed = alice.seal({});
  ASSERT_EQ(sealed.size(), PacketAuth::kOverhead);
  auto opened = bob.open(sealed);
  ASSERT_TRUE(opened);
  EXPECT_TRUE(opened->payload.empty());
}

TEST(PacketAuth, EveryFlippedBitIsRefused) {
  PacketAuth alice(test_key(), kAlice, 1);
  PacketAuth bob(test_key(), kBob, 1);
  const auto sealed = alice.seal(bytes_of("turn on the lights"));
  for (size_t i = 0; i < sealed.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto tampered = sealed;
      tampered[i] ^= static_cast<uint8_t>(1u << bit);
      auto opened = bob.open(tampered);
      ASSERT_FALSE(opened) << "byte=" << i << " bit=" << bit;
      const AuthError error = opened.error();
      EXPECT_TRUE(error == AuthError::bad_tag || error == AuthError::bad_version || error == AuthError::truncated)
          << "byte=" << i << " bit=" << bit << " error=" << to_string(error);
      if (i == 0) {
        EXPECT_EQ(error, AuthError::bad_version);
      }
    }
  }
  // Nothing refused was recorded: the genuine datagram still opens once.
  EXPECT_TRUE(bob.open(sealed));
}

TEST(PacketAuth, WrongKeyRefused) {
  PacketAuth alice(test_key(), kAlice, 1);
  PacketAuth mallory_receiver(key_from(std::string(64, 'e')), kBob, 1);
  auto opened = mallory_receiver.open(alice.seal(bytes_of("x")));
  ASSERT_FALSE(opened);
  EXPECT_EQ(opened.error(), AuthError::bad_tag);
}

MeshKey new_key() { return key_from(std::string(64, 'b')); }

TEST(PacketAuth, AnAcceptedKeyOpensButNeverSeals) {
  PacketAuth alice_old(test_key(), kAlice, 1);
  PacketAuth carol_new(new_key(), NodeId::from_octets(10, 0, 0, 3), 1);
  PacketAuth bob(test_key(), kBob, 1);
  EXPECT_EQ(bob.open(carol_new.seal(bytes_of("n"))).error(), AuthError::bad_tag);

  bob.also_accept(new_key());
  auto with_new = bob.open(carol_new.seal(bytes_of("n")));
  ASSERT_TRUE(with_new);
  EXPECT_EQ(with_new->key, PacketAuth::Key::accepted);
  auto with_old = bob.open(alice_old.seal(bytes_of("o")));
  ASSERT_TRUE(with_old);
  EXPECT_EQ(with_old->key, PacketAuth::Key::sealing);

  // Bob still seals with his own key: a node that has only the new key
  // cannot read him yet (the first pass of a rotation is for that).
  PacketAuth dave_new_only(new_key(), NodeId::from_octets(10, 0, 0, 4), 1);
  EXPECT_EQ(dave_new_only.open(bob.seal(bytes_of("b"))).error(), AuthError::bad_tag);
  PacketAuth erin_old(test_key(), NodeId::from_octets(10, 0, 0, 5), 1);
  EXPECT_TRUE(erin_old.open(bob.seal(bytes_of("b"))));
}

TEST(PacketAuth, ThirdKeyRefusedWhileRotating) {
  PacketAuth bob(test_key(), kBob, 1);
  bob.also_accept(new_key());
  PacketAuth mallory(key_from(std::string(64, 'e')), kAlice, 1);
  EXPECT_EQ(bob.open(mallory.seal(bytes_of("x"))).error(), AuthError::bad_tag);
}

TEST(PacketAuth, ReplayUnderEitherKeyIsOneWindow) {
  // A sender mid-rotation switches keys on restart; its counters keep growing,
  // so its window carries over from one key to the other.
  PacketAuth alice_old(test_key(), kAlice, 1);
  PacketAuth bob(test_key(), kBob, 1);
  bob.also_accept(new_key());
  const auto old_sealed = alice_old.seal(bytes_of("a"));
  EXPECT_TRUE(bob.open(old_sealed));
  PacketAuth alice_new(new_key(), kAlice, 1000);  // restarted with the new key, a higher counter
  const auto new_sealed = alice_new.seal(bytes_of("b"));
  EXPECT_TRUE(bob.open(new_sealed));
  EXPECT_EQ(bob.open(new_sealed).error(), AuthError::replay);
  EXPECT_EQ(bob.open(old_sealed).error(), AuthError::too_old);
}

TEST(PacketAuth, ReplayRefused) {
  PacketAuth alice(test_key(), kAlice, 1);
  PacketAuth bob(test_key(), kBob, 1);
  const auto first = alice.seal(bytes_of("a"));
  const auto second = alice.seal(bytes_of("b"));
  EXPECT_TRUE(bob.open(first));
  auto again = bob.open(first);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error(), AuthError::replay);
  EXPECT_TRUE(bob.open(second));
  EXPECT_EQ(bob.open(second).error(), AuthError::replay);
  EXPECT_EQ(bob.open(first).error(), AuthError::replay);
}

TEST(PacketAuth, ReorderingWithinWindowAccepted) {
  PacketAuth alice(test_key(), kAlice, 1);
  PacketAuth bob(test_key(), kBob, 1, 64);
  std::vector<std::vector<uint8_t>> sealed;
  for (int i = 0; i < 64; ++i) sealed.push_back(alice.seal(bytes_of("m")));
  EXPECT_TRUE(bob.open(sealed.back()));
  for (size_t i = sealed.size() - 1; i-- > 0;) EXPECT_TRUE(bob.open(sealed[i])) << i;
  for (const auto& datagram : sealed) EXPECT_EQ(bob.open(datagram).error(), AuthError::replay);
}

TEST(PacketAuth, BelowWindowIsTooOld) {
  PacketAuth alice(test_key(), kAlice, 1);
  PacketAuth bob(test_key(), kBob, 1, 64);
  std::vector<std::vector<uint8_t>> sealed;  // counters 1..101
  for (int i = 0; i < 101; ++i) sealed.push_back(alice.seal(bytes_of("m")));
  EXPECT_TRUE(bob.open(sealed[100]));  // counter 101; window covers 38..101
  auto old = bob.open(sealed[36]);     // counter 37
  ASSERT_FALSE(old);
  EXPECT_EQ(old.error(), AuthError::too_old);
  EXPECT_TRUE(bob.open(sealed[37]));  // counter 38, the oldest in the window
  EXPECT_EQ(bob.open(sealed[0]).error(), AuthError::too_old);
}

TEST(PacketAuth, SendersHaveSeparateWindows) {
  PacketAuth alice(test_key(), kAlice, 5);
  PacketAuth carol(test_key(), NodeId::from_octets(10, 0, 0, 3), 5);
  PacketAuth bob(test_key(), kBob, 1);
  EXPECT_TRUE(bob.open(alice.seal(bytes_of("a"))));
  EXPECT_TRUE(bob.open(carol.seal(bytes_of("c"))));
}

TEST(PacketAuth, TruncatedAndEmpty) {
  PacketAuth alice(test_key(), kAlice, 1);
  PacketAuth bob(test_key(), kBob, 1);
  EXPECT_EQ(bob.open({}).error(), AuthError::truncated);
  const auto sealed = alice.seal({});
  for (size_t n = 0; n < sealed.size(); ++n) {
    EXPECT_EQ(bob.open(ByteSpan(sealed).first(n)).error(), AuthError::truncated) << n;
  }
  const auto longer = alice.seal(bytes_of("payload"));
  EXPECT_EQ(bob.open(ByteSpan(longer).first(longer.size() - 1)).error(), AuthError::bad_tag);
}

// The window against a plain model (a set of every counter seen) on random
// delivery orders with duplicates, including jumps past the whole window.
TEST(PacketAuth, WindowMatchesModel) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed=" + std::to_string(seed));
    std::mt19937_64 gen(seed);
    const unsigned window = seed % 2 ? 64 : 200;  // one word, and several with a ragged end
    PacketAuth alice(test_key(), kAlice, 0);
    PacketAuth bob(test_key(), kBob, 1, window);
    std::vector<std::vector<uint8_t>> sealed;
    for (int i = 0; i < 2000; ++i) sealed.push_back(alice.seal({}));

    std::set<uint64_t> seen;
    uint64_t highest = 0;
    size_t frontier = 0;
    for (int step = 0; step < 4000; ++step) {
      const uint64_t roll = gen() % 100;
      if (roll < 10 && frontier + 300 < sealed.size()) frontier += 250 + gen() % 50;  // long gap
      if (roll < 60 && frontier + 1 < sealed.size()) ++frontier;
      const uint64_t back = gen() % (window + 20);
      const uint64_t counter = frontier > back ? frontier - back : 0;

      AuthError expected_error = AuthError::truncated;
      bool expect_ok = false;
      if (seen.empty() || counter > highest) {
        expect_ok = true;
      } else if (highest - counter >= window) {
        expected_error = AuthError::too_old;
      } else if (seen.count(counter)) {
        expected_error = AuthError::replay;
      } else {
        expect_ok = true;
      }
      auto opened = bob.open(sealed[counter]);
      ASSERT_EQ(opened.has_value(), expect_ok) << "step=" << step << " counter=" << counter << " highest=" << highest;
      if (expect_ok) {
        EXPECT_EQ(opened->counter, counter);
        highest = seen.empty() ? counter : std::max(highest, counter);
        seen.insert(counter);
      } else {
        ASSERT_EQ(opened.error(), expected_error) << "step=" << step << " counter=" << counter;
      }
    }
  }
}

}  // namespace
}  // namespace mesh::core
