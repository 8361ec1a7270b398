// Continue tokens come back from clients as query parameters: any bytes must decode to a token
// we could have issued or to a 400, and a decoded token must survive re-encoding unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tools/local/apiserver/list_pagination.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto token = mf::local::DecodeContinueToken(text);
  if (!token.ok()) {
    if (token.status().code() != mf::StatusCode::kFailedPrecondition) std::abort();
    return 0;
  }
  auto again = mf::local::DecodeContinueToken(mf::local::EncodeContinueToken(*token));
  if (!again.ok() || again->resource_version != token->resource_version || again->ns != token->ns ||
      again->name != token->name) {
    std::abort();
  }
  return 0;
}
