// SPDY/3.1 framing and header blocks (tools/local/kubelet_api/spdy_frame.h, spdy_header_block.h):
// round trips of every frame type, byte-at-a-time feeding, the shared compression context, and
// the malformed inputs a peer could send. Also built under ASan+UBSan: this parses untrusted bytes.
#include "tools/local/kubelet_api/spdy_frame.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>
#include <vector>

#include "tools/local/kubelet_api/spdy_header_block.h"

namespace mf::local::spdy {
namespace {

// Compresses raw block bytes the way a peer's zlib stream would (for blocks our encoder refuses to make).
class RawDeflater {
 public:
  RawDeflater() {
    deflateInit(&zs_, Z_DEFAULT_COMPRESSION);
    const std::string_view dict = HeaderDictionary();
    deflateSetDictionary(&zs_, reinterpret_cast<const Bytef*>(dict.data()), static_cast<uInt>(dict.size()));
  }
  ~RawDeflater() { deflateEnd(&zs_); }
  std::string Compress(const std::string& raw) {
    std::string out(raw.size() + 1024, '\0');
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
    zs_.avail_in = static_cast<uInt>(raw.size());
    zs_.next_out = reinterpret_cast<Bytef*>(out.data());
    zs_.avail_out = static_cast<uInt>(out.size());
    deflate(&zs_, Z_SYNC_FLUSH);
    out.resize(out.size() - zs_.avail_out);
    return out;
  }

 private:
  z_stream zs_{};
};

std::string U32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string SynStreamWithBlock(uint32_t id, const std::string& compressed_block) {
  return EncodeControl(1, 0, U32(id) + U32(0) + std::string(2, '\0') + compressed_block);
}

std::vector<Frame> FeedAll(FrameReader& reader, std::string_view bytes) {
  std::vector<Frame> frames;
  Status s = reader.Feed(bytes, &frames);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return frames;
}

TEST(SpdyHeaderBlockTest, DictionaryIsSpdy3s) {
  const std::string_view dict = HeaderDictionary();
  EXPECT_EQ(dict.size(), 1423u);
  EXPECT_EQ(adler32(1, reinterpret_cast<const Bytef*>(dict.data()), static_cast<uInt>(dict.size())), 0xe3c6a7c2u);
}

TEST(SpdyHeaderBlockTest, SerializeAndParseRoundTrip) {
  const Headers headers = {{"streamtype", "error"}, {"port", "8080"}, {"x", "a"}, {"x", "b"}, {"empty", ""}};
  const std::string block = SerializeHeaderBlock(headers);
  // Multiple values of one name travel NUL-separated in one field.
  EXPECT_NE(block.find(std::string("a\0b", 3)), std::string::npos);
  auto parsed = ParseHeaderBlock(block, {});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, headers);
}

TEST(SpdyHeaderBlockTest, CompressionContextSpansBlocks) {
  HeaderBlockDeflater deflater;
  HeaderBlockInflater inflater;
  for (int i = 0; i < 20; ++i) {
    const Headers headers = {{"streamtype", i % 2 ? "data" : "error"}, {"requestid", std::to_string(i)}};
    auto decoded = inflater.Decode(deflater.Encode(headers));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, headers);
  }
}

TEST(SpdyHeaderBlockTest, RejectsMalformedBlocks) {
  struct Case {
    const char* name;
    std::string raw;
  };
  const std::vector<Case> cases = {
      {"truncated count", std::string("\0\0", 2)},
      {"count beyond the names", U32(2) + U32(1) + "a" + U32(1) + "b"},
      {"name longer than the block", U32(1) + U32(100) + "abc"},
      {"value longer than the block", U32(1) + U32(1) + "a" + U32(50) + "xy"},
      {"empty name", U32(1) + U32(0) + U32(1) + "v"},
      {"repeated name", U32(2) + U32(1) + "a" + U32(1) + "1" + U32(1) + "A" + U32(1) + "2"},
      {"trailing bytes", U32(1) + U32(1) + "a" + U32(1) + "1" + "junk"},
      {"too many names", U32(1000)},
  };
  for (const auto& c : cases) {
    EXPECT_FALSE(ParseHeaderBlock(c.raw, {}).ok()) << c.name;
  }
}

TEST(SpdyHeaderBlockTest, UppercaseNamesAreLowercased) {
  auto parsed = ParseHeaderBlock(U32(1) + U32(10) + "StreamType" + U32(4) + "data", {});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(HeaderValue(*parsed, "streamtype"), "data");
}

