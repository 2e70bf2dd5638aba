#include "sim/running_node.h"

namespace mesh::sim {
namespace {

thread_local int32_t current = kNoNode;

}  // namespace

int32_t running_node() { return current; }

RunningNodeScope::RunningNodeScope(int32_t node) : previous_(current) { current = node; }

RunningNodeScope::~RunningNodeScope() { current = previous_; }

}  // namespace mesh::sim
