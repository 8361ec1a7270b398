// The property SplitRawData must keep, checked against protobuf itself: the structure parses
// exactly when the original does, each split span holds the bytes protobuf reads as that
// initializer's raw_data, and the structure is the original message with those raw_data fields
// cleared. Shared by raw_data_split_test and the fuzzer; returns an empty string when it holds.
#pragma once

#include <google/protobuf/util/message_differencer.h>
#include <onnx/onnx_pb.h>

#include <string>
#include <string_view>

#include "runtime/graph/raw_data_split.h"

namespace mf::runtime::testing {

inline std::string CheckSplit(std::string_view bytes, const SplitModel& split) {
  onnx::ModelProto original, structure;
  const bool original_ok = original.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  const bool structure_ok = structure.ParseFromString(split.structure);
  if (original_ok != structure_ok) {
    return std::string("the original ") + (original_ok ? "parses" : "does not parse") + " but the structure " +
           (structure_ok ? "does" : "does not");
  }
  if (!original_ok) return "";
  for (const auto& [index, span] : split.raw_data) {
    if (index < 0 || index >= original.graph().initializer_size()) return "span for a missing initializer";
    if (span.offset > bytes.size() || span.length > bytes.size() - span.offset) return "span outside the input";
    onnx::TensorProto* tensor = original.mutable_graph()->mutable_initializer(index);
    if (!tensor->has_raw_data() || tensor->raw_data() != bytes.substr(span.offset, span.length)) {
      return "span of initializer " + std::to_string(index) + " is not its raw_data";
    }
    if (structure.graph().initializer(index).has_raw_data()) return "the structure kept a split raw_data";
    tensor->clear_raw_data();
  }
  std::string differences;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  if (!differencer.Compare(original, structure)) return "the structure differs: " + differences;
  return "";
}

inline ReadAt ReadFrom(std::string_view bytes) {
  return [bytes](uint64_t offset, size_t n, char* out) {
    if (offset > bytes.size() || n > bytes.size() - offset) return false;
    bytes.copy(out, n, static_cast<size_t>(offset));
    return true;
  };
}

}  // namespace mf::runtime::testing
