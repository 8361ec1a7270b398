// Fuzzes the TensorProto decoder on arbitrary protobuf bytes. A decoded tensor must re-encode
// and decode to the same tensor in both encodings.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "server/codec/tensor_proto.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tensorflow::TensorProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto tensor = mf::codec::TensorFromProto(proto);
  if (!tensor.ok()) {
    if (tensor.status().code() != mf::StatusCode::kInvalidArgument &&
        tensor.status().code() != mf::StatusCode::kResourceExhausted) {
      std::abort();
    }
    return 0;
  }
  for (auto encoding : {mf::codec::TensorProtoEncoding::kTensorContent, mf::codec::TensorProtoEncoding::kTypedValues}) {
    tensorflow::TensorProto again;
    mf::codec::TensorToProto(*tensor, encoding, &again);
    auto back = mf::codec::TensorFromProto(again);
    if (!back.ok() || back->shape() != tensor->shape() || back->bytes() != tensor->bytes() ||
        back->strings() != tensor->strings()) {
      std::abort();
    }
  }
  return 0;
}
