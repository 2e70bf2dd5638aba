#include "proto/frame.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace mesh::proto {
namespace {

std::string frame_of(std::string_view message) {
  std::string out;
  EXPECT_TRUE(append_frame(message, out));
  return out;
}

std::string header(uint32_t n) {
  std::string h;
  h.push_back(static_cast<char>(n >> 24));
  h.push_back(static_cast<char>(n >> 16));
  h.push_back(static_cast<char>(n >> 8));
  h.push_back(static_cast<char>(n));
  return h;
}

TEST(Frame, RoundTrip) {
  const std::string message("hello\0world", 11);
  const std::string framed = frame_of(message);
  ASSERT_EQ(framed.size(), kFrameHeaderSize + message.size());
  EXPECT_EQ(framed.substr(0, 4), header(11));
  FrameReader reader;
  ASSERT_TRUE(reader.feed(framed));
  auto got = reader.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, message);
  EXPECT_FALSE(reader.next());
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_EQ(reader.error(), FrameReader::Error::none);
}

TEST(Frame, EmptyMessage) {
  FrameReader reader;
  ASSERT_TRUE(reader.feed(frame_of("")));
  auto got = reader.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "");
}

TEST(Frame, SplitAtEveryByteBoundary) {
  const std::string stream = frame_of("first message") + frame_of("") + frame_of("third");
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SCOPED_TRACE("cut=" + std::to_string(cut));
    FrameReader reader;
    std::vector<std::string> got;
    ASSERT_TRUE(reader.feed(std::string_view(stream).substr(0, cut)));
    while (auto m = reader.next()) got.push_back(*m);
    ASSERT_TRUE(reader.feed(std::string_view(stream).substr(cut)));
    while (auto m = reader.next()) got.push_back(*m);
    EXPECT_EQ(got, (std::vector<std::string>{"first message", "", "third"}));
    EXPECT_EQ(reader.buffered(), 0u);
  }
}

TEST(Frame, ByteByByte) {
  const std::string stream = frame_of("abc") + frame_of("defgh");
  FrameReader reader;
  std::vector<std::string> got;
  for (char c : stream) {
    ASSERT_TRUE(reader.feed(std::string_view(&c, 1)));
    while (auto m = reader.next()) got.push_back(*m);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"abc", "defgh"}));
}

TEST(Frame, SeveralFramesInOneFeed) {
  std::string stream;
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(append_frame("message " + std::to_string(i), stream));
  FrameReader reader;
  ASSERT_TRUE(reader.feed(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(stream.data()), stream.size())));
  for (int i = 0; i < 50; ++i) {
    auto m = reader.next();
    ASSERT_TRUE(m) << i;
    EXPECT_EQ(*m, "message " + std::to_string(i));
  }
  EXPECT_FALSE(reader.next());
}

TEST(Frame, OversizedLengthRefused) {
  FrameReader reader;
  EXPECT_FALSE(reader.feed(header(static_cast<uint32_t>(kMaxFrameSize + 1))));
  EXPECT_EQ(reader.error(), FrameReader::Error::oversized);
  EXPECT_FALSE(reader.next());
  // The stream stays unusable.
  EXPECT_FALSE(reader.feed(frame_of("later")));

  FrameReader garbage;
  EXPECT_FALSE(garbage.feed(std::string("\xff\xff\xff\xff", 4)));
  EXPECT_EQ(garbage.error(), FrameReader::Error::oversized);
}

TEST(Frame, OversizedLengthAfterAGoodFrameReported) {
  FrameReader reader;
  ASSERT_TRUE(reader.feed(frame_of("ok")));
  // The oversized header arrives in the same stream after a good frame.
  reader.feed(header(0x7fffffff));
  // The good frame before it is still delivered; the bad length is reported
  // without waiting for bytes that will never come.
  auto first = reader.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, "ok");
  EXPECT_FALSE(reader.next());
  EXPECT_EQ(reader.error(), FrameReader::Error::oversized);
}

TEST(Frame, ExactlyOneMebibyteAccepted) {
  const std::string big(kMaxFrameSize, 'z');
  std::string stream;
  ASSERT_TRUE(append_frame(big, stream));
  FrameReader reader;
  // In pieces, as a socket would deliver it.
  const size_t piece = 65536;
  for (size_t at = 0; at < stream.size(); at += piece) {
    ASSERT_TRUE(reader.feed(std::string_view(stream).substr(at, piece)));
  }
  auto got = reader.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(got->size(), kMaxFrameSize);
  EXPECT_EQ(*got, big);
}

TEST(Frame, ALargestFrameArrivingInSmallPiecesHoldsAboutItsOwnSize) {
  // The admin server reads 4 KiB at a time; doubling a growing buffer would
  // end near twice the frame, which its memory bound does not allow for.
  std::string stream;
  ASSERT_TRUE(append_frame(std::string(kMaxFrameSize, 'q'), stream));
  FrameReader reader;
  const size_t piece = 4096;
  for (size_t at = 0; at + 1 < stream.size(); at += piece) {
    ASSERT_TRUE(reader.feed(std::string_view(stream).substr(at, std::min(piece, stream.size() - 1 - at))));
  }
  EXPECT_FALSE(reader.next());  // one byte short
  EXPECT_LE(reader.capacity(), kMaxFrameSize + kFrameHeaderSize + piece);
  ASSERT_TRUE(reader.feed(std::string_view(stream).substr(stream.size() - 1)));
  EXPECT_EQ(reader.next()->size(), kMaxFrameSize);
}

TEST(Frame, AppendRefusesAboveOneMebibyte) {
  std::string out = "keep";
  EXPECT_FALSE(append_frame(std::string(kMaxFrameSize + 1, 'z'), out));
  EXPECT_EQ(out, "keep");
}

TEST(Frame, TruncatedFrameStaysBuffered) {
  const std::string framed = frame_of("incomplete");
  FrameReader reader;
  ASSERT_TRUE(reader.feed(std::string_view(framed).substr(0, framed.size() - 3)));
  EXPECT_FALSE(reader.next());
  EXPECT_EQ(reader.buffered(), framed.size() - 3);
  EXPECT_EQ(reader.error(), FrameReader::Error::none);
  // A partial header too.
  FrameReader header_only;
  ASSERT_TRUE(header_only.feed(std::string_view(framed).substr(0, 2)));
  EXPECT_FALSE(header_only.next());
  EXPECT_EQ(header_only.buffered(), 2u);
  // The rest completes it.
  ASSERT_TRUE(reader.feed(std::string_view(framed).substr(framed.size() - 3)));
  auto got = reader.next();
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, "incomplete");
}

TEST(Frame, LongStreamDoesNotKeepOldFrames) {
  FrameReader reader;
  const std::string framed = frame_of(std::string(1000, 'a'));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(reader.feed(framed.substr(0, 500)));
    ASSERT_TRUE(reader.feed(framed.substr(500)));
    auto got = reader.next();
    ASSERT_TRUE(got);
    ASSERT_EQ(got->size(), 1000u);
  }
  EXPECT_EQ(reader.buffered(), 0u);
}

}  // namespace
}  // namespace mesh::proto
