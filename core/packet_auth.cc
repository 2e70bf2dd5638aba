#include "core/packet_auth.h"

#include <openssl/crypto.h>

#include <algorithm>

#include "core/sha256.h"

namespace mesh::core {
namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kBitsPerWord = 64;
constexpr std::string_view kKeyHint = "create a key with `openssl rand -hex 32`";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

void put_be(std::vector<uint8_t>& out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

uint64_t get_be(ByteSpan in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | in[offset + static_cast<size_t>(i)];
  return value;
}

bool test_bit(const std::vector<uint64_t>& bits, uint64_t i) {
  return (bits[i / kBitsPerWord] >> (i % kBitsPerWord)) & 1u;
}

void set_bit(std::vector<uint64_t>& bits, uint64_t i) { bits[i / kBitsPerWord] |= uint64_t{1} << (i % kBitsPerWord); }

// Moves every bit from index i to i + n, dropping what falls off the top:
// the window slides up when a higher counter arrives.
void shift_up(std::vector<uint64_t>& bits, uint64_t n) {
  const size_t words = bits.size();
  if (n >= words * kBitsPerWord) {
    std::fill(bits.begin(), bits.end(), 0);
    return;
  }
  const size_t word_shift = static_cast<size_t>(n / kBitsPerWord);
  const unsigned bit_shift = static_cast<unsigned>(n % kBitsPerWord);
  for (size_t i = words; i-- > 0;) {
    uint64_t value = 0;
    if (i >= word_shift) {
      const size_t src = i - word_shift;
      value = bits[src] << bit_shift;
      if (bit_shift != 0 && src > 0) value |= bits[src - 1] >> (kBitsPerWord - bit_shift);
    }
    bits[i] = value;
  }
}

}  // namespace

Expected<MeshKey, std::string> MeshKey::from_hex(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.size() != 2 * kKeyBytes) {
    return Unexpected{std::string("expected 64 hex digits (32 bytes), got ") + std::to_string(text.size()) + "; " +
                      std::string(kKeyHint)};
  }
  MeshKey key;
  key.bytes_.reserve(kKeyBytes);
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = hex_value(text[i]);
    const int lo = hex_value(text[i + 1]);
    if (hi < 0 || lo < 0) {
      const size_t bad = hi < 0 ? i : i + 1;
      return Unexpected{std::string("invalid character '") + text[bad] + "' at position " + std::to_string(bad) +
                        "; expected 64 hex digits (0-9, a-f), " + std::string(kKeyHint)};
    }
    key.bytes_.push_back(static_cast<uint8_t>((hi << 4) | lo));
  }
  return key;
}

std::string_view to_string(AuthError error) {
  switch (error) {
    case AuthError::truncated:
      return "truncated";
    case AuthError::bad_version:
      return "bad_version";
    case AuthError::bad_tag:
      return "bad_tag";
    case AuthError::replay:
      return "replay";
    case AuthError::too_old:
      return "too_old";
  }
  return "unknown";
}

PacketAuth::PacketAuth(const MeshKey& key, NodeId self, uint64_t first_counter, unsigned replay_window)
    : key_(key.bytes()),
      self_(self),
      next_counter_(first_counter),
      // A window of zero would refuse every reordered datagram and is never
      // what a configuration means; one slot still lets `highest` through once.
      replay_window_(std::max(replay_window, 1u)) {}

void PacketAuth::also_accept(const MeshKey& key) { accepted_key_ = key.bytes(); }

std::vector<uint8_t> PacketAuth::seal(ByteSpan payload) {
  std::vector<uint8_t> out;
  out.reserve(kOverhead + payload.size());
  out.push_back(kVersion);
  put_be(out, self_.value(), 4);
  put_be(out, next_counter_++, 8);
  out.insert(out.end(), payload.begin(), payload.end());
  const Sha256Digest tag = hmac_sha256(key_, out);
  out.insert(out.end(), tag.begin(), tag.begin() + kTagSize);
  return out;
}

Expected<PacketAuth::Opened, AuthError> PacketAuth::open(ByteSpan datagram) {
  if (datagram.size() < kOverhead) return Unexpected{AuthError::truncated};
  if (datagram[0] != kVersion) return Unexpected{AuthError::bad_version};

  const size_t body_size = datagram.size() - kTagSize;
  const auto sealed_with = [&](const std::vector<uint8_t>& key) {
    const Sha256Digest tag = hmac_sha256(key, datagram.first(body_size));
    return CRYPTO_memcmp(tag.data(), datagram.data() + body_size, kTagSize) == 0;
  };
  Key key = Key::sealing;
  if (!sealed_with(key_)) {
    if (!accepted_key_ || !sealed_with(*accepted_key_)) return Unexpected{AuthError::bad_tag};
    key = Key::accepted;
  }

  const NodeId sender(static_cast<uint32_t>(get_be(datagram, 1, 4)));
  const uint64_t counter = get_be(datagram, 5, 8);
  Opened opened{sender, counter, datagram.subspan(kHeaderSize, body_size - kHeaderSize), key};

  auto it = windows_.find(sender);
  if (it == windows_.end()) {
    Window window;
    window.highest = counter;
    window.seen.assign((replay_window_ + kBitsPerWord - 1) / kBitsPerWord, 0);
    set_bit(window.seen, 0);
    windows_.emplace(sender, std::move(window));
    return opened;
  }
  Window& window = it->second;
  if (counter > window.highest) {
    shift_up(window.seen, counter - window.highest);
    window.highest = counter;
    set_bit(window.seen, 0);
    return opened;
  }
  const uint64_t age = window.highest - counter;
  if (age >= replay_window_) return Unexpected{AuthError::too_old};
  if (test_bit(window.seen, age)) return Unexpected{AuthError::replay};
  set_bit(window.seen, age);
  return opened;
}

}  // namespace mesh::core
