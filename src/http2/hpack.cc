#include "http2/hpack.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace mf::http2::hpack {
namespace {

struct StaticEntry {
  std::string_view name;
  std::string_view value;
};

// RFC 7541 Appendix A; index i + 1 is kStaticTable[i].
constexpr std::array<StaticEntry, 61> kStaticTable = {{
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
}};
constexpr size_t kStaticCount = kStaticTable.size();

// The static table's indexes ordered by name length, so that the encoder compares a name only with
// the entries of its length.
struct StaticByLength {
  std::array<uint8_t, kStaticCount> order{};  // 0-based static indexes
  std::array<uint8_t, 32> first{};            // first position in `order` of names of length n
  std::array<uint8_t, 32> end{};              // one past the last
};
constexpr StaticByLength MakeStaticByLength() {
  StaticByLength s;
  size_t next = 0;
  for (size_t length = 0; length < 32; ++length) {
    s.first[length] = static_cast<uint8_t>(next);
    for (size_t i = 0; i < kStaticCount; ++i) {
      if (kStaticTable[i].name.size() == length) s.order[next++] = static_cast<uint8_t>(i);
    }
    s.end[length] = static_cast<uint8_t>(next);
  }
  return s;
}
constexpr StaticByLength kStaticByLength = MakeStaticByLength();
static_assert(kStaticByLength.end[31] == kStaticCount, "every static name is shorter than 32 bytes");

// The static entry (1-based) with this name and value, or with this name only; 0 when none.
struct StaticMatch {
  size_t full = 0;
  size_t name = 0;
};
StaticMatch FindStatic(std::string_view name, std::string_view value) {
  StaticMatch match;
  if (name.size() >= kStaticByLength.first.size()) return match;
  for (size_t k = kStaticByLength.first[name.size()]; k < kStaticByLength.end[name.size()]; ++k) {
    const StaticEntry& entry = kStaticTable[kStaticByLength.order[k]];
    if (entry.name != name) continue;
    if (match.name == 0) match.name = kStaticByLength.order[k] + 1;
    if (entry.value == value) {
      match.full = kStaticByLength.order[k] + 1;
      return match;
    }
  }
  return match;
}

// RFC 7541 Appendix B: the Huffman code of each symbol (256 is EOS), right-aligned in `code`.
struct HuffmanCode {
  uint32_t code;
  uint8_t bits;
};
constexpr std::array<HuffmanCode, 257> kHuffmanCodes = {{
    {0x1ff8, 13},    {0x7fffd8, 23},   {0xfffffe2, 28}, {0xfffffe3, 28}, {0xfffffe4, 28},  {0xfffffe5, 28},
    {0xfffffe6, 28}, {0xfffffe7, 28},  {0xfffffe8, 28}, {0xffffea, 24},  {0x3ffffffc, 30}, {0xfffffe9, 28},
    {0xfffffea, 28}, {0x3ffffffd, 30}, {0xfffffeb, 28}, {0xfffffec, 28}, {0xfffffed, 28},  {0xfffffee, 28},
    {0xfffffef, 28}, {0xffffff0, 28},  {0xffffff1, 28}, {0xffffff2, 28}, {0x3ffffffe, 30}, {0xffffff3, 28},
    {0xffffff4, 28}, {0xffffff5, 28},  {0xffffff6, 28}, {0xffffff7, 28}, {0xffffff8, 28},  {0xffffff9, 28},
    {0xffffffa, 28}, {0xffffffb, 28},  {0x14, 6},       {0x3f8, 10},     {0x3f9, 10},      {0xffa, 12},
    {0x1ff9, 13},    {0x15, 6},        {0xf8, 8},       {0x7fa, 11},     {0x3fa, 10},      {0x3fb, 10},
    {0xf9, 8},       {0x7fb, 11},      {0xfa, 8},       {0x16, 6},       {0x17, 6},        {0x18, 6},
    {0x0, 5},        {0x1, 5},         {0x2, 5},        {0x19, 6},       {0x1a, 6},        {0x1b, 6},
    {0x1c, 6},       {0x1d, 6},        {0x1e, 6},       {0x1f, 6},       {0x5c, 7},        {0xfb, 8},
    {0x7ffc, 15},    {0x20, 6},        {0xffb, 12},     {0x3fc, 10},     {0x1ffa, 13},     {0x21, 6},
    {0x5d, 7},       {0x5e, 7},        {0x5f, 7},       {0x60, 7},       {0x61, 7},        {0x62, 7},
    {0x63, 7},       {0x64, 7},        {0x65, 7},       {0x66, 7},       {0x67, 7},        {0x68, 7},
    {0x69, 7},       {0x6a, 7},        {0x6b, 7},       {0x6c, 7},       {0x6d, 7},        {0x6e, 7},
    {0x6f, 7},       {0x70, 7},        {0x71, 7},       {0x72, 7},       {0xfc, 8},        {0x73, 7},
    {0xfd, 8},       {0x1ffb, 13},     {0x7fff0, 19},   {0x1ffc, 13},    {0x3ffc, 14},     {0x22, 6},
    {0x7ffd, 15},    {0x3, 5},         {0x23, 6},       {0x4, 5},        {0x24, 6},        {0x5, 5},
    {0x25, 6},       {0x26, 6},        {0x27, 6},       {0x6, 5},        {0x74, 7},        {0x75, 7},
    {0x28, 6},       {0x29, 6},        {0x2a, 6},       {0x7, 5},        {0x2b, 6},        {0x76, 7},
    {0x2c, 6},       {0x8, 5},         {0x9, 5},        {0x2d, 6},       {0x77, 7},        {0x78, 7},
    {0x79, 7},       {0x7a, 7},        {0x7b, 7},       {0x7ffe, 15},    {0x7fc, 11},      {0x3ffd, 14},
    {0x1ffd, 13},    {0xffffffc, 28},  {0xfffe6, 20},   {0x3fffd2, 22},  {0xfffe7, 20},    {0xfffe8, 20},
    {0x3fffd3, 22},  {0x3fffd4, 22},   {0x3fffd5, 22},  {0x7fffd9, 23},  {0x3fffd6, 22},   {0x7fffda, 23},
    {0x7fffdb, 23},  {0x7fffdc, 23},   {0x7fffdd, 23},  {0x7fffde, 23},  {0xffffeb, 24},   {0x7fffdf, 23},
    {0xffffec, 24},  {0xffffed, 24},   {0x3fffd7, 22},  {0x7fffe0, 23},  {0xffffee, 24},   {0x7fffe1, 23},
    {0x7fffe2, 23},  {0x7fffe3, 23},   {0x7fffe4, 23},  {0x1fffdc, 21},  {0x3fffd8, 22},   {0x7fffe5, 23},
    {0x3fffd9, 22},  {0x7fffe6, 23},   {0x7fffe7, 23},  {0xffffef, 24},  {0x3fffda, 22},   {0x1fffdd, 21},
    {0xfffe9, 20},   {0x3fffdb, 22},   {0x3fffdc, 22},  {0x7fffe8, 23},  {0x7fffe9, 23},   {0x1fffde, 21},
    {0x7fffea, 23},  {0x3fffdd, 22},   {0x3fffde, 22},  {0xfffff0, 24},  {0x1fffdf, 21},   {0x3fffdf, 22},
    {0x7fffeb, 23},  {0x7fffec, 23},   {0x1fffe0, 21},  {0x1fffe1, 21},  {0x3fffe0, 22},   {0x1fffe2, 21},
    {0x7fffed, 23},  {0x3fffe1, 22},   {0x7fffee, 23},  {0x7fffef, 23},  {0xfffea, 20},    {0x3fffe2, 22},
    {0x3fffe3, 22},  {0x3fffe4, 22},   {0x7ffff0, 23},  {0x3fffe5, 22},  {0x3fffe6, 22},   {0x7ffff1, 23},
    {0x3ffffe0, 26}, {0x3ffffe1, 26},  {0xfffeb, 20},   {0x7fff1, 19},   {0x3fffe7, 22},   {0x7ffff2, 23},
    {0x3fffe8, 22},  {0x1ffffec, 25},  {0x3ffffe2, 26}, {0x3ffffe3, 26}, {0x3ffffe4, 26},  {0x7ffffde, 27},
    {0x7ffffdf, 27}, {0x3ffffe5, 26},  {0xfffff1, 24},  {0x1ffffed, 25}, {0x7fff2, 19},    {0x1fffe3, 21},
    {0x3ffffe6, 26}, {0x7ffffe0, 27},  {0x7ffffe1, 27}, {0x3ffffe7, 26}, {0x7ffffe2, 27},  {0xfffff2, 24},
    {0x1fffe4, 21},  {0x1fffe5, 21},   {0x3ffffe8, 26}, {0x3ffffe9, 26}, {0xffffffd, 28},  {0x7ffffe3, 27},
    {0x7ffffe4, 27}, {0x7ffffe5, 27},  {0xfffec, 20},   {0xfffff3, 24},  {0xfffed, 20},    {0x1fffe6, 21},
    {0x3fffe9, 22},  {0x1fffe7, 21},   {0x1fffe8, 21},  {0x7ffff3, 23},  {0x3fffea, 22},   {0x3fffeb, 22},
    {0x1ffffee, 25}, {0x1ffffef, 25},  {0xfffff4, 24},  {0xfffff5, 24},  {0x3ffffea, 26},  {0x7ffff4, 23},
    {0x3ffffeb, 26}, {0x7ffffe6, 27},  {0x3ffffec, 26}, {0x3ffffed, 26}, {0x7ffffe7, 27},  {0x7ffffe8, 27},
    {0x7ffffe9, 27}, {0x7ffffea, 27},  {0x7ffffeb, 27}, {0xffffffe, 28}, {0x7ffffec, 27},  {0x7ffffed, 27},
    {0x7ffffee, 27}, {0x7ffffef, 27},  {0x7fffff0, 27}, {0x3ffffee, 26}, {0x3fffffff, 30},
}};
constexpr size_t kEos = 256;
constexpr int kMinCodeBits = 5;
constexpr int kMaxCodeBits = 30;

// The code is canonical (codes of one length are consecutive, in symbol order, and each length
// continues where the shorter ones left off), so decoding needs per length only the first code,
// how many codes there are, and where their symbols start in the symbols sorted by (length, symbol).
struct HuffmanDecodeTables {
  std::array<uint32_t, kMaxCodeBits + 1> first_code{};
  std::array<uint32_t, kMaxCodeBits + 1> count{};
  std::array<uint16_t, kMaxCodeBits + 1> first_symbol{};  // position in `symbols`
  std::array<uint16_t, 257> symbols{};
  // The first 8 bits of input -> the symbol whose code they start with, when that code has at
  // most 8 bits (bits == 0 otherwise): most header text decodes here.
  struct Fast {
    uint16_t symbol;
    uint8_t bits;
  };
  std::array<Fast, 256> fast{};
  bool canonical = true;
  uint64_t kraft_sum = 0;  // sum of 2^(30 - bits): 2^30 for a complete prefix code
};
constexpr HuffmanDecodeTables MakeHuffmanDecodeTables() {
  HuffmanDecodeTables t;
  uint16_t position = 0;
  uint32_t code = 0;
  for (int bits = 1; bits <= kMaxCodeBits; ++bits) {
    code <<= 1;
    t.first_code[bits] = code;
    t.first_symbol[bits] = position;
    for (size_t symbol = 0; symbol < kHuffmanCodes.size(); ++symbol) {
      if (kHuffmanCodes[symbol].bits != bits) continue;
      if (kHuffmanCodes[symbol].code != code) t.canonical = false;
      t.symbols[position++] = static_cast<uint16_t>(symbol);
      ++t.count[bits];
      ++code;
      t.kraft_sum += uint64_t{1} << (kMaxCodeBits - bits);
    }
  }
  for (size_t symbol = 0; symbol < kHuffmanCodes.size(); ++symbol) {
    const HuffmanCode& c = kHuffmanCodes[symbol];
    if (c.bits > 8) continue;
    const uint32_t low = c.code << (8 - c.bits);
    for (uint32_t b = low; b < low + (1u << (8 - c.bits)); ++b) {
      t.fast[b] = {static_cast<uint16_t>(symbol), c.bits};
    }
  }
  return t;
}
constexpr HuffmanDecodeTables kHuffman = MakeHuffmanDecodeTables();
static_assert(kHuffman.canonical, "RFC 7541 Appendix B's code is canonical: a code in kHuffmanCodes is mistyped");
static_assert(kHuffman.kraft_sum == uint64_t{1} << kMaxCodeBits, "kHuffmanCodes is not a complete prefix code");

// Decodes a Huffman string (RFC 7541 5.2) into *out (replacing its contents).
Status HuffmanDecode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size() * 8 / kMinCodeBits + 1);
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  const uint8_t* const end = p + in.size();
  uint64_t bits = 0;  // the low `available` bits are unread input
  int available = 0;
  while (true) {
    while (available <= 56 && p < end) {
      bits = (bits << 8) | *p++;
      available += 8;
    }
    if (available == 0) return Status::Ok();
    size_t symbol = 0;
    int length = 0;
    if (available >= 8) {
      const auto& fast = kHuffman.fast[(bits >> (available - 8)) & 0xff];
      symbol = fast.symbol;
      length = fast.bits;
    }
    if (length == 0) {
      for (int n = available >= 8 ? 9 : kMinCodeBits; n <= kMaxCodeBits && n <= available; ++n) {
        const uint32_t code = static_cast<uint32_t>((bits >> (available - n)) & ((uint64_t{1} << n) - 1));
        if (code - kHuffman.first_code[n] < kHuffman.count[n]) {
          symbol = kHuffman.symbols[kHuffman.first_symbol[n] + (code - kHuffman.first_code[n])];
          length = n;
          break;
        }
      }
    }
    if (length == 0) {
      // No whole code left: what remains is padding, which must be a prefix of EOS (all ones)
      // shorter than 8 bits. Neither condition can hold with input left, since >= 30 bits are loaded.
      if (available > 7) {
        return InvalidArgument("HPACK: Huffman string ends in " + std::to_string(available) +
                               " bits of padding (at most 7 are allowed)");
      }
      const uint64_t mask = (uint64_t{1} << available) - 1;
      if ((bits & mask) != mask) return InvalidArgument("HPACK: Huffman string's padding is not all ones");
      return Status::Ok();
    }
    if (symbol == kEos) return InvalidArgument("HPACK: Huffman string contains the EOS symbol");
    out->push_back(static_cast<char>(symbol));
    available -= length;
  }
}

