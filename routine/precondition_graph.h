#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/expected.h"
#include "routine/precondition_rule.h"

namespace mesh::routine {

// A precondition execution graph (PEG, apex.md §6.1): what must hold, and in
// which order, before a subject command may run.
//
// What build_graph does. It follows Algorithm 1 of §6.1: start from the
// subject condition (the condition the command makes true, vertex 0), and
// for each condition taken from a FIFO queue, find the rules relevant to it
// (§5.2 step 2: `when` on the same variable and sharing a value with the
// condition's current predicate) and, for each of their requirements, in the
// rules' order:
//   1. its variable has no vertex yet: add one, with an edge requirement ->
//      condition, and queue it;
//   2. its variable has a vertex whose predicate shares values with it:
//      narrow that vertex to the intersection and add the edge;
//   3. they share no value: fail, naming the rule and the rules (or the
//      subject command) that shaped the vertex.
// So each variable appears once: a combo writes a variable at most once.
// Where Algorithm 1 is silent, this also fails on a cycle (an edge that
// would make a vertex its own transitive precondition: no order can run
// such a combo), naming each step of the cycle and the rule behind it.
//
// Why it terminates, and its size. A vertex is queued once, when it is
// created, and each vertex is one variable named by the subject or some
// rule's `requires`, so there are at most 1 + (distinct variables in all
// requirements) vertices. A rule is relevant only to the vertex of its
// `when` variable, which is expanded once, so each rule is applied at most
// once and there are at most as many edges as requirements in all rules;
// each edge costs one reachability check, O(V + E). The graph's size is thus
// bounded by the rule set, itself bounded by kMaxPreconditionRules and
// kMaxRulePreconditions when it comes from a file.
//
// Why merging is sound. Merging two conditions on one variable into their
// intersection is exactly the AND of §2: a value satisfies the merged
// predicate iff it satisfies both, so a command chosen inside it (§6.2)
// makes both rules' requirements true. Relevance is decided when a vertex is
// expanded; a later merge only narrows the vertex, and a narrower predicate
// makes no new rule relevant (a `when` that meets the narrower set met the
// wider one), so no rule that could apply to the value finally chosen is
// missed. The price is that a rule relevant only to values a later merge cut
// away still contributes its requirements: harmless preconditions, never a
// missing one.
//
// Current device states are not an input. §6 builds the PEG on the backend
// when a token is requested, from the rules alone; states enter at §6.2,
// when the command is issued (command_deduction.h decides which vertices
// already hold). Every precondition stays a vertex even when it already
// holds, because execution (§7) reserves every PEG variable so that no
// other combo breaks a precondition between its check and the subject
// command.

// One condition of the PEG.
struct PegVertex {
  AttributeCondition condition;  // merged over every rule that required it
  // The rules whose requirements were merged into this vertex, in merge
  // order; empty for the subject.
  std::vector<std::string> required_by;
  bool subject = false;

  friend bool operator==(const PegVertex&, const PegVertex&) = default;
};

// `precondition` must hold before `dependent` is made true (A => B).
struct PegEdge {
  size_t precondition = 0;
  size_t dependent = 0;
  std::vector<std::string> rules;  // the rules that asked for this order

  friend bool operator==(const PegEdge&, const PegEdge&) = default;
};

struct PreconditionGraph {
  std::vector<PegVertex> vertices;  // [0] is the subject, then discovery (BFS) order
  std::vector<PegEdge> edges;       // in the order they were found

  // The direct preconditions of `vertex`, in edge order.
  std::vector<size_t> preconditions_of(size_t vertex) const;
  // The vertices by level: level 0 has no precondition, a vertex's level is
  // one more than its highest precondition's. Within a level, vertex order.
  // The subject, which every vertex precedes, is alone in the last level.
  std::vector<std::vector<size_t>> levels() const;
  // The number of vertices on the longest path (§4 "PEG depth").
  size_t depth() const { return levels().size(); }

  // One line per vertex, subject first:
  //   [1] outlet_1.power == off  before [0] (sprinkler_needs_outlets_off)
  std::string describe() const;

  friend bool operator==(const PreconditionGraph&, const PreconditionGraph&) = default;
};

// Builds the PEG of `subject` (command_condition() of the subject command)
// from `rules`. The error says which rules conflict on which variable, or
// which cycle they form, or that the subject is a reading (no command sets
// it).
core::Expected<PreconditionGraph, std::string> build_graph(const AttributeCondition& subject,
                                                           const std::vector<PreconditionRule>& rules);

}  // namespace mesh::routine
