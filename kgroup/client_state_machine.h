#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "kgroup/state_machine.h"

namespace mesh::kgroup {

// A state machine that serves clients: writes that any node routes to the
// group's leader (each carrying a write id, so a write retried after an
// unknown outcome is applied once) and reads answered at the leader. The
// agent's k-group client (agent/kgroup_service.h) drives both; the text log,
// the catalog and device groups implement it.
class ClientStateMachine : public StateMachine {
 public:
  // The update a client write becomes: 8 bytes of write id (big-endian), then
  // the payload. A fixed header, since updates must fit max_update_bytes.
  static std::string encode_write(uint64_t write_id, std::string_view payload);
  struct Write {
    uint64_t write_id = 0;
    std::string payload;
  };
  static std::optional<Write> decode_write(std::string_view update);

  // The client-visible position of the write applied as group sequence
  // number `group_seq` (a log position, a catalog version), if remembered.
  virtual std::optional<uint64_t> position_of(uint64_t group_seq) const = 0;
  // Answers `query` from the current state. Linearizable when asked of a
  // leader that can_read() (GroupReplica).
  virtual core::Expected<std::string, std::string> read(std::string_view query) const = 0;
};

}  // namespace mesh::kgroup
