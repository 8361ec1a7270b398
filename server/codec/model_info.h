// Plain descriptions of a model that every wire format reports: the signature (named, typed,
// shaped inputs and outputs) and the lifecycle status of each version. The REST writers
// (rest_metadata.h, kserve_json.h) and the protobuf converters (tensor_proto.h) take these, so
// the REST and gRPC layers answer from the same values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/session.h"
#include "runtime/tensor.h"
#include "server/repository/version_state.h"

namespace mf::codec {

inline constexpr std::string_view kDefaultSignatureName = "serving_default";
inline constexpr std::string_view kPredictMethodName = "tensorflow/serving/predict";

// One signature of a model version. Inputs and outputs are in the model's declared order (the
// order Session::Run takes and returns them); a dim of -1 accepts any size.
struct ModelSignature {
  std::string name = std::string(kDefaultSignatureName);
  std::string method_name = std::string(kPredictMethodName);
  std::vector<runtime::TensorInfo> inputs;
  std::vector<runtime::TensorInfo> outputs;

  // Builds the default signature of a loaded model.
  static ModelSignature FromRuntime(const runtime::Signature& signature);
};

// A version's state and status are the repository's (server/repository/version_state.h); the
// codecs write them under TF Serving's names.
using ModelVersionState = server::VersionState;
using ModelVersionStatus = server::VersionStatus;

// "UNKNOWN", "START", "LOADING", "AVAILABLE", "UNLOADING", "END".
std::string_view ModelVersionStateName(ModelVersionState state);

}  // namespace mf::codec
