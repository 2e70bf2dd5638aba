// Config and loopback-topology parsers: any text is either accepted or
// refused with their error type (ConfigError, an Expected error), never a
// crash and never another exception escaping.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/config.h"
#include "agent/topology_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    // A base directory that does not exist: a key file named by the input
    // is refused as unreadable instead of reading the fuzzing host's files.
    (void)mesh::agent::parse_config(text, "fuzz.toml", "/nonexistent-meshagent-fuzz");
  } catch (const mesh::agent::ConfigError&) {
  }
  (void)mesh::agent::parse_topology_file(text, "fuzz-topology.txt");
  return 0;
}
