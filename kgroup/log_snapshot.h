#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mesh::kgroup {

// A member's state machine at an applied point: what log compaction keeps in
// place of the entries up to last_seq, and what a member that needs those
// entries receives instead.
struct LogSnapshot {
  uint64_t last_seq = 0;   // the last entry the state includes (never 0)
  uint64_t last_term = 0;  // that entry's term
  std::string state;       // StateMachine::snapshot()
};

// The stored and transferred form: a version byte, the SHA-256 of the body,
// then the body (proto::KgroupLogSnapshot). The digest is there because the
// entries a snapshot replaces are gone: a damaged snapshot must be refused,
// never restored.
std::string encode_log_snapshot(const LogSnapshot& snapshot);
// Nothing if `bytes` is not exactly one undamaged snapshot of this version.
std::optional<LogSnapshot> decode_log_snapshot(std::string_view bytes);

}  // namespace mesh::kgroup
