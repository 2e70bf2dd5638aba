#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kgroup/client_state_machine.h"

namespace mesh::agent {

// The state machine the agent's k-groups host: an append-only log of short
// text entries per target (meshctl kgroup-write appends, meshctl kgroup
// --log reads). Each update names the write it carries (a 64-bit id chosen
// by the agent that accepted it), so a write retried after an unknown
// outcome is applied once: the retry maps to the first copy's position.
//
// Positions (`seq`, from 1) are the log's own and survive epoch migration,
// unlike the group's sequence numbers, which restart in each new group.
class TextLog : public kgroup::ClientStateMachine {
 public:
  struct Record {
    uint64_t seq = 0;
    uint64_t write_id = 0;
    std::string text;
  };

  // An update for apply(): a client write of `text`.
  static std::string encode_update(uint64_t write_id, std::string_view text) { return encode_write(write_id, text); }

  void apply(uint64_t seq, std::string_view update) override;
  std::string snapshot() const override;
  bool restore(std::string_view snapshot) override;

  const std::vector<Record>& records() const { return records_; }
  // The log position of the write applied as group sequence number
  // `group_seq` of this replica (remembered for the latest kMaxRemembered).
  std::optional<uint64_t> position_of(uint64_t group_seq) const override;
  // A TextLogQuery: one page of the log from its `from` position, as a
  // TextLogPage (agent/text_log_reader.h reads the whole log page by page).
  core::Expected<std::string, std::string> read(std::string_view query) const override;
  // Updates that did not decode (never written by this agent): skipped, so
  // every replica skips the same ones.
  uint64_t malformed() const { return malformed_; }

  static constexpr size_t kMaxRemembered = 4096;

 private:
  std::vector<Record> records_;
  std::unordered_map<uint64_t, uint64_t> position_by_write_;
  std::map<uint64_t, uint64_t> position_by_group_seq_;
  uint64_t malformed_ = 0;
};

}  // namespace mesh::agent
