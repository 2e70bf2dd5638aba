#pragma once

#include <cstdint>
#include <string_view>

namespace mesh::core {

// FNV-1a, 64 bits: a digest stable across builds, machines and restarts,
// which std::hash is not; for digests committed to replicated state. Not
// for anything an adversary chooses the input of.
inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (const char c : bytes) {
    hash ^= static_cast<uint8_t>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace mesh::core
