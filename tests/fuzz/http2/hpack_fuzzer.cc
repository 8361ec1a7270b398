// Arbitrary bytes through the HPACK decoder (src/http2/hpack.cc) as one connection's header blocks,
// so that the dynamic table carries over: each block is a length byte and that many bytes (a length
// byte of 0xff instead sets the encoder's peer table size from the next two bytes). Every block the
// decoder accepts is re-encoded with our Encoder and must decode back to the same fields.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http2/hpack.h"

namespace {

class CollectingSink : public mf::http2::hpack::FieldSink {
 public:
  void OnField(std::string_view name, std::string_view value) override { fields.emplace_back(name, value); }
  std::vector<std::pair<std::string, std::string>> fields;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  mf::http2::hpack::Decoder decoder;
  mf::http2::hpack::Encoder encoder;
  mf::http2::hpack::Decoder round_trip;
  std::string encoded;
  size_t pos = 0;
  while (pos < size) {
    const uint8_t control = data[pos++];
    if (control == 0xff) {
      if (size - pos < 2) break;
      encoder.SetPeerMaxTableSize(static_cast<uint32_t>(data[pos] << 8 | data[pos + 1]));
      pos += 2;
      continue;
    }
    const std::string_view block = input.substr(pos, control);
    pos += block.size();
    CollectingSink decoded;
    if (!decoder.Decode(block, decoded).ok()) break;  // a COMPRESSION_ERROR ends the connection
    if (decoder.table_bytes() > 4096) std::abort();

    encoded.clear();
    encoder.BeginBlock(&encoded);
    for (const auto& [name, value] : decoded.fields) encoder.Add(name, value, &encoded);
    CollectingSink again;
    if (!round_trip.Decode(encoded, again).ok()) std::abort();
    if (again.fields != decoded.fields) std::abort();
  }
  return 0;
}
