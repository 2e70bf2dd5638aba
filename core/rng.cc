#include "core/rng.h"

namespace mesh::core {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::below(uint64_t bound) {
  if (bound == 0) return 0;
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % bound);
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % bound;
}

int64_t Rng::between(int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == ~uint64_t{0}) return static_cast<int64_t>(next_u64());
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + below(span + 1));
}

double Rng::unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

bool Rng::chance(double p) {
  if (p <= 0.0) return false;
  if (p >= 1.0) return true;
  return unit() < p;
}

Rng Rng::fork(uint64_t salt) { return Rng(next_u64() ^ (salt * 0x9e3779b97f4a7c15ULL)); }

}  // namespace mesh::core
