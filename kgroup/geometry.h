#pragma once

#include <array>
#include <cstdint>

namespace mesh::kgroup {

// A location as membership reports it: metres, three dimensions.
using Location = std::array<double, 3>;

// A location in whole millimetres. Selection and clustering do all their
// arithmetic on these integers, never on doubles, so every node computes
// bit-identical groups whatever its compiler, standard library or FPU
// (fused multiply-add, x87 excess precision) would do to floating point.
struct Point {
  std::array<int64_t, 3> mm{};
  friend bool operator==(const Point&, const Point&) = default;
};

// Coordinates are clamped to +-kMaxCoordinateMm (500 km) so squared
// distances and LSH projections cannot overflow; non-finite values become 0.
inline constexpr int64_t kMaxCoordinateMm = 500'000'000;

Point to_point(const Location& metres);
// Squared Euclidean distance in mm^2 (fits in int64 after clamping).
int64_t distance2(const Point& a, const Point& b);

}  // namespace mesh::kgroup