// Reads an integer with an N-bit prefix (RFC 7541 5.1) at *pos, which points at the prefix byte.
// Values that need more than 32 bits are rejected: no legitimate length or index comes close.
Status ReadInteger(std::string_view block, size_t* pos, int prefix_bits, uint64_t* value) {
  const uint8_t max_prefix = static_cast<uint8_t>((1u << prefix_bits) - 1);
  uint64_t v = static_cast<uint8_t>(block[(*pos)++]) & max_prefix;
  if (v < max_prefix) {
    *value = v;
    return Status::Ok();
  }
  for (int shift = 0;; shift += 7) {
    if (*pos >= block.size()) return InvalidArgument("HPACK: header block ends inside an integer");
    if (shift > 28) return InvalidArgument("HPACK: integer is longer than 32 bits");
    const uint8_t b = static_cast<uint8_t>(block[(*pos)++]);
    v += uint64_t{b & 0x7fu} << shift;
    if (v > UINT32_MAX) return InvalidArgument("HPACK: integer is larger than 2^32 - 1");
    if ((b & 0x80) == 0) break;
  }
  *value = v;
  return Status::Ok();
}

void WriteInteger(uint8_t first_byte_flags, int prefix_bits, uint64_t value, std::string* out) {
  const uint8_t max_prefix = static_cast<uint8_t>((1u << prefix_bits) - 1);
  if (value < max_prefix) {
    out->push_back(static_cast<char>(first_byte_flags | value));
    return;
  }
  out->push_back(static_cast<char>(first_byte_flags | max_prefix));
  value -= max_prefix;
  while (value >= 0x80) {
    out->push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

void WriteRawString(std::string_view s, std::string* out) {
  WriteInteger(0x00, 7, s.size(), out);  // H = 0: no Huffman
  out->append(s);
}

// A literal field (RFC 7541 6.2) with its representation's flags, naming a table entry or not.
void WriteLiteral(uint8_t flags, int prefix_bits, size_t name_index, std::string_view name, std::string_view value,
                  std::string* out) {
  WriteInteger(flags, prefix_bits, name_index, out);
  if (name_index == 0) WriteRawString(name, out);
  WriteRawString(value, out);
}

// Fields whose values must never enter a table (RFC 7541 7.1.3): credentials an attacker could
// probe for through compression ratios.
bool IsSensitive(std::string_view name) {
  return name == "authorization" || name == "cookie" || name == "set-cookie" || name == "proxy-authorization";
}

// Fields larger than this go out without indexing: they would evict the small repeating ones.
constexpr size_t kMaxIndexedFieldBytes = 512;

}  // namespace

// ---- DynamicTable ----

std::string_view DynamicTable::name(size_t i) const {
  const Slot& s = slot(i);
  return std::string_view(s.bytes).substr(0, s.name_size);
}

std::string_view DynamicTable::value(size_t i) const {
  const Slot& s = slot(i);
  return std::string_view(s.bytes).substr(s.name_size);
}

void DynamicTable::EvictOldest() {
  const Slot& oldest = slot(count_ - 1);
  bytes_ -= EntrySize(oldest.name_size, oldest.bytes.size() - oldest.name_size);
  --count_;
}

void DynamicTable::SetMaxBytes(size_t max_bytes) {
  max_bytes_ = max_bytes;
  while (bytes_ > max_bytes_) EvictOldest();
}

void DynamicTable::Grow() {
  std::vector<Slot> bigger(ring_.empty() ? 16 : ring_.size() * 2);
  // Oldest first, so that entry 0 (the newest) lands at count_ - 1.
  for (size_t i = 0; i < count_; ++i) bigger[count_ - 1 - i] = std::move(ring_[(newest_ - i) & (ring_.size() - 1)]);
  ring_ = std::move(bigger);
  newest_ = count_ - 1;  // wraps for an empty table, which the mask undoes
}

void DynamicTable::Add(std::string_view name, std::string_view value) {
  const size_t size = EntrySize(name.size(), value.size());
  if (size > max_bytes_) {
    count_ = 0;
    bytes_ = 0;
    return;
  }
  // Copied out first: name or value may point into the slot this entry is about to take over.
  scratch_.assign(name);
  scratch_.append(value);
  while (bytes_ + size > max_bytes_) EvictOldest();
  if (count_ == ring_.size()) Grow();
  newest_ = (newest_ + 1) & (ring_.size() - 1);
  Slot& s = ring_[newest_];
  s.bytes.swap(scratch_);
  s.name_size = name.size();
  ++count_;
  bytes_ += size;
}

// ---- Decoder ----

Decoder::Decoder(size_t max_table_bytes) : max_table_bytes_(max_table_bytes), table_(max_table_bytes) {}

size_t Decoder::table_bytes() const { return table_.bytes(); }

Status Decoder::LookUp(uint64_t index, std::string_view* name, std::string_view* value) const {
  if (index == 0) return InvalidArgument("HPACK: index 0 is not a table entry");
  if (index <= kStaticCount) {
    *name = kStaticTable[index - 1].name;
    *value = kStaticTable[index - 1].value;
    return Status::Ok();
  }
  const uint64_t dynamic = index - kStaticCount - 1;
  if (dynamic >= table_.count()) {
    return InvalidArgument("HPACK: index " + std::to_string(index) + " is past the tables (61 static + " +
                           std::to_string(table_.count()) + " dynamic entries)");
  }
  *name = table_.name(dynamic);
  *value = table_.value(dynamic);
  return Status::Ok();
}

Status Decoder::ReadString(std::string_view block, size_t* pos, std::string* buffer, std::string_view* out) {
  if (*pos >= block.size()) return InvalidArgument("HPACK: header block ends before a string literal");
  const bool huffman = (static_cast<uint8_t>(block[*pos]) & 0x80) != 0;
  uint64_t length = 0;
  if (Status s = ReadInteger(block, pos, 7, &length); !s.ok()) return s;
  if (length > block.size() - *pos) {
    return InvalidArgument("HPACK: string literal of " + std::to_string(length) + " bytes runs past the block (" +
                           std::to_string(block.size() - *pos) + " bytes left)");
  }
  const std::string_view raw = block.substr(*pos, length);
  *pos += length;
  if (!huffman) {
    *out = raw;
    return Status::Ok();
  }
  if (Status s = HuffmanDecode(raw, buffer); !s.ok()) return s;
  *out = *buffer;
  return Status::Ok();
}

Status Decoder::Decode(std::string_view block, FieldSink& sink) {
  bool seen_field = false;
  size_t pos = 0;
  while (pos < block.size()) {
    const uint8_t first = static_cast<uint8_t>(block[pos]);
    uint64_t index = 0;
    std::string_view name;
    std::string_view value;
    if (first & 0x80) {  // 6.1 indexed field
      if (Status s = ReadInteger(block, &pos, 7, &index); !s.ok()) return s;
      if (Status s = LookUp(index, &name, &value); !s.ok()) return s;
      sink.OnField(name, value);
      seen_field = true;
      continue;
    }
    if ((first & 0xe0) == 0x20) {  // 6.3 dynamic table size update
      if (seen_field) return InvalidArgument("HPACK: dynamic table size update after a field (only at block start)");
      uint64_t size = 0;
      if (Status s = ReadInteger(block, &pos, 5, &size); !s.ok()) return s;
      if (size > max_table_bytes_) {
        return InvalidArgument("HPACK: dynamic table size update to " + std::to_string(size) +
                               " bytes is above the advertised SETTINGS_HEADER_TABLE_SIZE of " +
                               std::to_string(max_table_bytes_));
      }
      table_.SetMaxBytes(size);
      continue;
    }
    // 6.2 literal: with incremental indexing (01, 6-bit index), without indexing (0000) or never
    // indexed (0001), both with a 4-bit index.
    const bool indexing = (first & 0xc0) == 0x40;
    if (Status s = ReadInteger(block, &pos, indexing ? 6 : 4, &index); !s.ok()) return s;
    if (index == 0) {
      if (Status s = ReadString(block, &pos, &name_buffer_, &name); !s.ok()) return s;
    } else {
      std::string_view unused;
      if (Status s = LookUp(index, &name, &unused); !s.ok()) return s;
    }
    if (Status s = ReadString(block, &pos, &value_buffer_, &value); !s.ok()) return s;
    sink.OnField(name, value);
    seen_field = true;
    if (indexing) table_.Add(name, value);
  }
  return Status::Ok();
}

// ---- Encoder ----

void Encoder::SetPeerMaxTableSize(uint32_t bytes) {
  const size_t size = std::min<size_t>(bytes, kMaxTableBytes);
  if (!size_update_pending_) {
    if (size == table_.max_bytes()) return;
    smallest_pending_size_ = size;
  }
  size_update_pending_ = true;
  smallest_pending_size_ = std::min(smallest_pending_size_, size);
  pending_size_ = size;
}

void Encoder::BeginBlock(std::string* out) {
  if (!size_update_pending_) return;
  size_update_pending_ = false;
  if (smallest_pending_size_ < pending_size_) {
    WriteInteger(0x20, 5, smallest_pending_size_, out);
    table_.SetMaxBytes(smallest_pending_size_);
  }
  WriteInteger(0x20, 5, pending_size_, out);
  table_.SetMaxBytes(pending_size_);
}

void Encoder::Add(std::string_view name, std::string_view value, std::string* out) {
  const StaticMatch in_static = FindStatic(name, value);
  if (IsSensitive(name)) {
    // Never indexed, even when the static table holds the field: the peer's decoder and any
    // intermediary must not index it either (RFC 7541 6.2.3).
    WriteLiteral(0x10, 4, in_static.name, name, value, out);
    return;
  }
  if (in_static.full != 0) {
    WriteInteger(0x80, 7, in_static.full, out);
    return;
  }
  size_t name_index = in_static.name;
  for (size_t i = 0; i < table_.count(); ++i) {
    if (table_.name(i) != name) continue;
    if (table_.value(i) == value) {
      WriteInteger(0x80, 7, kStaticCount + 1 + i, out);
      return;
    }
    if (name_index == 0) name_index = kStaticCount + 1 + i;
  }
  if (name.size() + value.size() > kMaxIndexedFieldBytes ||
      DynamicTable::EntrySize(name.size(), value.size()) > table_.max_bytes()) {
    WriteLiteral(0x00, 4, name_index, name, value, out);  // without indexing
    return;
  }
  WriteLiteral(0x40, 6, name_index, name, value, out);  // with incremental indexing
  table_.Add(name, value);
}

}  // namespace mf::http2::hpack
