#pragma once

// The catalog changes meshctl makes for the device, routine and precondition
// verb families (device add/remove, routine add/remove/enable/disable,
// precondition add/remove): the agent checks each against its catalog and
// the catalog group decides it; meshctl prints one verdict per device,
// routine or rule and exits 1 if any was refused.

#include <string_view>

#include <google/protobuf/message.h>

#include "meshctl/client.h"

namespace mesh::meshctl {

enum class CatalogKind { device, routine, precondition };

// `KIND add --file F [--replace]`: every [[device]] (or [[routine]], or
// [[precondition]]) table of F.
int add_catalog_file(AgentConnection& connection, const CommandLine& line, CatalogKind kind);
// `KIND remove ID`.
int remove_catalog_entry(AgentConnection& connection, const CommandLine& line, CatalogKind kind);
// Prints the verdict on a change of one entry (`reply` with --json): `done`
// says what happened ("removed", "enabled", ...), `doing` what was refused
// ("removing", ...). Returns the exit status.
int report_verdict(const CommandLine& line, CatalogKind kind, const proto::CatalogVerdict& verdict,
                   const google::protobuf::Message& reply, std::string_view done, std::string_view doing);

}  // namespace mesh::meshctl
