#include "server/codec/base64.h"

#include <array>
#include <cstdint>

namespace mf::codec {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<int8_t, 256> MakeReverse() {
  std::array<int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (int i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = static_cast<int8_t>(i);
  return table;
}
constexpr std::array<int8_t, 256> kReverse = MakeReverse();

}  // namespace

void Base64Encode(std::string_view bytes, std::string* out) {
  const auto* in = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  size_t pos = out->size();
  out->resize(pos + (n + 2) / 3 * 4);
  char* dst = out->data() + pos;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    *dst++ = kAlphabet[(v >> 18) & 63];
    *dst++ = kAlphabet[(v >> 12) & 63];
    *dst++ = kAlphabet[(v >> 6) & 63];
    *dst++ = kAlphabet[v & 63];
  }
  if (i < n) {
    uint32_t v = uint32_t{in[i]} << 16;
    if (i + 1 < n) v |= uint32_t{in[i + 1]} << 8;
    *dst++ = kAlphabet[(v >> 18) & 63];
    *dst++ = kAlphabet[(v >> 12) & 63];
    *dst++ = i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    *dst++ = '=';
  }
}

bool Base64Decode(std::string_view text, std::string* out) {
  size_t len = text.size();
  size_t padding = 0;
  if (len % 4 == 0 && len > 0) {
    if (text[len - 1] == '=') ++padding;
    if (text[len - 2] == '=') ++padding;
  } else if (len % 4 == 1) {
    return false;
  }
  size_t data_chars = len - padding;
  std::string decoded;
  decoded.reserve(data_chars * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < data_chars; ++i) {
    int8_t v = kReverse[static_cast<uint8_t>(text[i])];
    if (v < 0) return false;  // includes '=' in the middle
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      decoded.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  // Leftover bits must be zero (canonical encoding), and never a whole 6-bit group.
  if (bits >= 6 || (acc & ((1u << bits) - 1)) != 0) return false;
  out->append(decoded);
  return true;
}

}  // namespace mf::codec
