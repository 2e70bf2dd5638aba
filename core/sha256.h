#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mesh::core {

using Sha256Digest = std::array<uint8_t, 32>;

// SHA-256 and HMAC-SHA256 through OpenSSL's EVP interface.
Sha256Digest sha256(std::span<const uint8_t> data);
Sha256Digest sha256(std::string_view data);
Sha256Digest hmac_sha256(std::span<const uint8_t> key, std::span<const uint8_t> data);

// Lower-case hex of any bytes.
std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace mesh::core
