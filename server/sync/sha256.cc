#include "server/sync/sha256.h"

#include <openssl/evp.h>

#include <cctype>
#include <cstdlib>

namespace mf::sync {

struct Sha256::Context {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~Context() { EVP_MD_CTX_free(ctx); }
};

Sha256::Sha256() : context_(std::make_unique<Context>()) {
  // Only allocation can fail here, and a process out of memory this early cannot sync anything.
  if (context_->ctx == nullptr || EVP_DigestInit_ex(context_->ctx, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() = default;

void Sha256::Update(std::string_view data) { EVP_DigestUpdate(context_->ctx, data.data(), data.size()); }

std::string Sha256::HexDigest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context_->ctx, digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

std::string Sha256Hex(std::string_view data) {
  Sha256 sha;
  sha.Update(data);
  return sha.HexDigest();
}

StatusOr<std::string> ParseSha256Hex(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      out.clear();
      break;
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (out.size() != 64) {
    return InvalidArgument("--sha256 must be 64 hex digits (as sha256sum prints them), got '" +
                           std::string(text.substr(0, 80)) + (text.size() > 80 ? "...'" : "'"));
  }
  return out;
}

}  // namespace mf::sync
