// Fuzzes the TF Serving REST predict body parser; whatever it accepts must write back out.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_signatures.h"
#include "server/codec/rest_predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto signatures = mf::codec::fuzz::Signatures();
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto request = mf::codec::ParseRestPredictRequest(body, signatures);
  if (!request.ok()) {
    if (request.status().code() != mf::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (request->inputs.size() != request->signature->inputs.size()) std::abort();
  std::vector<mf::codec::NamedTensorView> views;
  for (size_t i = 0; i < request->inputs.size(); ++i) {
    views.push_back({request->signature->inputs[i].name, &request->inputs[i]});
  }
  std::string out;
  (void)mf::codec::WriteRestPredictResponse(request->format, views, &out);
  return 0;
}
