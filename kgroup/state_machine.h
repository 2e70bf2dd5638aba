#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mesh::kgroup {

// What a k-group replicates: any deterministic state machine. Every member
// applies the same committed updates in the same sequence order, so every
// member holds the same state. Device and routine leaders are state machines
// hosted by a group.
class StateMachine {
 public:
  virtual ~StateMachine() = default;

  // Applies the committed update number `seq` (1, 2, 3, ... with no gaps
  // except where a restore() jumped ahead).
  virtual void apply(uint64_t seq, std::string_view update) = 0;
  // The whole state, for epoch migration (chunked by the group).
  virtual std::string snapshot() const = 0;
  // Replaces the state with a snapshot() of another replica; false, leaving
  // the state unchanged, if `snapshot` is not one.
  virtual bool restore(std::string_view snapshot) = 0;
};

}  // namespace mesh::kgroup
