#pragma once

#include <cstdint>
#include <optional>
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
  // Why an epoch migration would cost something now, if it would: the
  // successor's leader may be another node, and some state may be usable
  // only at the node that leads now (a routine's Camera grant). The leader
  // then puts the migration off, up to ReplicaOptions::
  // migration_postpone_max past the epoch's end. Re-selection after
  // failures is never put off. Asked of the leader only.
  virtual std::optional<std::string> migration_unwelcome() const { return std::nullopt; }
};

}  // namespace mesh::kgroup
