#include "mutex/camera_store.h"

#include <charconv>
#include <limits>

#include "core/log.h"
#include "core/sha256.h"

namespace mesh::mutex {
namespace {

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace

CameraStore::CameraStore(core::Storage& storage, core::Metrics& metrics, uint64_t token_block, size_t max_nodes)
    : storage_(storage),
      write_failures_(metrics.counter("mutex_storage_write_failures_total")),
      unreadable_(metrics.counter("mutex_storage_unreadable_total")),
      token_block_(std::max<uint64_t>(token_block, 1)),
      nodes_(storage, kNodesKey, max_nodes, "mutex", write_failures_, unreadable_) {}

std::string CameraStore::token_key(const std::string& resource) {
  // Resource names are free text; a hash makes any of them a valid key.
  const core::Sha256Digest digest = core::sha256(resource);
  return "mutex/token/" + core::to_hex(std::span<const uint8_t>(digest.data(), 16));
}

uint64_t CameraStore::restore_high_water(const std::string& resource, uint64_t unreadable_fallback) {
  const std::string key = token_key(resource);
  uint64_t value = 0;
  const core::StoredValue stored = storage_.read(key);
  if (stored.damaged()) {
    unreadable_.add();
    core::log("mutex").error("storage key {} (resource {}) is damaged; resuming at {}", key, resource,
                             unreadable_fallback);
    value = unreadable_fallback;
  } else if (const std::optional<std::string> text = stored.found() ? std::optional(stored.value) : std::nullopt) {
    if (auto parsed = parse_u64(*text)) {
      value = *parsed;
    } else {
      unreadable_.add();
      core::log("mutex").error("storage key {} (resource {}) holds '{}', not a token reservation; resuming at {}", key,
                               resource, *text, unreadable_fallback);
      value = unreadable_fallback;
    }
  }
  reserved_[resource] = value;
  return value;
}

void CameraStore::cover(const std::string& resource, uint64_t mark) {
  uint64_t& reserved = reserved_[resource];
  if (mark <= reserved) return;
  const uint64_t next = mark > std::numeric_limits<uint64_t>::max() - token_block_ ? mark : mark + token_block_;
  if (!storage_.put(token_key(resource), std::to_string(next))) {
    write_failures_.add();
    core::log("mutex").error("cannot persist the token reservation of resource {}; a restart may reuse tokens",
                             resource);
    return;
  }
  reserved = next;
}

}  // namespace mesh::mutex
