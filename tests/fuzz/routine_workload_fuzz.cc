// SafeHome workload files (sim/routine_workload.h): any text is either
// accepted or refused with a WorkloadError, never a crash and never another
// exception escaping; an accepted generator or factory section also generates.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "sim/routine_workload.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const mesh::sim::WorkloadFile file = mesh::sim::parse_workload(text, "fuzz.toml");
    (void)mesh::sim::instantiate(file, 1);
  } catch (const mesh::sim::WorkloadError&) {
  }
  return 0;
}
