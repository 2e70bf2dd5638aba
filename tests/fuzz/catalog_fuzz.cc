// Catalog parser (agent/catalog_file.h), fed by the agent's config and by
// meshctl device add: any text is accepted or refused with an error, never a
// crash or an exception escaping.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "agent/catalog_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)mesh::agent::parse_catalog(text, "fuzz-catalog.toml");
  return 0;
}
