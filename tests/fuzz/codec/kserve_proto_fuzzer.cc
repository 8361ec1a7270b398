// Fuzzes the KServe v2 gRPC input decoder (typed contents and raw_input_contents).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "server/codec/kserve_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto inputs = mf::codec::InputsFromModelInferRequest(request);
  if (!inputs.ok()) {
    if (inputs.status().code() != mf::StatusCode::kInvalidArgument &&
        inputs.status().code() != mf::StatusCode::kResourceExhausted) {
      std::abort();
    }
    return 0;
  }
  std::vector<mf::codec::NamedTensorView> views;
  for (const auto& input : *inputs) views.push_back({input.name, &input.tensor});
  inference::ModelInferResponse response;
  mf::codec::AddOutputsToModelInferResponse(views, mf::codec::V2OutputEncoding::kContents, &response);
  return 0;
}
