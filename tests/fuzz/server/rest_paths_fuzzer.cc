// Fuzzes the /v1 and /v2 URL grammars with arbitrary method + path bytes: no crash, no UB,
// and every accepted path names a model.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/rest/rest_paths.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // First byte picks the method, the rest is the path.
  std::string_view method = !input.empty() && (input[0] & 1) ? "POST" : "GET";
  std::string_view path = input.empty() ? input : input.substr(1);
  auto v1 = mf::server::rest::ParseTfServingPath(method, path);
  if (v1.ok() && v1->model.empty()) std::abort();
  auto v2 = mf::server::rest::ParseV2Path(method, path);
  (void)v2;
  (void)mf::server::rest::PercentDecode(path);
  return 0;
}
