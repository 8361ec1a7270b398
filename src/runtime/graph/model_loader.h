// Parses an ONNX ModelProto into a Graph and checks that it is well formed: SSA values, no
// cycles, no dangling inputs, initializers whose data matches their declared shape, external
// data that stays inside the model directory. Every refusal names the node or value and why.
// Operator support is not checked here; the backend does that when it binds kernels.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/graph/graph.h"

namespace mf::runtime {

// The largest model file we read (protobuf cannot parse messages of 2 GiB or more).
inline constexpr size_t kMaxModelFileBytes = size_t{2} << 30;
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 18;

StatusOr<Graph> LoadModelFile(const std::string& path);
// `model_dir` resolves external data ("" refuses it).
StatusOr<Graph> LoadModelBytes(std::string_view bytes, const std::string& model_dir);

}  // namespace mf::runtime
