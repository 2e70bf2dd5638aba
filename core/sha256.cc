#include "core/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace mesh::core {

Sha256Digest sha256(std::span<const uint8_t> data) {
  Sha256Digest digest{};
  unsigned int length = 0;
  // EVP_Digest only fails on allocation failure; a zero digest then fails
  // every comparison rather than crashing the agent.
  if (EVP_Digest(data.data(), data.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    digest.fill(0);
  }
  return digest;
}

Sha256Digest sha256(std::string_view data) {
  return sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

Sha256Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data) {
  Sha256Digest digest{};
  unsigned int length = 0;
  // HMAC() wants a non-null key pointer even for an empty key.
  static constexpr uint8_t kEmpty = 0;
  const uint8_t* key_data = key.empty() ? &kEmpty : key.data();
  if (HMAC(EVP_sha256(), key_data, static_cast<int>(key.size()), data.data(), data.size(), digest.data(),
           &length) == nullptr) {
    digest.fill(0);
  }
  return digest;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0x0f]);
  }
  return out;
}

}  // namespace mesh::core
