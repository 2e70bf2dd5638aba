#pragma once

#include <cstdint>

namespace mesh::core {

// xoshiro256** seeded through splitmix64. We use our own generator and our own
// distributions, never <random>'s, so a (scenario, seed) pair replays the same
// on every standard library and compiler.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t next_u64();
  // Uniform in [0, bound); bound > 0. Unbiased (rejection sampling).
  uint64_t below(uint64_t bound);
  // Uniform in [lo, hi], lo <= hi.
  int64_t between(int64_t lo, int64_t hi);
  // Uniform in [0, 1).
  double unit();
  // True with probability p (p <= 0 never, p >= 1 always).
  bool chance(double p);

  // A generator for a sub-component whose stream must not shift when another
  // component draws more or fewer numbers.
  Rng fork(uint64_t salt);

  // So Rng can drive std::shuffle.
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~uint64_t{0}; }
  result_type operator()() { return next_u64(); }

 private:
  uint64_t s_[4];
};

}  // namespace mesh::core
