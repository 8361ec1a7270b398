// Fuzzes the warm-up file reader (TFRecord framing, then PredictionLog records) and the tensors
// of the requests it yields. Errors must be DATA_LOSS or INVALID_ARGUMENT; any bytes framed as
// one record must split back to themselves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/codec/tensor_proto.h"
#include "server/codec/tfrecord.h"
#include "server/codec/warmup_records.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string framed = mf::codec::FrameTfRecord(bytes);
  auto split = mf::codec::SplitTfRecords(framed, 1);
  if (!split.ok() || split->size() != 1 || (*split)[0] != bytes) std::abort();

  auto requests = mf::codec::ParseWarmupRecords(bytes);
  if (!requests.ok()) {
    const mf::StatusCode code = requests.status().code();
    if (code != mf::StatusCode::kDataLoss && code != mf::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (const auto& request : *requests) {
    for (const auto& [name, proto] : request.inputs()) {
      auto tensor = mf::codec::TensorFromProto(proto);
      if (!tensor.ok() && tensor.status().code() != mf::StatusCode::kInvalidArgument &&
          tensor.status().code() != mf::StatusCode::kResourceExhausted) {
        std::abort();
      }
    }
  }
  return 0;
}
