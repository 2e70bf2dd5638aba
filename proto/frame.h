#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::proto {

// Framing of the admin socket: a uint32 big-endian length, then that many
// bytes of one protobuf message. Frames above kMaxFrameSize are refused at
// both ends, so a garbage length cannot make either side allocate wildly.
inline constexpr size_t kMaxFrameSize = 1u << 20;  // 1 MiB
inline constexpr size_t kFrameHeaderSize = 4;

// Appends one frame holding `message` to `out`. Returns false (and appends
// nothing) if the message exceeds kMaxFrameSize.
bool append_frame(std::string_view message, std::string& out);

// Reassembles frames from a byte stream that arrives in arbitrary pieces.
class FrameReader {
 public:
  enum class Error { none, oversized };

  // Adds received bytes; returns false once the stream is unusable (a length
  // above the limit), after which the connection should be closed.
  bool feed(std::span<const uint8_t> bytes);
  bool feed(std::string_view bytes);
  // The next complete frame's message, if one is buffered.
  std::optional<std::string> next();
  Error error() const { return error_; }
  // Bytes of an incomplete frame still buffered (for a clean-EOF check).
  size_t buffered() const { return buffer_.size() - start_; }
  // Memory the reader holds for its buffer; about the largest frame size
  // while one is arriving (the admin server's memory bound relies on it).
  size_t capacity() const { return buffer_.capacity(); }

 private:
  std::string buffer_;
  size_t start_ = 0;
  Error error_ = Error::none;
};

}  // namespace mesh::proto
