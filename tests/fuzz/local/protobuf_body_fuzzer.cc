// libFuzzer entry point for the Kubernetes protobuf request-body decoder of modelfleet-local
// (DecodeKubernetesProtobuf). Any bytes must decode to a JSON object or give a clear error; a
// decoded object must serialize as the API server writes objects (strict UTF-8 dump), since it
// is stored and sent to watchers as JSON.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tools/local/apiserver/protobuf_body.h"

namespace {

void Check(bool invariant) {
  if (!invariant) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto object = mf::local::DecodeKubernetesProtobuf(body);
  if (!object.ok()) {
    Check(!object.status().message().empty());
    return 0;
  }
  Check(object->is_object());
  Check(object->contains("kind") && (*object)["kind"].is_string());
  Check(object->contains("apiVersion") && (*object)["apiVersion"].is_string());
  (void)object->dump();  // throws (and so aborts the fuzzer) on a string that is not UTF-8
  return 0;
}
