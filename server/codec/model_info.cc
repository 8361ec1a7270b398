#include "server/codec/model_info.h"

namespace mf::codec {

ModelSignature ModelSignature::FromRuntime(const runtime::Signature& signature) {
  ModelSignature result;
  result.inputs = signature.inputs;
  result.outputs = signature.outputs;
  return result;
}

std::string_view ModelVersionStateName(ModelVersionState state) {
  switch (state) {
    case ModelVersionState::kUnknown:
      return "UNKNOWN";
    case ModelVersionState::kStart:
      return "START";
    case ModelVersionState::kLoading:
      return "LOADING";
    case ModelVersionState::kAvailable:
      return "AVAILABLE";
    case ModelVersionState::kUnloading:
      return "UNLOADING";
    case ModelVersionState::kEnd:
      return "END";
  }
  return "UNKNOWN";
}

}  // namespace mf::codec
