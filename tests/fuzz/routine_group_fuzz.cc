// Routine group state (routine/routine_group_state.h): any bytes, as a
// snapshot or as an update (the first byte chooses), are refused or change
// the state, never crash; whatever state results restores from its own
// snapshot to that very snapshot (ad hoc combos' commands included,
// routine/adhoc_combo.h).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "routine/routine_group_state.h"
#include "tests/fuzz/quiet_protobuf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mesh::fuzz::quiet_protobuf_log();

  using namespace mesh;
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  routine::RoutineGroupState state;
  if (data[0] % 2 == 0) {
    if (!state.restore(bytes)) return 0;
  } else {
    state.apply(1, kgroup::ClientStateMachine::encode_write(1, bytes));
  }
  const std::string snapshot = state.snapshot();
  routine::RoutineGroupState again;
  if (!again.restore(snapshot) || again.snapshot() != snapshot) std::abort();
  return 0;
}
