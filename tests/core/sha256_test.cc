#include "core/sha256.h"

#include <gtest/gtest.h>

#include <vector>

namespace mesh::core {
namespace {

std::vector<uint8_t> bytes_of(std::string_view text) { return {text.begin(), text.end()}; }

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, EmptyInput) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256(std::span<const uint8_t>())),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, SpanAndStringOverloadsAgree) {
  const auto data = bytes_of("abc");
  EXPECT_EQ(sha256(data), sha256("abc"));
}

TEST(HmacSha256, Rfc4231Case1) {
  const std::vector<uint8_t> key(20, 0x0b);
  EXPECT_EQ(to_hex(hmac_sha256(key, bytes_of("Hi There"))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST(HmacSha256, Rfc4231Case2) {
  EXPECT_EQ(to_hex(hmac_sha256(bytes_of("Jefe"), bytes_of("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

TEST(HmacSha256, Rfc4231Case6KeyLongerThanBlock) {
  const std::vector<uint8_t> key(131, 0xaa);
  EXPECT_EQ(to_hex(hmac_sha256(key, bytes_of("Test Using Larger Than Block-Size Key - Hash Key First"))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(ToHex, LowerCaseTwoDigitsPerByte) {
  const std::vector<uint8_t> data{0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(to_hex(data), "000fa0ff");
  EXPECT_EQ(to_hex(std::span<const uint8_t>()), "");
}

}  // namespace
}  // namespace mesh::core
