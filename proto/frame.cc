#include "proto/frame.h"

namespace mesh::proto {

bool append_frame(std::string_view message, std::string& out) {
  if (message.size() > kMaxFrameSize) return false;
  const auto n = static_cast<uint32_t>(message.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.append(message);
  return true;
}

bool FrameReader::feed(std::span<const uint8_t> bytes) {
  return feed(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

bool FrameReader::feed(std::string_view bytes) {
  if (error_ != Error::none) return false;
  // Compact before growing so a long-lived connection does not keep every
  // frame it ever read.
  if (start_ > 0 && start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  } else if (start_ > 4096 && start_ > buffer_.size() / 2) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
  if (buffered() >= kFrameHeaderSize) {
    const auto* p = reinterpret_cast<const uint8_t*>(buffer_.data() + start_);
    const size_t length = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
    if (length > kMaxFrameSize) {
      error_ = Error::oversized;
      return false;
    }
    // Grow once to the frame's size instead of doubling past it, so a
    // frame of the largest size costs about kMaxFrameSize, not twice that.
    const size_t frame_end = start_ + kFrameHeaderSize + length;
    if (buffer_.capacity() < frame_end) buffer_.reserve(frame_end);
  }
  return true;
}

std::optional<std::string> FrameReader::next() {
  if (error_ != Error::none || buffered() < kFrameHeaderSize) return std::nullopt;
  const auto* p = reinterpret_cast<const uint8_t*>(buffer_.data() + start_);
  const size_t length = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
  if (length > kMaxFrameSize) {
    error_ = Error::oversized;
    return std::nullopt;
  }
  if (buffered() < kFrameHeaderSize + length) return std::nullopt;
  std::string message = buffer_.substr(start_ + kFrameHeaderSize, length);
  start_ += kFrameHeaderSize + length;
  // Check the following header right away so an oversized length is reported
  // even when no more bytes arrive.
  if (buffered() >= kFrameHeaderSize) {
    const auto* q = reinterpret_cast<const uint8_t*>(buffer_.data() + start_);
    const size_t following = (size_t{q[0]} << 24) | (size_t{q[1]} << 16) | (size_t{q[2]} << 8) | q[3];
    if (following > kMaxFrameSize) error_ = Error::oversized;
  }
  return message;
}

}  // namespace mesh::proto
