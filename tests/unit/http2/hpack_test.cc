// HPACK (src/http2/hpack.cc): RFC 7541 Appendix C decoded exactly, Encoder -> Decoder round trips
// with table churn, cross-checks both ways against nghttp2's own HPACK implementation, and the
// malformed blocks a peer can send. Also built with ASan+UBSan.
#include "http2/hpack.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

namespace mf::http2::hpack {
namespace {

using Field = std::pair<std::string, std::string>;
using Fields = std::vector<Field>;

class CollectingSink : public FieldSink {
 public:
  void OnField(std::string_view name, std::string_view value) override { fields.emplace_back(name, value); }
  Fields fields;
};

// "8286 8441" -> the bytes; spaces are ignored.
std::string Hex(std::string_view hex) {
  std::string out;
  int high = -1;
  for (char c : hex) {
    if (c == ' ' || c == '\n') continue;
    const int nibble = c <= '9' ? c - '0' : c - 'a' + 10;
    if (high < 0) {
      high = nibble;
    } else {
      out.push_back(static_cast<char>(high << 4 | nibble));
      high = -1;
    }
  }
  return out;
}

Fields DecodeOk(Decoder& decoder, std::string_view block) {
  CollectingSink sink;
  const Status status = decoder.Decode(block, sink);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return sink.fields;
}

Status DecodeFresh(std::string_view block, size_t max_table_bytes = 4096) {
  Decoder decoder(max_table_bytes);
  CollectingSink sink;
  return decoder.Decode(block, sink);
}

// A literal with incremental indexing and a new name, both raw (strings under 127 bytes).
std::string IndexedLiteral(std::string_view name, std::string_view value) {
  std::string out = "\x40";
  out.push_back(static_cast<char>(name.size()));
  out.append(name);
  out.push_back(static_cast<char>(value.size()));
  out.append(value);
  return out;
}

// An indexed field (RFC 7541 6.1): the index as a 7-bit prefix integer.
std::string IndexedField(size_t index) {
  std::string out;
  if (index < 127) {
    out.push_back(static_cast<char>(0x80 | index));
    return out;
  }
  out.push_back(static_cast<char>(0xff));
  index -= 127;
  for (; index >= 0x80; index >>= 7) out.push_back(static_cast<char>(0x80 | (index & 0x7f)));
  out.push_back(static_cast<char>(index));
  return out;
}

// ---- RFC 7541 Appendix C ----

TEST(HpackAppendixC, C2FieldRepresentations) {
  {
    Decoder decoder;  // C.2.1 literal with indexing
    EXPECT_EQ(DecodeOk(decoder, Hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572")),
              (Fields{{"custom-key", "custom-header"}}));
    EXPECT_EQ(decoder.table_bytes(), 55u);
    EXPECT_EQ(DecodeOk(decoder, Hex("be")), (Fields{{"custom-key", "custom-header"}}));
  }
  {
    Decoder decoder;  // C.2.2 literal without indexing
    EXPECT_EQ(DecodeOk(decoder, Hex("040c 2f73 616d 706c 652f 7061 7468")), (Fields{{":path", "/sample/path"}}));
    EXPECT_EQ(decoder.table_bytes(), 0u);
  }
  {
    Decoder decoder;  // C.2.3 literal never indexed
    EXPECT_EQ(DecodeOk(decoder, Hex("1008 7061 7373 776f 7264 0673 6563 7265 74")), (Fields{{"password", "secret"}}));
    EXPECT_EQ(decoder.table_bytes(), 0u);
  }
  {
    Decoder decoder;  // C.2.4 indexed
    EXPECT_EQ(DecodeOk(decoder, Hex("82")), (Fields{{":method", "GET"}}));
    EXPECT_EQ(decoder.table_bytes(), 0u);
  }
}

const Fields kRequest1 = {{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "www.example.com"}};
const Fields kRequest2 = {{":method", "GET"},
                          {":scheme", "http"},
                          {":path", "/"},
                          {":authority", "www.example.com"},
                          {"cache-control", "no-cache"}};
const Fields kRequest3 = {{":method", "GET"},
                          {":scheme", "https"},
                          {":path", "/index.html"},
                          {":authority", "www.example.com"},
                          {"custom-key", "custom-value"}};

const char kCookie[] = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
const Fields kResponse1 = {{":status", "302"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponse2 = {{":status", "307"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                           {"location", "https://www.example.com"}};
const Fields kResponse3 = {{":status", "200"},
                           {"cache-control", "private"},
                           {"date", "Mon, 21 Oct 2013 20:13:22 GMT"},
                           {"location", "https://www.example.com"},
                           {"content-encoding", "gzip"},
                           {"set-cookie", kCookie}};

struct ChainStep {
  const char* hex;
  const Fields* fields;
  size_t table_bytes;
  Fields indexed_after;  // what 62, 63, ... decode to afterwards: the table, newest first
};

void CheckChain(size_t max_table_bytes, const std::vector<ChainStep>& steps) {
  Decoder decoder(max_table_bytes);
  for (const ChainStep& step : steps) {
    SCOPED_TRACE(step.hex);
    EXPECT_EQ(DecodeOk(decoder, Hex(step.hex)), *step.fields);
    EXPECT_EQ(decoder.table_bytes(), step.table_bytes);
    // Looking the table up through indexed fields (RFC 7541 2.3.3) must not change it.
    std::string lookups;
    for (size_t i = 0; i < step.indexed_after.size(); ++i) lookups += IndexedField(62 + i);
    EXPECT_EQ(DecodeOk(decoder, lookups), step.indexed_after);
    CollectingSink sink;
    EXPECT_FALSE(decoder.Decode(IndexedField(62 + step.indexed_after.size()), sink).ok());
  }
}

const Fields kRequestTable1 = {{":authority", "www.example.com"}};
const Fields kRequestTable2 = {{"cache-control", "no-cache"}, {":authority", "www.example.com"}};
const Fields kRequestTable3 = {
    {"custom-key", "custom-value"}, {"cache-control", "no-cache"}, {":authority", "www.example.com"}};

TEST(HpackAppendixC, C3RequestsWithoutHuffman) {
  CheckChain(4096, {
                       {"8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", &kRequest1, 57, kRequestTable1},
                       {"8286 84be 5808 6e6f 2d63 6163 6865", &kRequest2, 110, kRequestTable2},
                       {"8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65", &kRequest3, 164,
                        kRequestTable3},
                   });
}

TEST(HpackAppendixC, C4RequestsWithHuffman) {
  CheckChain(4096, {
                       {"8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", &kRequest1, 57, kRequestTable1},
                       {"8286 84be 5886 a8eb 1064 9cbf", &kRequest2, 110, kRequestTable2},
                       {"8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", &kRequest3, 164, kRequestTable3},
                   });
}

const Fields kResponseTable1 = {{"location", "https://www.example.com"},
                                {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                {"cache-control", "private"},
                                {":status", "302"}};
const Fields kResponseTable2 = {{":status", "307"},
                                {"location", "https://www.example.com"},
                                {"date", "Mon, 21 Oct 2013 20:13:21 GMT"},
                                {"cache-control", "private"}};
const Fields kResponseTable3 = {
    {"set-cookie", kCookie}, {"content-encoding", "gzip"}, {"date", "Mon, 21 Oct 2013 20:13:22 GMT"}};

TEST(HpackAppendixC, C5ResponsesWithoutHuffmanEvict) {
  CheckChain(256, {
                      {"4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a "
                       "3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                       &kResponse1, 222, kResponseTable1},
                      {"4803 3330 37c1 c0bf", &kResponse2, 222, kResponseTable2},
                      {"88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 "
                       "677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 "
                       "553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
                       &kResponse3, 215, kResponseTable3},
                  });
}

TEST(HpackAppendixC, C6ResponsesWithHuffmanEvict) {
  CheckChain(256, {
                      {"4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e "
                       "919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                       &kResponse1, 222, kResponseTable1},
                      {"4883 640e ffc1 c0bf", &kResponse2, 222, kResponseTable2},
                      {"88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 "
                       "821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed "
                       "4ee5 b106 3d50 07",
                       &kResponse3, 215, kResponseTable3},
                  });
}

// ---- Dynamic table details ----

TEST(HpackDecoder, NewEntryMayNameTheEntryItEvicts) {
  // RFC 7541 4.4: the name is read from an entry that adding the new one evicts.
  Decoder decoder(100);
  const std::string name(30, 'n');
  EXPECT_EQ(DecodeOk(decoder, IndexedLiteral(name, "x")), (Fields{{name, "x"}}));
  EXPECT_EQ(decoder.table_bytes(), 63u);
  // Incremental indexing, name index 62: the entry that makes room for this one (63 + 72 > 100).
  const std::string block = "\x7e\x0a" + std::string(10, 'v');
  EXPECT_EQ(DecodeOk(decoder, block), (Fields{{name, std::string(10, 'v')}}));
  EXPECT_EQ(decoder.table_bytes(), 72u);
  EXPECT_EQ(DecodeOk(decoder, "\xbe"), (Fields{{name, std::string(10, 'v')}}));
  EXPECT_FALSE(DecodeFresh("\xbf").ok());
}

TEST(HpackDecoder, ManyEntriesKeepTheirOrderAsTheTableGrows) {
  Decoder decoder(1 << 16);
  std::string block;
  for (int i = 0; i < 300; ++i) block += IndexedLiteral("k" + std::to_string(i), "v" + std::to_string(i));
  EXPECT_EQ(DecodeOk(decoder, block).size(), 300u);
  for (int i = 0; i < 300; ++i) {
    // Newest first: index 62 + i is entry 299 - i.
    EXPECT_EQ(DecodeOk(decoder, IndexedField(62 + i)),
              (Fields{{"k" + std::to_string(299 - i), "v" + std::to_string(299 - i)}}));
  }
}

TEST(HpackDecoder, SizeUpdatesEvictAndMayComeInARowAtBlockStart) {
  Decoder decoder;
  DecodeOk(decoder, Hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"));
  EXPECT_EQ(decoder.table_bytes(), 57u);
  EXPECT_EQ(DecodeOk(decoder, Hex("20 3f e1 1f 82")), (Fields{{":method", "GET"}}));  // 0, then 4096
  EXPECT_EQ(decoder.table_bytes(), 0u);
  EXPECT_TRUE(DecodeOk(decoder, "").empty());
  CollectingSink sink;
  EXPECT_FALSE(decoder.Decode("\xbe", sink).ok());  // the entry was evicted
}

TEST(HpackDecoder, EntryLargerThanTheTableEmptiesIt) {
  Decoder decoder(64);
  DecodeOk(decoder, IndexedLiteral("a", "b"));
  EXPECT_EQ(decoder.table_bytes(), 34u);
  EXPECT_EQ(DecodeOk(decoder, IndexedLiteral("name", std::string(40, 'x'))), (Fields{{"name", std::string(40, 'x')}}));
  EXPECT_EQ(decoder.table_bytes(), 0u);
}

// ---- Malformed blocks ----

void ExpectError(std::string_view block, std::string_view message_part, size_t max_table_bytes = 4096) {
  const Status status = DecodeFresh(block, max_table_bytes);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << "block " << testing::PrintToString(std::string(block));
  EXPECT_NE(status.message().find(message_part), std::string::npos) << status.message();
}

TEST(HpackDecoderErrors, TruncatedInteger) {
  ExpectError("\xff", "ends inside an integer");
  ExpectError("\xff\x80", "ends inside an integer");
  EXPECT_TRUE(DecodeFresh(std::string("\x0f\x00\x00", 3)).ok());  // literal, name index 15 + 0, empty value
}

TEST(HpackDecoderErrors, IntegerOverflow) {
  ExpectError("\x7f\xff\xff\xff\xff\x7f", "2^32");         // 63 + ~2^35
  ExpectError("\x7f\x80\x80\x80\x80\x80\x01", "32 bits");  // padded with zero groups past 32 bits
  // 2^32 - 1 still parses as an integer (and then fails as an index, not as an integer).
  ExpectError("\xff\x80\xff\xff\xff\x0f", "past the tables");
}

TEST(HpackDecoderErrors, IndexZero) {
  ExpectError("\x80", "index 0");
  ExpectError(std::string("\x40\x00", 2), "before a string literal");  // a new (empty) name, then no value
}

TEST(HpackDecoderErrors, IndexPastTheTables) {
  ExpectError("\xbe", "index 62 is past the tables");
  ExpectError(std::string("\x7f\x00\x00", 3), "index 63 is past the tables");  // literal naming entry 63
  EXPECT_TRUE(DecodeFresh("\xbd").ok());                                       // 61 is the last static entry
}

TEST(HpackDecoderErrors, StringRunsPastTheBlock) {
  ExpectError(Hex("400a 6375 7374"), "runs past the block");
  ExpectError(Hex("4001 61"), "before a string literal");
  EXPECT_TRUE(DecodeFresh(Hex("4001 6100")).ok());
}

TEST(HpackDecoderErrors, HuffmanPadding) {
  // A never-indexed literal with Huffman name "a" (00011) and an empty value; padding varies.
  EXPECT_TRUE(DecodeFresh(Hex("10 81 1f 00")).ok());  // 111: a valid 3-bit padding
  ExpectError(Hex("10 81 18 00"), "padding is not all ones");
  ExpectError(Hex("10 81 1e 00"), "padding is not all ones");
  ExpectError(Hex("10 82 1f ff 00"), "11 bits of padding");
  ExpectError(Hex("10 81 ff 00"), "8 bits of padding");
}

TEST(HpackDecoderErrors, HuffmanEos) {
  ExpectError(Hex("10 84 ff ff ff ff 00"), "EOS");  // EOS (30 ones) then 2 bits of padding
  ExpectError(Hex("10 85 1f ff ff ff fc 00"), "EOS");
}

TEST(HpackDecoderErrors, SizeUpdateAboveTheAdvertisedMax) {
  ExpectError(Hex("3f e2 1f"), "above the advertised");  // 4097
  EXPECT_TRUE(DecodeFresh(Hex("3f e1 1f")).ok());        // 4096
  ExpectError(Hex("3f e2 1f"), "above the advertised", 100);
  ExpectError(Hex("3f 46"), "above the advertised", 100);  // 101
  EXPECT_TRUE(DecodeFresh(Hex("3f 45"), 100).ok());        // 100
}

TEST(HpackDecoderErrors, SizeUpdateAfterAField) {
  ExpectError(Hex("82 20"), "after a field");
  EXPECT_TRUE(DecodeFresh(Hex("20 82")).ok());
}

// ---- Encoder ----

Fields EncodeThenDecode(Encoder& encoder, Decoder& decoder, const Fields& fields, std::string* block) {
  block->clear();
  encoder.BeginBlock(block);
  for (const auto& [name, value] : fields) encoder.Add(name, value, block);
  return DecodeOk(decoder, *block);
}

TEST(HpackEncoder, RepeatedGrpcFieldsCostOneByteEach) {
  Encoder encoder;
  Decoder decoder;
  const Fields headers = {{":status", "200"}, {"content-type", "application/grpc"}, {"grpc-encoding", "identity"}};
  const Fields trailers = {{"grpc-status", "0"}};
  std::string block;
  EXPECT_EQ(EncodeThenDecode(encoder, decoder, headers, &block), headers);
  EXPECT_EQ(block.substr(0, 2), Hex("885f"));  // static index 8, then content-type's name (31) with indexing
  EXPECT_EQ(EncodeThenDecode(encoder, decoder, trailers, &block), trailers);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(EncodeThenDecode(encoder, decoder, headers, &block), headers);
    EXPECT_EQ(block.size(), 3u);
    EXPECT_EQ(EncodeThenDecode(encoder, decoder, trailers, &block), trailers);
    EXPECT_EQ(block, "\xbe");  // the newest entry
  }
}

TEST(HpackEncoder, SensitiveAndLargeFieldsStayOutOfTheTable) {
  Encoder encoder;
  Decoder decoder;
  std::string block;
  const Fields fields = {
      {"authorization", "Bearer secret"}, {"cookie", "a=b"}, {"set-cookie", "c=d"}, {"x-big", std::string(600, 'b')}};
  EXPECT_EQ(EncodeThenDecode(encoder, decoder, fields, &block), fields);
  EXPECT_EQ(decoder.table_bytes(), 0u);
  EXPECT_EQ(static_cast<uint8_t>(block[0]), 0x1fu);  // never indexed, name index 23 = 15 + 8
  EXPECT_EQ(static_cast<uint8_t>(block[1]), 8u);
  EXPECT_EQ(EncodeThenDecode(encoder, decoder, fields, &block), fields);
  EXPECT_EQ(decoder.table_bytes(), 0u);
}

// Names and values that exercise every representation: static full and name matches, repeats,
// sensitive names, sizes around the 512-byte indexing limit and larger than small tables, and
// every byte value.
Field RandomField(std::mt19937& rng) {
  static const char* const kNames[] = {":status",       "content-type",  "grpc-status",    "grpc-message", "x-custom",
                                       "cache-control", "authorization", "cookie",         "set-cookie",   "te",
                                       ":path",         "user-agent",    "accept-encoding"};
  static const char* const kValues[] = {"", "200", "0", "application/grpc", "gzip, deflate", "trailers", "/", "404"};
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  Field field;
  if (pick(4) == 0) {
    const size_t length = 1 + pick(20);
    for (size_t i = 0; i < length; ++i) field.first.push_back(static_cast<char>('a' + pick(26)));
  } else {
    field.first = kNames[pick(std::size(kNames))];
  }
  switch (pick(6)) {
    case 0:
    case 1:
      field.second = kValues[pick(std::size(kValues))];
      break;
    case 2: {
      const size_t length = pick(40);
      for (size_t i = 0; i < length; ++i) field.second.push_back(static_cast<char>(pick(256)));
      break;
    }
    case 3: {
      const size_t length = pick(60);
      for (size_t i = 0; i < length; ++i) field.second.push_back(static_cast<char>('a' + pick(26)));
      break;
    }
    case 4:
      field.second = std::string(470 + pick(80), 'v');  // around the 512-byte indexing limit
      break;
    default:
      field.second = std::to_string(pick(20));
  }
  return field;
}

Fields RandomBlock(std::mt19937& rng) {
  Fields fields(rng() % 12);
  for (Field& field : fields) field = RandomField(rng);
  return fields;
}

TEST(HpackEncoder, RoundTripsWithTableChurnAndSizeChanges) {
  std::mt19937 rng(7541);
  Encoder encoder;
  Decoder decoder;
  std::string block;
  const uint32_t kSizes[] = {0, 40, 64, 256, 1000, 4096, 65536};
  for (int i = 0; i < 3000; ++i) {
    if (rng() % 25 == 0) encoder.SetPeerMaxTableSize(kSizes[rng() % std::size(kSizes)]);
    if (rng() % 50 == 0) encoder.SetPeerMaxTableSize(kSizes[rng() % std::size(kSizes)]);  // twice between blocks
    const Fields fields = RandomBlock(rng);
    ASSERT_EQ(EncodeThenDecode(encoder, decoder, fields, &block), fields) << "block " << i;
    ASSERT_LE(decoder.table_bytes(), 4096u);
  }
}

// ---- Cross-checks with nghttp2's HPACK ----

std::vector<nghttp2_nv> ToNghttp2(const Fields& fields, bool never_index_some) {
  std::vector<nghttp2_nv> nva;
  for (const auto& [name, value] : fields) {
    nghttp2_nv nv{};
    nv.name = reinterpret_cast<uint8_t*>(const_cast<char*>(name.data()));
    nv.namelen = name.size();
    nv.value = reinterpret_cast<uint8_t*>(const_cast<char*>(value.data()));
    nv.valuelen = value.size();
    nv.flags = never_index_some && value.size() % 5 == 0 ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE;
    nva.push_back(nv);
  }
  return nva;
}

std::string Nghttp2Deflate(nghttp2_hd_deflater* deflater, const Fields& fields) {
  std::vector<nghttp2_nv> nva = ToNghttp2(fields, /*never_index_some=*/true);
  std::string block(nghttp2_hd_deflate_bound(deflater, nva.data(), nva.size()), '\0');
  const ssize_t n =
      nghttp2_hd_deflate_hd(deflater, reinterpret_cast<uint8_t*>(block.data()), block.size(), nva.data(), nva.size());
  EXPECT_GE(n, 0) << nghttp2_strerror(static_cast<int>(n));
  block.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return block;
}

TEST(HpackNghttp2, OurDecoderReadsNghttp2Blocks) {
  std::mt19937 rng(2);
  nghttp2_hd_deflater* deflater = nullptr;
  ASSERT_EQ(nghttp2_hd_deflate_new(&deflater, 4096), 0);
  Decoder decoder;
  const size_t kSizes[] = {0, 50, 256, 4096};
  for (int i = 0; i < 3000; ++i) {
    if (rng() % 40 == 0) {
      ASSERT_EQ(nghttp2_hd_deflate_change_table_size(deflater, kSizes[rng() % 4]), 0);
    }
    const Fields fields = RandomBlock(rng);
    const std::string block = Nghttp2Deflate(deflater, fields);
    ASSERT_EQ(DecodeOk(decoder, block), fields) << "block " << i;
  }
  nghttp2_hd_deflate_del(deflater);
}

TEST(HpackNghttp2, EveryHuffmanSymbolFromNghttp2) {
  // nghttp2 Huffman-codes a string when that is shorter: 80 'a's (5 bits each) around one byte of
  // any value (at most 30 bits) always are, so every symbol's code goes through our decoder.
  nghttp2_hd_deflater* deflater = nullptr;
  ASSERT_EQ(nghttp2_hd_deflate_new(&deflater, 0), 0);
  Decoder decoder;
  for (int symbol = 0; symbol < 256; ++symbol) {
    const std::string value = std::string(40, 'a') + static_cast<char>(symbol) + std::string(40, 'a');
    const Fields fields = {{"x", value}, {"y" + std::string(1, static_cast<char>(symbol)) + "z", "b"}};
    const std::string block = Nghttp2Deflate(deflater, fields);
    ASSERT_LT(block.size(), value.size()) << "nghttp2 did not Huffman-code symbol " << symbol;
    ASSERT_EQ(DecodeOk(decoder, block), fields) << "symbol " << symbol;
  }
  nghttp2_hd_deflate_del(deflater);
}

// Decodes one block with nghttp2; the flags record never-indexed fields.
Fields Nghttp2Inflate(nghttp2_hd_inflater* inflater, std::string_view block, std::vector<bool>* never_indexed) {
  Fields fields;
  const auto* in = reinterpret_cast<const uint8_t*>(block.data());
  size_t left = block.size();
  while (true) {
    nghttp2_nv nv;
    int flags = 0;
    const ssize_t n = nghttp2_hd_inflate_hd2(inflater, &nv, &flags, in, left, /*in_final=*/1);
    if (n < 0) {
      ADD_FAILURE() << "nghttp2 rejects our block: " << nghttp2_strerror(static_cast<int>(n));
      return fields;
    }
    in += n;
    left -= static_cast<size_t>(n);
    if (flags & NGHTTP2_HD_INFLATE_EMIT) {
      fields.emplace_back(std::string(reinterpret_cast<char*>(nv.name), nv.namelen),
                          std::string(reinterpret_cast<char*>(nv.value), nv.valuelen));
      if (never_indexed) never_indexed->push_back((nv.flags & NGHTTP2_NV_FLAG_NO_INDEX) != 0);
    }
    if (flags & NGHTTP2_HD_INFLATE_FINAL) {
      nghttp2_hd_inflate_end_headers(inflater);
      return fields;
    }
    if ((flags & NGHTTP2_HD_INFLATE_EMIT) == 0 && left == 0) return fields;
  }
}

TEST(HpackNghttp2, Nghttp2ReadsOurEncoderAcrossTableSizeChanges) {
  std::mt19937 rng(3);
  nghttp2_hd_inflater* inflater = nullptr;
  ASSERT_EQ(nghttp2_hd_inflate_new(&inflater), 0);
  Encoder encoder;
  std::string block;
  const uint32_t kSizes[] = {0, 40, 100, 256, 1000, 4096, 8192};
  int changes = 0;
  for (int i = 0; i < 3000; ++i) {
    // The peer advertises a new SETTINGS_HEADER_TABLE_SIZE (sometimes twice between two blocks,
    // where RFC 7541 4.2 wants the smallest announced first); nghttp2 insists on the update.
    for (int k = 0; k < 2 && rng() % (k == 0 ? 20 : 3) == 0; ++k) {
      const uint32_t size = kSizes[rng() % std::size(kSizes)];
      ASSERT_EQ(nghttp2_hd_inflate_change_table_size(inflater, size), 0);
      encoder.SetPeerMaxTableSize(size);
      ++changes;
    }
    const Fields fields = RandomBlock(rng);
    block.clear();
    encoder.BeginBlock(&block);
    for (const auto& [name, value] : fields) encoder.Add(name, value, &block);
    std::vector<bool> never_indexed;
    ASSERT_EQ(Nghttp2Inflate(inflater, block, &never_indexed), fields) << "block " << i;
    for (size_t f = 0; f < fields.size(); ++f) {
      const std::string& name = fields[f].first;
      const bool sensitive = name == "authorization" || name == "cookie" || name == "set-cookie";
      EXPECT_EQ(never_indexed[f], sensitive) << name;
    }
  }
  EXPECT_GT(changes, 100);
  nghttp2_hd_inflate_del(inflater);
}

TEST(HpackNghttp2, LoweredThenRaisedSizeAnnouncesTheSmallestFirst) {
  nghttp2_hd_inflater* inflater = nullptr;
  ASSERT_EQ(nghttp2_hd_inflate_new(&inflater), 0);
  Encoder encoder;
  std::string block;
  encoder.BeginBlock(&block);
  encoder.Add("x-name", "value", &block);
  EXPECT_EQ(Nghttp2Inflate(inflater, block, nullptr), (Fields{{"x-name", "value"}}));
  for (uint32_t size : {100u, 4096u}) {
    ASSERT_EQ(nghttp2_hd_inflate_change_table_size(inflater, size), 0);
    encoder.SetPeerMaxTableSize(size);
  }
  block.clear();
  encoder.BeginBlock(&block);
  EXPECT_EQ(block, Hex("3f 45 3f e1 1f"));  // 100, then 4096
  encoder.Add("x-name", "value", &block);
  EXPECT_EQ(Nghttp2Inflate(inflater, block, nullptr), (Fields{{"x-name", "value"}}));
  nghttp2_hd_inflate_del(inflater);
}

}  // namespace
}  // namespace mf::http2::hpack
