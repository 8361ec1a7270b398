// Splits a serialized onnx.ModelProto into its structure and its large initializer payloads.
//
// Parsing a model the usual way copies every initializer's raw_data into a std::string, which
// the loader then copies into the tensor: a load faults in the weights twice, and the first copy
// is the one that sets its peak memory. Split out, protobuf parses only the structure (the model
// re-encoded without those raw_data fields), and each payload goes straight from the model file
// into its tensor, as external data does. Only the top-level graph's initializers are split; any
// input this does not fully understand gives nullopt, and the caller parses it whole as before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

namespace mf::runtime {

struct ByteSpan {
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct SplitModel {
  std::string structure;                       // the ModelProto without the split raw_data fields
  std::unordered_map<int, ByteSpan> raw_data;  // graph.initializer index -> where its raw_data lies
};

// Reads `n` bytes at `offset` of the serialized model into `out`; false on a short read.
using ReadAt = std::function<bool(uint64_t offset, size_t n, char* out)>;

// Splits out the raw_data of initializers of at least `min_bytes`, when that leaves a structure
// of at most `max_structure_bytes` (so a model whose weights are not in raw_data is not held
// whole in memory on top of its parse). A tensor that also names external data keeps its
// raw_data (the loader reports the conflict as before).
std::optional<SplitModel> SplitRawData(uint64_t size, const ReadAt& read, uint64_t min_bytes,
                                       uint64_t max_structure_bytes);

}  // namespace mf::runtime
