#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::core {

// Durable key/value state of one node. put() returns only once the value
// would survive a power cut (the agent's file storage fsyncs and renames
// atomically; the simulator's memory storage survives simulated crashes).
// Keys are short path-like names ("auth/boot", "kgroup/<target>/log").
class Storage {
 public:
  virtual ~Storage() = default;

  virtual std::optional<std::string> get(std::string_view key) const = 0;
  // False on an I/O error (logged by the implementation); the caller must not
  // act as if the value were durable.
  virtual bool put(std::string_view key, std::string_view value) = 0;
  virtual bool remove(std::string_view key) = 0;
  // Keys starting with `prefix`, sorted.
  virtual std::vector<std::string> keys(std::string_view prefix) const = 0;
};

}  // namespace mesh::core
