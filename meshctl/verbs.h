#pragma once

// meshctl's verbs, grouped in families, one file per family
// (node_verbs.cc, routing_verbs.cc, ...). A family brings its verbs and the
// part of --help that documents them; main.cc lists the families in --help
// order. Adding a family: one file defining it, its declaration below and
// one line in main.cc's table.

#include <span>
#include <string_view>

#include "meshctl/client.h"

namespace mesh::meshctl {

using VerbHandler = int (*)(AgentConnection& connection, const CommandLine& line);

struct Verb {
  std::string_view name;
  VerbHandler run;
  std::string_view alias = {};  // another accepted spelling, not listed
};

struct VerbFamily {
  // Its entries of the COMMANDS section of --help: each entry's synopsis
  // indented four spaces, its text eight, entries separated by a blank
  // line; ends with a newline.
  std::string_view help;
  std::span<const Verb> verbs;
};

const VerbFamily& node_verbs();        // status, metrics, log, ping
const VerbFamily& routing_verbs();     // neighbors, routes, topology
const VerbFamily& membership_verbs();  // members
const VerbFamily& lock_verbs();        // lock, locks
const VerbFamily& kgroup_verbs();      // kgroups, kgroup, kgroup-write
const VerbFamily& device_verbs();      // devices, device
const VerbFamily& routine_verbs();     // routines, routine
const VerbFamily& precondition_verbs();  // preconditions, precondition, plan

}  // namespace mesh::meshctl
