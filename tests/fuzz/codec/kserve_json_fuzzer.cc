// Fuzzes the KServe v2 JSON (+ binary extension) parser. The first two bytes pick the
// Inference-Header-Content-Length (0xFFFF: absent), the rest is the body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/codec/kserve_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t header = size_t{data[0]} | (size_t{data[1]} << 8);
  std::string_view body(reinterpret_cast<const char*>(data + 2), size - 2);
  std::optional<size_t> json_length;
  if (header != 0xFFFF) json_length = header;
  auto request = mf::codec::ParseV2InferRequest(body, json_length);
  if (!request.ok()) {
    if (request.status().code() != mf::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  std::vector<mf::codec::NamedTensorView> views;
  for (const auto& input : request->inputs) views.push_back({input.name, &input.tensor});
  // std::vector<bool> has no contiguous storage to make a span of.
  std::unique_ptr<bool[]> binary(new bool[views.size()]);
  for (size_t i = 0; i < views.size(); ++i) binary[i] = request->binary_data_output;
  (void)mf::codec::WriteV2InferResponse("m", "1", request->id, views, {binary.get(), views.size()});
  return 0;
}
