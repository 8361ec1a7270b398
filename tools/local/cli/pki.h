// The TLS material `modelfleet-local up` serves with, kept under DATA_DIR/pki/:
//   ca.crt, ca.key                  the cluster's own CA, made once and kept across restarts so
//                                   kubeconfigs written earlier stay valid
//   apiserver.crt, apiserver.key    the API server's certificate, signed by that CA, naming
//                                   localhost, 127.0.0.1, ::1 and the listen address; made again
//                                   when missing, not covering the address, or within 30 days of
//                                   expiry
// Keys are written owner-only (0600).
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace mf::local {

struct ServingPki {
  std::string ca_certificate_pem;
  std::string certificate_pem;  // the API server's
  std::string private_key_pem;
  bool issued = false;          // true when this call made a new serving certificate
};

// `address` is the address the server listens on; an unspecified one (0.0.0.0, ::) adds nothing
// beyond the loopback names.
StatusOr<ServingPki> EnsureServingPki(const std::filesystem::path& dir, const std::string& address);

}  // namespace mf::local