TEST(SpdyHeaderBlockTest, InflationIsBounded) {
  // A small compressed block that inflates past the limit (a zlib bomb) is refused.
  RawDeflater deflater;
  const std::string huge = U32(1) + U32(1) + "a" + U32(1 << 20) + std::string(1 << 20, 'x');
  HeaderBlockInflater inflater;
  auto decoded = inflater.Decode(deflater.Compress(huge));
  EXPECT_FALSE(decoded.ok());
}

TEST(SpdyHeaderBlockTest, GarbageDoesNotInflate) {
  HeaderBlockInflater inflater;
  EXPECT_FALSE(inflater.Decode("this is not zlib").ok());
  // After a failure the context is out of sync: every later block fails too.
  HeaderBlockDeflater deflater;
  EXPECT_FALSE(inflater.Decode(deflater.Encode({{"a", "b"}})).ok());
}

TEST(SpdyFrameTest, ControlFramesRoundTrip) {
  FrameWriter writer;
  struct Case {
    const char* name;
    std::string bytes;
    Frame want;
  };
  auto frame = [](FrameType type, uint8_t flags, uint32_t stream_id, uint32_t status, uint32_t id) {
    Frame f;
    f.type = type;
    f.flags = flags;
    f.stream_id = stream_id;
    f.status = status;
    f.id = id;
    return f;
  };
  std::vector<Case> cases;
  Frame syn = frame(FrameType::kSynStream, kFlagFin, 5, 0, 0);
  syn.headers = {{"streamtype", "stdin"}};
  cases.push_back({"SYN_STREAM", writer.SynStream(5, syn.headers, kFlagFin), syn});
  Frame reply = frame(FrameType::kSynReply, 0, 5, 0, 0);
  cases.push_back({"SYN_REPLY with no headers", writer.SynReply(5, {}), reply});
  Frame headers = frame(FrameType::kHeaders, 0, 7, 0, 0);
  headers.headers = {{"a", "1"}};
  cases.push_back({"HEADERS", writer.HeadersFrame(7, headers.headers), headers});
  cases.push_back({"RST_STREAM", EncodeRstStream(9, RstStatus::kCancel),
                   frame(FrameType::kRstStream, 0, 9, static_cast<uint32_t>(RstStatus::kCancel), 0)});
  cases.push_back({"PING", EncodePing(3), frame(FrameType::kPing, 0, 0, 0, 3)});
  cases.push_back({"GOAWAY", EncodeGoAway(11, GoAwayStatus::kProtocolError),
                   frame(FrameType::kGoAway, 0, 0, static_cast<uint32_t>(GoAwayStatus::kProtocolError), 11)});
  cases.push_back({"WINDOW_UPDATE", EncodeWindowUpdate(1, 65536), frame(FrameType::kWindowUpdate, 0, 1, 0, 65536)});
  Frame settings = frame(FrameType::kSettings, 0, 0, 0, 0);
  settings.settings = {{7, 65536}, {0x01000004, 100}};
  cases.push_back({"SETTINGS", EncodeSettings(settings.settings), settings});

  FrameReader reader;
  for (const auto& c : cases) {
    std::vector<Frame> frames = FeedAll(reader, c.bytes);
    ASSERT_EQ(frames.size(), 1u) << c.name;
    const Frame& got = frames[0];
    EXPECT_EQ(got.type, c.want.type) << c.name;
    EXPECT_EQ(got.flags, c.want.flags) << c.name;
    EXPECT_EQ(got.stream_id, c.want.stream_id) << c.name;
    EXPECT_EQ(got.status, c.want.status) << c.name;
    EXPECT_EQ(got.id, c.want.id) << c.name;
    EXPECT_EQ(got.headers, c.want.headers) << c.name;
    EXPECT_EQ(got.settings, c.want.settings) << c.name;
  }
}

TEST(SpdyFrameTest, DataFramesArriveInPiecesWithFinOnTheLast) {
  const std::string bytes = EncodeData(3, "hello world", true) + EncodeData(5, "", true) + EncodeData(3, "x", false);
  // Byte at a time: every piece carries part of the data; only the last piece of a frame has FIN.
  FrameReader reader;
  std::string stream3;
  int fins3 = 0;
  bool fin5 = false;
  for (char c : bytes) {
    for (const Frame& f : FeedAll(reader, std::string_view(&c, 1))) {
      ASSERT_EQ(f.type, FrameType::kData);
      if (f.stream_id == 3) {
        stream3 += f.data;
        fins3 += f.fin();
      } else {
        EXPECT_EQ(f.stream_id, 5u);
        EXPECT_TRUE(f.data.empty());
        fin5 = f.fin();
      }
    }
  }
  EXPECT_EQ(stream3, "hello worldx");
  EXPECT_EQ(fins3, 1);
  EXPECT_TRUE(fin5);
}

