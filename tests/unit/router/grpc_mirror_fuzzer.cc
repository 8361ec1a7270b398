// Fuzzes the comparison of a gRPC call's primary and mirrored answers (both untrusted bytes from
// upstream pods): no crash, no UB, no leak, and the verdict does not depend on which answer is
// the primary. The first byte picks the method (even: TF Serving Predict, odd: KServe ModelInfer);
// the rest is split in two halves, the two answers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/router/grpc_mirror_compare.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf::router;
  if (size == 0) return 0;
  const char* path =
      data[0] % 2 == 0 ? "/tensorflow.serving.PredictionService/Predict" : "/inference.GRPCInferenceService/ModelInfer";
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string_view a = rest.substr(0, rest.size() / 2);
  const std::string_view b = rest.substr(rest.size() / 2);
  if (GrpcResponsesAgree(path, 0, a, 0, b) != GrpcResponsesAgree(path, 0, b, 0, a)) std::abort();
  if (!GrpcResponsesAgree(path, 0, a, 0, a)) std::abort();
  return 0;
}
