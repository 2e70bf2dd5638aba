#include "kgroup/geometry.h"

#include <cmath>

namespace mesh::kgroup {

Point to_point(const Location& metres) {
  Point p;
  for (size_t i = 0; i < 3; ++i) {
    const double mm = metres[i] * 1000.0;
    if (!std::isfinite(mm)) continue;
    const double clamped =
        std::fmax(std::fmin(mm, static_cast<double>(kMaxCoordinateMm)), -static_cast<double>(kMaxCoordinateMm));
    p.mm[i] = std::llround(clamped);
  }
  return p;
}

int64_t distance2(const Point& a, const Point& b) {
  int64_t sum = 0;
  for (size_t i = 0; i < 3; ++i) {
    const int64_t d = a.mm[i] - b.mm[i];
    sum += d * d;
  }
  return sum;
}

}  // namespace mesh::kgroup
