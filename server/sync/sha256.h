// SHA-256 (OpenSSL EVP) fed piece by piece as a model streams through, and the hex form that
// --sha256 and `sha256sum` use.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::sync {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view data);
  // 64 lowercase hex digits. Call once; the hasher is spent afterwards.
  std::string HexDigest();

 private:
  struct Context;
  std::unique_ptr<Context> context_;
};

// The SHA-256 of `data` in hex, for tests and small inputs.
std::string Sha256Hex(std::string_view data);

// --sha256: 64 hex digits in either case, returned lowercase.
StatusOr<std::string> ParseSha256Hex(std::string_view text);

}  // namespace mf::sync
