#include "kgroup/client_state_machine.h"

namespace mesh::kgroup {
namespace {

constexpr size_t kWriteIdBytes = 8;

}  // namespace

std::string ClientStateMachine::encode_write(uint64_t write_id, std::string_view payload) {
  std::string out;
  out.reserve(kWriteIdBytes + payload.size());
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((write_id >> shift) & 0xff));
  out.append(payload);
  return out;
}

std::optional<ClientStateMachine::Write> ClientStateMachine::decode_write(std::string_view update) {
  if (update.size() < kWriteIdBytes) return std::nullopt;
  Write out;
  for (size_t i = 0; i < kWriteIdBytes; ++i) out.write_id = (out.write_id << 8) | static_cast<uint8_t>(update[i]);
  out.payload = std::string(update.substr(kWriteIdBytes));
  return out;
}

}  // namespace mesh::kgroup