TEST(SpdyFrameTest, ByteAtATimeEqualsAllAtOnce) {
  FrameWriter writer;
  // Header blocks share one compression context: encode them in wire order.
  std::string bytes = writer.SynStream(1, {{"streamtype", "error"}});
  bytes += writer.SynStream(3, {{"streamtype", "stdout"}});
  bytes += EncodePing(1) + EncodeData(3, std::string(1000, 'z'), true) + EncodeGoAway(3, GoAwayStatus::kOk);
  FrameReader whole;
  const std::vector<Frame> at_once = FeedAll(whole, bytes);
  FrameReader split;
  std::vector<Frame> piecewise;
  std::string data;
  for (char c : bytes) {
    for (Frame& f : FeedAll(split, std::string_view(&c, 1))) {
      if (f.type == FrameType::kData) {
        data += f.data;
        if (!f.fin()) continue;
        f.data = data;
      }
      piecewise.push_back(std::move(f));
    }
  }
  ASSERT_EQ(at_once.size(), piecewise.size());
  for (size_t i = 0; i < at_once.size(); ++i) {
    EXPECT_EQ(at_once[i].type, piecewise[i].type);
    EXPECT_EQ(at_once[i].headers, piecewise[i].headers);
    EXPECT_EQ(at_once[i].data, piecewise[i].data);
  }
}

TEST(SpdyFrameTest, UnknownControlFramesAreSkipped) {
  FrameReader reader;
  // Type 10 (CREDENTIAL) and 5 (NOOP, SPDY/2) with payloads, then a PING.
  const std::string bytes = EncodeControl(10, 0, std::string(100, 'q')) + EncodeControl(5, 0, "") + EncodePing(7);
  std::vector<Frame> frames = FeedAll(reader, bytes);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].type, FrameType::kPing);
  EXPECT_EQ(frames[0].id, 7u);
}

TEST(SpdyFrameTest, RejectsMalformedFrames) {
  RawDeflater raw;
  struct Case {
    const char* name;
    std::string bytes;
  };
  const std::vector<Case> cases = {
      {"data on stream 0", EncodeData(0, "x", false)},
      {"control frame of version 2", EncodeControl(6, 0, U32(1), 2)},
      {"SYN_STREAM shorter than its fixed fields", EncodeControl(1, 0, "12345")},
      {"SYN_STREAM for stream 0", SynStreamWithBlock(0, raw.Compress(U32(0)))},
      {"SYN_STREAM with an uncompressed block", SynStreamWithBlock(1, U32(0))},
      {"SYN_REPLY without a stream id", EncodeControl(2, 0, "ab")},
      {"RST_STREAM of 4 bytes", EncodeControl(3, 0, U32(1))},
      {"RST_STREAM for stream 0", EncodeControl(3, 0, U32(0) + U32(5))},
      {"RST_STREAM with status 0", EncodeControl(3, 0, U32(1) + U32(0))},
      {"SETTINGS count beyond the payload", EncodeControl(4, 0, U32(2) + U32(1) + U32(1))},
      {"PING of 8 bytes", EncodeControl(6, 0, U32(1) + U32(1))},
      {"GOAWAY of 4 bytes", EncodeControl(7, 0, U32(1))},
      {"WINDOW_UPDATE of 12 bytes", EncodeControl(9, 0, U32(1) + U32(1) + U32(1))},
      {"control frame over the size limit", EncodeControl(1, 0, std::string(300 * 1024, 'a'))},
  };
  for (const auto& c : cases) {
    FrameReader reader;
    std::vector<Frame> frames;
    EXPECT_FALSE(reader.Feed(c.bytes, &frames).ok()) << c.name;
    // A failed reader stays failed.
    EXPECT_FALSE(reader.Feed(EncodePing(1), &frames).ok()) << c.name;
  }
}

TEST(SpdyFrameTest, DataLengthUsesTwentyFourBits) {
  // Flags live in the top byte of the length word: FIN must not change the length.
  const std::string bytes = EncodeData(1, std::string(300, 'a'), true);
  ASSERT_EQ(bytes.size(), 308u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[4]), kFlagFin);
  EXPECT_EQ(static_cast<unsigned char>(bytes[6]), 1);
  EXPECT_EQ(static_cast<unsigned char>(bytes[7]), 44);
}

}  // namespace
}  // namespace mf::local::spdy
