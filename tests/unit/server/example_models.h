// The example models the server's unit tests load, by path from the repository root (the tests'
// working directory under ctest).
#pragma once

namespace mf::server::testing {

inline constexpr char kDigitsV2[] = "examples/models/digits/2/model.onnx";

}  // namespace mf::server::testing
