// Fuzzes the ONNX model loader end to end: protobuf parsing, graph validation, type binding,
// constant folding, fusion and the batch-1 warm-up run that Session::LoadFromBytes performs.
// Any input must give a Status, never a crash, hang or unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/session.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mf::runtime::SessionOptions options;
  options.threads = 1;
  auto session =
      mf::runtime::Session::LoadFromBytes(std::string_view(reinterpret_cast<const char*>(data), size), "", options);
  if (session.ok()) (void)(*session)->memory_bytes();
  return 0;
}
