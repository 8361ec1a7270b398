// Fuzzes SplitRawData (runtime/graph/raw_data_split.h) differentially: whatever the bytes, it
// must not crash, and where it splits, protobuf must read the structure and the spans exactly as
// it reads the original (raw_data_split_check.h). Payloads of 4 bytes and more are split, so
// small inputs exercise every path.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tests/unit/runtime/raw_data_split_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto split = mf::runtime::SplitRawData(size, mf::runtime::testing::ReadFrom(bytes), 4, size + 64);
  if (!split) return 0;
  const std::string problem = mf::runtime::testing::CheckSplit(bytes, *split);
  if (!problem.empty()) {
    std::fprintf(stderr, "SplitRawData broke the model: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
