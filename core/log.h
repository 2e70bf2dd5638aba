#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

namespace mesh::core {

// One spdlog logger per layer ("core", "routing", "membership", "kgroup",
// "mutex", "routine", "agent", "sim"), created on first use. Messages are
// key=value: log(...)->info("neighbour up node={} via={}", a, b).
spdlog::logger& log(std::string_view layer);

// The layers a logger exists for (created so far, plus the known ones).
std::vector<std::string> log_layers();

// Sets the level of one layer, or of every layer when `layer` is empty.
// Returns false (and changes nothing) for an unknown level name; the names
// are spdlog's: trace, debug, info, warn, error, critical, off.
bool set_log_level(std::string_view level, std::string_view layer = {});

// Where new and existing loggers write: stderr (the default, for the agent
// under systemd) or nowhere (benchmarks).
void log_to_stderr();
void log_to_null();

// Stamps every message with `seconds()` (the simulator's virtual time, so a
// replayed seed's log reads on the timeline its checkers report) instead of
// the wall clock. The returned token is passed back to stop; a later call
// replaces the clock, and stopping a replaced one changes nothing.
using LogClock = std::function<double()>;
uint64_t log_with_clock(LogClock seconds);
void stop_log_clock(uint64_t token);

}  // namespace mesh::core
