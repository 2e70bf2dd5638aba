#include "routine/fault_points.h"

namespace mesh::routine {

FaultPoints& fault_points() {
  static FaultPoints points;
  return points;
}

}  // namespace mesh::routine
