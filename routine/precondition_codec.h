#pragma once

#include <cstddef>
#include <string>

#include "core/expected.h"
#include "proto/routine.pb.h"
#include "routine/precondition_rule.h"

namespace mesh::routine {

// The wire form of a precondition rule in a catalog change
// (PreconditionRuleMsg): the rule as written, so every node parses the same
// text with the same grammar.
//
// Decoding takes untrusted bytes (another node's change, a copy on disk) and
// refuses what no rules file could hold: an invalid id, a condition that is
// empty, longer than kMaxConditionLength, outside printable ASCII or not a
// condition at all, and a `requires` list that is empty or longer than
// kMaxRulePreconditions. Whether the conditions fit the catalog's devices is
// not decided here: the devices change after a rule is put, so the catalog
// resolves rules against them whenever they do (resolve_rule).
proto::PreconditionRuleMsg to_proto(const PreconditionRuleSpec& spec);
core::Expected<PreconditionRuleSpec, std::string> from_proto(const proto::PreconditionRuleMsg& msg);

// A run-time rule's encoded PreconditionRuleMsg must fit in this, as a
// routine's must fit kMaxRoutineSpecBytes: one catalog entry then fits one
// page of catalog gossip (CatalogSyncOptions::max_page_bytes) with room for
// the change's own fields.
inline constexpr size_t kMaxPreconditionRuleBytes = 600;

}  // namespace mesh::routine
